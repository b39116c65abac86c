"""What one audited event names: a destination, a child's argv, a foreign library.

Standard library only, Python 3.9+. Pure functions over an audit event's ``args`` (CPython's
audit events table, DOCKER-NOTES.md); `runner.runtime.egress.audit` keeps the state (the
destinations seen, the sinks) and calls these from its hook. Every text field is cut to
`MAX_FIELD_CHARS`; nothing here raises on odd arguments other than what the hook catches.
"""

import os
from typing import Any, Dict, List, Optional, Tuple

from runner.wire.destinations import destination_key

__all__ = [
    "LOOKUP_EVENTS",
    "MAX_FIELD_CHARS",
    "argv_of",
    "destination",
    "destination_key",
    "foreign_code",
    "is_ip",
    "lookup",
    "text",
]

MAX_FIELD_CHARS = 512
LOOKUP_EVENTS = frozenset(
    {
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
    }
)
Destination = Tuple[str, Optional[str], Optional[str], Any, Optional[str], Dict[str, Any]]


def text(value: Any) -> Optional[str]:
    """``value`` as text of at most `MAX_FIELD_CHARS` (bytes decoded with backslashes)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    found = value if isinstance(value, str) else str(value)
    return found[:MAX_FIELD_CHARS]


def _port(value: Any) -> Any:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return text(value)


def is_ip(host: Optional[str]) -> bool:
    """True when ``host`` is an IPv4 or IPv6 literal (a zone suffix ``%eth0`` allowed)."""
    if not host:
        return False
    import ipaddress  # only when a handler first runs: most children never open a socket

    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        return False


def _transport(sock: Any) -> Optional[str]:
    import socket

    kind = getattr(sock, "type", None)
    if kind == socket.SOCK_STREAM:
        return "tcp"
    if kind == socket.SOCK_DGRAM:
        return "udp"
    return None if kind is None else text(kind)


def lookup(event: str, args: Tuple[Any, ...]) -> Tuple[Optional[str], Any]:
    """The (host, port) a name-lookup event asks for (the port only for ``getaddrinfo``)."""
    host = text(args[0]) if args else None
    port = _port(args[1]) if event == "socket.getaddrinfo" and len(args) > 1 else None
    return host, port


def destination(
    event: str, args: Tuple[Any, ...], last_lookup: Optional[Tuple[Any, Any]]
) -> Optional[Destination]:
    """The destination a connect/send/HTTP/URL event names, or None when it names none.

    Args:
        event: ``socket.connect``/``sendto``/``sendmsg``, ``http.client.connect`` or
            ``urllib.Request``.
        args: the event's arguments.
        last_lookup: (host, port) of the name looked up last in this thread: it becomes the
            connect's ``resolved_from`` when the address differs from it, for the same port.

    Returns:
        (kind, host, address, port, resolved_from, extra fields), or None (a ``sendmsg`` on a
        connected socket: its connect was reported).
    """
    if event == "http.client.connect":
        host = text(args[1]) if len(args) > 1 else None
        port = _port(args[2]) if len(args) > 2 else None
        return ("http", host, host if is_ip(host) else None, port, None, {})
    if event == "urllib.Request":
        return _url(args)
    sock = args[0] if args else None
    address = args[1] if len(args) > 1 else None
    if address is None:
        return None
    kind = event.split(".", 1)[1]
    if isinstance(address, (str, bytes)):  # AF_UNIX path (or abstract name)
        return (kind, None, text(address), None, None, {"family": "unix"})
    if isinstance(address, tuple) and len(address) >= 2:
        addr, port = text(address[0]), _port(address[1])
        resolved_from = None
        last = last_lookup
        if last and last[1] == port and last[0] and last[0] != addr and not is_ip(last[0]):
            resolved_from = last[0]
        extra = {"transport": _transport(sock)}
        return (kind, resolved_from or addr, addr, port, resolved_from, extra)
    return (kind, None, text(address), None, None, {})


def _url(args: Tuple[Any, ...]) -> Destination:
    from urllib.parse import urlsplit

    url = text(args[0]) if args else None
    host, port = None, None
    if url:
        parts = urlsplit(url)
        host = parts.hostname
        try:
            port = parts.port or {"http": 80, "https": 443, "ftp": 21}.get(parts.scheme)
        except ValueError:
            port = None
    method = text(args[3]) if len(args) > 3 else None
    return ("url", host, host if is_ip(host) else None, port, None, {"url": url, "method": method})


def argv_of(value: Any) -> List[str]:
    """A child's argv (``str``, ``bytes``, path-likes or a sequence of them) as texts."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [text(value) or ""]
    try:
        return [text(os.fspath(v)) or "" for v in value]
    except TypeError:
        return [text(v) or "" for v in value]


def foreign_code(
    event: str, args: Tuple[Any, ...]
) -> Optional[Tuple[Tuple[Any, ...], Dict[str, Any]]]:
    """The coverage note of a ``ctypes.dlopen``/``ctypes.dlsym`` event: (key, fields) or None.

    ``import ctypes`` opens the main program (``dlopen(None)``): not a foreign library yet.
    """
    if event == "ctypes.dlopen":
        name = args[0] if args else None
        if name is None:
            return None
        library = text(name)
        return ("library", library), {"reason": "ctypes library load", "library": library}
    handle = args[0] if args else None
    library = text(getattr(handle, "_name", None)) or "<main program>"
    symbol = text(args[1]) if len(args) > 1 else None
    reason = "ctypes symbol lookup (a foreign call can bypass the socket module)"
    return ("symbol", library, symbol), {"reason": reason, "library": library, "symbol": symbol}
