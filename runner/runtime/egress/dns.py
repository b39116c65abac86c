"""Name lookups under the egress witness: the resolver's transport is the lookup of a name.

Standard library only, Python 3.9+. A program's resolver (glibc's, Go's, musl's, curl's) sends
its query to a nameserver of ``/etc/resolv.conf`` on port 53. That address is not a
destination of its own: the query's name is. So the witness (`runner.runtime.egress.witness`)
reports such a query as a ``dns`` attempt with the name as ``host`` (the shape of the
in-process hook's ``getaddrinfo`` entries; the host merges the two: `runner.episode.outbound`):

- a UDP ``connect`` to a nameserver's port 53 (glibc, Go: connect, then ``send``/``sendmmsg``):
  the witness puts a UDP socket of its own in the caller's place, connected to `Resolver`'s
  socket on the sandbox's loopback (``SECCOMP_IOCTL_NOTIF_ADDFD``, as for the model gateway);
  every datagram that arrives there is read (at most `MAX_QUERY` bytes), its question parsed
  (`question_name`), logged, and answered ``REFUSED`` (`refused`): the lookup fails as it did
  without the witness (no network: ``EAI_AGAIN``), nothing leaves the sandbox;
- an addressed ``sendto`` to a nameserver's port 53 (musl): the payload is read from the
  caller's memory and parsed the same way; the call is answered ``ENETUNREACH``.

A payload that is not a strict DNS query (one question, no answer or authority records, labels
of 1 to 63 bytes of printable ASCII, no compression, a name of at most 253 characters) is not
a lookup: it is logged as what it is (a datagram to the nameserver's address). Residuals: with
``options use-vc`` (TCP queries) nothing is swapped and the nameserver is logged by address, as
is a ``sendmsg`` naming it, and a TCP connect to it that a resolver makes on its own; a
search-list expansion is its own name.
"""

import contextlib
import os
import socket
import struct
from typing import Any, Callable, Dict, FrozenSet, Optional, Set, Tuple

RESOLV_CONF = "/etc/resolv.conf"
DEFAULT_NAMESERVERS = frozenset({"127.0.0.1", "::1"})
"""Where resolvers query when ``resolv.conf`` names no nameserver: glibc and musl 127.0.0.1,
Go 127.0.0.1 and ::1 (resolv.conf(5): "the default is to use the name server on the local
machine")."""
MAX_RESOLV_CONF = 64 * 1024
MAX_QUERY = 4096
MAX_NAME = 253
MAX_SOCKETS = 4096  # inodes of swapped-in resolver sockets remembered (oldest forgotten)
PORT = 53
_HEADER = 12
_REFUSED = 5
Sink = Callable[[Dict[str, Any]], None]


def nameservers(path: str = RESOLV_CONF) -> FrozenSet[str]:
    """The IP addresses of the ``nameserver`` lines of ``path`` (canonical text), read bounded.

    A line that does not hold a valid IPv4 or IPv6 address is skipped; an unreadable file, or
    one whose ``options`` ask for TCP queries (``use-vc``: a stream socket, which the swap to a
    datagram socket would break), gives none (the nameserver is then logged by address). A
    readable file naming no nameserver gives `DEFAULT_NAMESERVERS`, where the resolvers then
    send their queries (the namespace backend's root filesystem has an empty file).
    """
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_RESOLV_CONF).decode("ascii", "replace")
    except OSError:
        return frozenset()
    found: Set[str] = set()
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["options"] and "use-vc" in words[1:]:
            return frozenset()
        if len(words) < 2 or words[0] != "nameserver":
            continue
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                found.add(socket.inet_ntop(family, socket.inet_pton(family, words[1])))
                break
            except (OSError, ValueError):
                continue
    return frozenset(found) if found else DEFAULT_NAMESERVERS


def _question_end(payload: bytes) -> Optional[int]:
    """Offset just past the one question of a strict query ``payload``, or None."""
    if len(payload) < _HEADER + 5:
        return None
    _id, flags, qdcount, ancount, nscount, _arcount = struct.unpack_from("!HHHHHH", payload, 0)
    if flags & 0x8000 or (flags >> 11) & 0xF or qdcount != 1 or ancount or nscount:
        return None  # a response, not a standard query, or not one question alone
    offset, size = _HEADER, 0
    while True:
        if offset >= len(payload):
            return None
        length = payload[offset]
        if length == 0:
            break
        if length > 63:
            return None  # a compression pointer (no query needs one) or a bad label
        label = payload[offset + 1 : offset + 1 + length]
        if len(label) != length or any(b < 0x21 or b > 0x7E or b == 0x2E for b in label):
            return None
        size += length + (1 if size else 0)
        if size > MAX_NAME:
            return None
        offset += 1 + length
    end = offset + 1 + 4  # the root label, QTYPE, QCLASS
    if size == 0 or end > len(payload):
        return None
    return end


def question_name(payload: bytes) -> Optional[str]:
    """The name a strict DNS query asks for (``example.com``), or None when it is not one."""
    end = _question_end(payload)
    if end is None:
        return None
    labels, offset = [], _HEADER
    while payload[offset]:
        length = payload[offset]
        labels.append(payload[offset + 1 : offset + 1 + length].decode("ascii"))
        offset += 1 + length
    return ".".join(labels)


def refused(payload: bytes) -> Optional[bytes]:
    """The ``REFUSED`` answer to the strict query ``payload`` (its id and question), or None."""
    end = _question_end(payload)
    if end is None:
        return None
    (query_id, flags) = struct.unpack_from("!HH", payload, 0)
    answer_flags = 0x8000 | (flags & 0x0100) | 0x0080 | _REFUSED  # QR, RD as asked, RA
    return struct.pack("!HHHHHH", query_id, answer_flags, 1, 0, 0, 0) + payload[_HEADER:end]


def lookup(name: str, pid: Optional[int], event: str) -> Dict[str, Any]:
    """The outbound log's attempt for a lookup of ``name`` the witness saw."""
    return {
        "kind": "dns",
        "host": name,
        "address": None,
        "port": None,
        "resolved_from": None,
        "outcome": "denied",
        "pid": pid,
        "event": event,
    }


class Resolver:
    """The witness's own resolver socket: where swapped-in sockets send their queries.

    Args:
        sink: where the lookups go (the outbound-destination log).
        servers: the nameserver addresses (`nameservers`).

    Attributes:
        sock: a UDP socket bound to ``127.0.0.1`` (non-blocking), or None when the sandbox's
            loopback refused it (then nameserver connects are logged as plain connects).
    """

    def __init__(self, sink: Sink, servers: Optional[FrozenSet[str]] = None) -> None:
        self.sink = sink
        self.servers = nameservers() if servers is None else servers
        self.sock: Optional[socket.socket] = None
        self._inodes: Dict[int, int] = {}  # swapped-in socket's inode -> its local port
        self._sources: Dict[int, Tuple[str, int]] = {}  # our local port -> (server, pid)
        if self.servers:
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sock.bind(("127.0.0.1", 0))
                sock.setblocking(False)
                self.sock = sock
            except OSError:
                self.sock = None

    def is_server(self, decoded: Dict[str, Any]) -> bool:
        """Whether a decoded sockaddr (`runner.runtime.egress.sockaddr.decode`) is a nameserver."""
        return (
            decoded.get("family") in ("inet", "inet6")
            and decoded.get("port") == PORT
            and decoded.get("address") in self.servers
        )

    def address(self) -> bytes:
        """Our socket's address as ``sockaddr_in`` bytes (what a swapped-in socket connects to)."""
        assert self.sock is not None
        host, port = self.sock.getsockname()[:2]
        packed = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port)
        return packed + socket.inet_aton(host) + bytes(8)  # sin_zero: a whole sockaddr_in

    def remember(self, sock: socket.socket, server: str, pid: int) -> None:
        """Note a socket swapped into caller ``pid`` in place of one to ``server``."""
        if len(self._inodes) >= MAX_SOCKETS:
            self._inodes.clear()
            self._sources.clear()
        port = sock.getsockname()[1]
        self._inodes[os.fstat(sock.fileno()).st_ino] = port
        self._sources[port] = (server, pid)

    def port_of(self, inode: Optional[int]) -> Optional[int]:
        """The local port of the socket with ``inode`` when it is one we swapped in, else None."""
        return None if inode is None else self._inodes.get(inode)

    def serve(self) -> None:
        """Read every query waiting on our socket: log its name, answer ``REFUSED``."""
        if self.sock is None:
            return
        while True:
            try:
                payload, source = self.sock.recvfrom(MAX_QUERY)
            except OSError:  # nothing more waiting (EAGAIN), or the socket is gone
                return
            self.receive(payload, source[1])

    def receive(self, payload: bytes, port: int) -> None:
        """One datagram from our swapped-in socket at local ``port``: log it, answer a query.

        `serve` calls it for what arrived on our socket; the witness calls it with the bytes
        of an unnamed ``sendmsg`` it read from the caller (and answers the call itself).
        """
        if self.sock is None:
            return
        server, pid = self._sources.get(port, (None, None))
        name = question_name(payload[:MAX_QUERY])
        if name is None:
            self.sink(not_a_query(server, pid, "seccomp.dns"))
            return
        self.sink(lookup(name, pid, "seccomp.dns"))
        answer = refused(payload[:MAX_QUERY])
        if answer is not None:
            with contextlib.suppress(OSError):  # the caller closed its socket meanwhile
                self.sock.sendto(answer, ("127.0.0.1", port))

    def close(self) -> None:
        """Close our socket."""
        if self.sock is not None:
            self.sock.close()


def not_a_query(server: Optional[str], pid: Optional[int], event: str) -> Dict[str, Any]:
    """A datagram to nameserver ``server`` that is no strict query: logged by its address."""
    return {
        "kind": "sendto",
        "host": None,
        "address": server,
        "port": PORT,
        "resolved_from": None,
        "outcome": "denied",
        "pid": pid,
        "event": event + ":not_a_query",
    }
