"""Decoding a ``struct sockaddr`` read from another process (hostile bytes, bounded).

Shapes (``sys/socket.h``, ``netinet/in.h``, ``sys/un.h``, ``linux/netlink.h``): a 2-byte family
in host order first; ``sockaddr_in`` then the port (network order) and 4 address bytes;
``sockaddr_in6`` the port, flow info and 16 address bytes; ``sockaddr_un`` a path (NUL-ended) or,
when it starts with a NUL, an abstract name. Anything shorter than its family needs is
``truncated``.
"""

import socket
import struct
from typing import Any, Dict, Optional

MAX_SOCKADDR = 128  # sizeof(struct sockaddr_storage)
AF_NETLINK = 16
_FAMILIES = {
    0: "unspec",
    socket.AF_UNIX: "unix",
    socket.AF_INET: "inet",
    socket.AF_INET6: "inet6",
    AF_NETLINK: "netlink",
    17: "packet",
}
_V4_MAPPED = bytes(10) + b"\xff\xff"  # ::ffff:a.b.c.d
LOCAL_FAMILIES = frozenset({"unix", "netlink", "unspec"})  # never leave the kernel


def decode(raw: bytes) -> Dict[str, Any]:
    """``{"family": name, "address": text|None, "port": int|None}`` of sockaddr bytes ``raw``.

    ``family`` is ``inet``/``inet6``/``unix``/``netlink``/``unspec``/``packet``, ``af<N>`` for
    another number, or ``truncated``. ``address`` is the IP address as text (an IPv4-mapped
    IPv6 address as its IPv4 form), the unix path (an abstract one as ``@name``), or None.
    """
    if len(raw) < 2:
        return {"family": "truncated", "address": None, "port": None}
    (number,) = struct.unpack_from("=H", raw, 0)
    family = _FAMILIES.get(number, "af{}".format(number))
    address: Optional[str] = None
    port: Optional[int] = None
    if family == "inet":
        if len(raw) < 8:
            return {"family": "truncated", "address": None, "port": None}
        port = struct.unpack_from("!H", raw, 2)[0]
        address = socket.inet_ntop(socket.AF_INET, raw[4:8])
    elif family == "inet6":
        if len(raw) < 24:
            return {"family": "truncated", "address": None, "port": None}
        port = struct.unpack_from("!H", raw, 2)[0]
        if raw[8:20] == _V4_MAPPED:
            address = socket.inet_ntop(socket.AF_INET, raw[20:24])
        else:
            address = socket.inet_ntop(socket.AF_INET6, raw[8:24])
    elif family == "unix":
        path = raw[2:]
        if path[:1] == b"\0":
            address = "@" + path[1:].decode("utf-8", "backslashreplace")
        else:
            address = path.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
    return {"family": family, "address": address, "port": port}


def is_loopback(address: Optional[str]) -> bool:
    """Whether ``address`` (text from `decode`) is an IPv4 (127/8) or the IPv6 loopback address.

    Not `ipaddress`: it costs milliseconds to import, at every run's start.
    """
    if not address:
        return False
    if address == "::1":
        return True
    try:
        return socket.inet_pton(socket.AF_INET, address)[0] == 127
    except OSError:
        return False
