"""Which kind of socket a descriptor of another process holds, from ``/proc`` (no ``pidfd_getfd``).

Standard library only, Python 3.9+. ``/proc/PID/fd/N`` names a socket ``socket:[INODE]``; the
caller's network namespace lists its sockets by inode in ``/proc/PID/net/unix`` (every
``AF_UNIX`` socket, bound or not), ``netlink``, and ``tcp``/``tcp6`` (hashed TCP sockets:
listening, connecting, connected, or bound). Reading either needs the same ptrace access the
witness already has. Each table is read at most `MAX_TABLE_BYTES`; a socket not found in the
table looked at is not of that kind. A kind found is remembered by inode (at most `MAX_KNOWN`):
the descriptor is still looked up every time, the tables only once per socket.
"""

import os
from typing import Dict, Optional

MAX_TABLE_BYTES = 4 << 20
MAX_KNOWN = 4096  # sockets whose kind is remembered (a socket's kind never changes)
_known: Dict[bytes, str] = {}
# file -> 0-based column of the inode
_TABLES = (("unix", ("unix",), 6), ("netlink", ("netlink",), 9), ("tcp", ("tcp", "tcp6"), 9))


def _inode(pid: int, fd: int) -> Optional[bytes]:
    try:
        link = os.readlink("/proc/{}/fd/{}".format(pid, fd))
    except OSError:
        return None
    if not (link.startswith("socket:[") and link.endswith("]")):
        return None
    return link[8:-1].encode()


def _listed(pid: int, name: str, column: int, inode: bytes) -> bool:
    try:
        with open("/proc/{}/net/{}".format(pid, name), "rb") as handle:
            table = handle.read(MAX_TABLE_BYTES)
    except OSError:
        return False
    for line in table.split(b"\n")[1:]:
        fields = line.split()
        if len(fields) > column and fields[column] == inode:
            return True
    return False


def socket_inode(pid: int, fd: int) -> Optional[int]:
    """The inode of the socket at ``fd`` of ``pid`` now, or None (not a socket, unreadable)."""
    inode = _inode(pid, fd)
    return None if inode is None else int(inode)


def socket_kind(pid: int, fd: int) -> Optional[str]:
    """``unix``, ``netlink`` or ``tcp`` for the socket at ``fd`` of ``pid`` now, else None.

    None also for a descriptor that is not a socket, a socket of another kind (UDP, raw, ping,
    an unhashed TCP socket), and anything unreadable. The answer holds for the moment of the
    call only: another thread of the caller can replace the descriptor afterwards.
    """
    inode = _inode(pid, fd)
    if inode is None:
        return None
    if inode in _known:  # found before: a socket's inode is its own while it is open
        return _known[inode]
    for kind, names, column in _TABLES:
        if any(_listed(pid, name, column, inode) for name in names):
            if len(_known) >= MAX_KNOWN:
                _known.clear()
            _known[inode] = kind
            return kind
    return None
