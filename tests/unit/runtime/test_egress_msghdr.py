"""Reading a trapped sendmsg's header and payload (`runner.runtime.egress.msghdr`): bounds."""

from __future__ import annotations

import struct

import pytest

from runner.runtime.egress import msghdr


def _memory(regions: dict[int, bytes]):  # type: ignore[no-untyped-def]
    def read(address: int, size: int) -> bytes:
        for start, data in regions.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start : address - start + size]
        raise OSError(14, "unmapped")

    return read


def _header(iov: int, iovlen: int) -> bytes:
    return struct.pack("<QI4xQQQQi4x", 0, 0, iov, iovlen, 0, 0, 0)


def test_a_gathered_datagram_is_read_in_order_up_to_the_limit() -> None:
    vectors = struct.pack("<QQQQ", 0x1000, 3, 0x2000, 5)
    read = _memory({0x100: vectors, 0x1000: b"abc", 0x2000: b"defgh"})
    assert msghdr.datagram(read, _header(0x100, 2), 0, 4096) == (8, b"abcdefgh")
    assert msghdr.datagram(read, _header(0x100, 2), 0, 4) == (8, b"abcd")  # counted, not read
    assert msghdr.names(_header(0x100, 2) * 2, 2, msghdr.MSGHDR) == [(0, 0), (0, 0)]


@pytest.mark.parametrize(
    ("iovlen", "size", "errno"),
    [(msghdr.UIO_MAXIOV + 1, 1, msghdr.EMSGSIZE), (1, msghdr.MAX_UDP_PAYLOAD + 1, 90), (1, 1, 14)],
    ids=["too-many-iovecs", "too-long", "unmapped"],
)
def test_what_the_kernel_refuses_is_refused(iovlen: int, size: int, errno: int) -> None:
    read = _memory({0x100: struct.pack("<QQ", 0x9000, size) * min(iovlen, 2048)})
    with pytest.raises(OSError) as caught:
        msghdr.datagram(read, _header(0x100, iovlen), 0, 4096)
    assert caught.value.errno == errno
