"""Check a reviewer packet's tar headers as they stream, before `tarfile` reads any of it.

``tarfile.getmembers()`` decompresses every member's data to skip it, reads each GNU long-name
and pax header's payload whole into memory and keeps one ``TarInfo`` per header, so limits
checked on its result come too late: a packet of a few hundred KiB could cost minutes of CPU
or hundreds of MiB (measured: a 2 MB packet holding a 2 GiB member ran 87 s; 300 000
empty headers in 670 KB ran 128 s and held 114 MB; a 200 MiB long name peaked at 420 MB).

`scan_headers` walks the decompressed stream header by header (512-byte blocks, ustar/GNU/pax
layout of POSIX.1-2001 ``pax`` and GNU tar's manual, "Basic Tar Format"): each limit is checked
on the header that breaks it, before its data is read. A member's data is skipped in 1 MiB reads
only when the header allowed it, so the work done is bounded by the limits themselves. The
extraction that follows (`runner.reproduce.inputs.safe_extract`) checks the same limits again
member by member: the scan is the guard against what ``tarfile`` would read before that.
"""

from __future__ import annotations

import gzip
import zlib
from typing import BinaryIO

from runner.errors import InputError

__all__ = ["MAX_HEADER_PAYLOAD_BYTES", "scan_headers"]

BLOCK = 512
# A GNU long name/link or a pax extended header longer than this is refused (a path of
# `runner.domain.ids` rules is far shorter; pax records of a real packet are a few hundred bytes).
MAX_HEADER_PAYLOAD_BYTES = 64 * 1024
_META_TYPES = (b"L", b"K", b"x", b"g")  # GNU long name, long link; pax extended, global
_SKIP_CHUNK = 1 << 20
# Types whose header's size is not followed by data (``tarfile``: a supported type that is not
# a regular file); every other type, unknown ones included, is followed by ``size`` bytes.
_NO_DATA_TYPES = (b"1", b"2", b"3", b"4", b"5", b"6")


def _number(field: bytes) -> int | None:
    """A header's numeric field: octal text, or GNU base-256 (high bit set); None if neither."""
    if field[:1] and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        return None


def _valid(block: bytes) -> bool:
    """The header's checksum holds (unsigned or signed sum, as ``tarfile`` accepts)."""
    recorded = _number(block[148:156])
    header = block[:148] + b" " * 8 + block[156:]
    unsigned = sum(header)
    signed = sum(b - 256 if b > 127 else b for b in header)
    return recorded in (unsigned, signed)


def _read(stream: gzip.GzipFile, size: int) -> bytes:
    return stream.read(size) if size > 0 else b""


def _pax_size(payload: bytes) -> int | None:
    """The ``size`` record of a pax extended header's payload (``<length> size=<n>``), if any."""
    size = None
    for record in payload.split(b"\n"):
        _, _, keyword_value = record.partition(b" ")
        keyword, equals, value = keyword_value.partition(b"=")
        if equals and keyword == b"size":
            try:
                size = int(value)
            except ValueError:
                return None
    return size


def scan_headers(
    stream: BinaryIO, name: str, *, max_members: int, max_member_bytes: int, max_total_bytes: int
) -> None:
    """Walk the gzip tar ``stream``'s headers; refuse the first one over a limit.

    Args:
        stream: the packet file, at its start (it is read, not closed).
        name: the packet as named in errors.
        max_members: most members (files and folders; meta headers do not count).
        max_member_bytes: largest member.
        max_total_bytes: largest sum of members.

    Raises:
        InputError: a meta header over `MAX_HEADER_PAYLOAD_BYTES`, more than ``max_members``
            members, a member over ``max_member_bytes``, members together over
            ``max_total_bytes``, or a stream that is not gzip. A header the scan cannot read
            (bad checksum, truncated) ends the scan: ``tarfile`` then judges the same bytes.
    """
    members = total = 0
    pax_size: int | None = None
    try:
        tar = gzip.GzipFile(fileobj=stream, mode="rb")
        while True:
            block = _read(tar, BLOCK)
            if len(block) < BLOCK or block == bytes(BLOCK) or not _valid(block):
                return
            kind = block[156:157]
            size = _number(block[124:136])
            if size is None or size < 0:
                return
            if kind in _META_TYPES:
                if size > MAX_HEADER_PAYLOAD_BYTES:
                    raise InputError(
                        f"a tar header of {size} bytes (long name or pax record); at most "
                        f"{MAX_HEADER_PAYLOAD_BYTES} are read",
                        file=name,
                    )
                payload = _read(tar, size)
                _read(tar, -size % BLOCK)
                if kind == b"x":
                    pax_size = _pax_size(payload)
                continue
            if pax_size is not None:
                size, pax_size = pax_size, None
            members += 1
            if members > max_members:
                raise InputError(f"more than {max_members} members", file=name)
            if size > max_member_bytes:
                raise InputError(
                    f"member {members}: larger than the member limit ({max_member_bytes} bytes)",
                    file=name,
                )
            total += size
            if total > max_total_bytes:
                raise InputError(
                    f"the members unpack to more than {max_total_bytes} bytes", file=name
                )
            if kind in _NO_DATA_TYPES:  # as tarfile: links, devices, folders carry no data
                size = 0
            padded = size + (-size % BLOCK)
            while padded > 0:
                chunk = _read(tar, min(padded, _SKIP_CHUNK))
                if not chunk:
                    return
                padded -= len(chunk)
    except (OSError, EOFError, zlib.error) as exc:  # a damaged stream, at any depth
        raise InputError(f"not a readable reviewer packet (.tar.gz): {exc}", file=name) from exc
