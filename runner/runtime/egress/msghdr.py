"""Reading a trapped ``sendmsg``/``sendmmsg``'s headers and payload from the caller's memory.

Standard library only, Python 3.9+. Shapes (x86_64 and aarch64, LP64; ``sys/socket.h``,
``bits/uio.h``): ``struct msghdr`` is 56 bytes (``msg_name`` pointer, ``msg_namelen`` u32 and
padding, ``msg_iov`` pointer, ``msg_iovlen`` size_t, ``msg_control`` pointer,
``msg_controllen`` size_t, ``msg_flags`` int and padding); ``struct mmsghdr`` is a ``msghdr``
then ``msg_len`` (u32, written by the kernel: the bytes that message sent) and padding, 64
bytes; ``struct iovec`` is a base pointer and a length, 16 bytes.

Everything read is hostile and of the moment: another thread of the caller may rewrite it
right after. So the witness decides on these bytes and then never lets the kernel read the
header again (`runner.runtime.egress.witness`: it sends what it read itself, or refuses).
"""

import struct
from typing import Callable, List, Tuple

MSGHDR = 56
MMSGHDR = 64
MSG_LEN_OFFSET = 56  # of msg_len in a struct mmsghdr
IOVEC = 16
UIO_MAXIOV = 1024  # the kernel's cap on msg_iovlen (EMSGSIZE above it) and on sendmmsg's vlen
MAX_UDP_PAYLOAD = 65507  # an IPv4 UDP datagram's payload at most (65535 - 8 - 20): EMSGSIZE
EMSGSIZE = 90
Reader = Callable[[int, int], bytes]  # (address, size) -> bytes, or OSError (EFAULT)


def names(headers: bytes, count: int, size: int) -> List[Tuple[int, int]]:
    """``(msg_name, msg_namelen)`` of each of ``count`` headers of ``size`` bytes in ``headers``."""
    return [struct.unpack_from("<QI", headers, index * size) for index in range(count)]


def datagram(read: Reader, headers: bytes, offset: int, limit: int) -> Tuple[int, bytes]:
    """The datagram the header at ``offset`` of ``headers`` sends: (its length, its first bytes).

    Args:
        read: reads the caller's memory.
        headers: the header bytes read (one or more headers).
        offset: where the header starts in ``headers``.
        limit: payload bytes wanted at most (the rest is counted, not read).

    Returns:
        ``(length, payload)``: the sum of the iovec lengths, and its first ``limit`` bytes
        gathered from the iovecs in order.

    Raises:
        OSError: ``EMSGSIZE`` for more than `UIO_MAXIOV` iovecs or a datagram over
            `MAX_UDP_PAYLOAD` bytes (the kernel's answers); ``EFAULT`` (from ``read``) for an
            iovec array or payload that is not mapped.
    """
    iov, iovlen = struct.unpack_from("<QQ", headers, offset + 16)
    if iovlen > UIO_MAXIOV:
        raise OSError(EMSGSIZE, "more iovecs than UIO_MAXIOV")
    vectors = read(iov, iovlen * IOVEC) if iovlen else b""
    length, payload = 0, b""
    for index in range(iovlen):
        base, size = struct.unpack_from("<QQ", vectors, index * IOVEC)
        length += size
        if length > MAX_UDP_PAYLOAD:
            raise OSError(EMSGSIZE, "datagram longer than UDP allows")
        want = min(size, limit - len(payload))
        if want > 0:
            payload += read(base, want)
    return length, payload
