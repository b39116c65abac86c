"""Attack test: reviewer packets that are small on disk and huge once read.

A packet is someone else's file (docs/threat-model.md, "Host-side input"): `safe_extract`
checks each member's size, the total and the member count, but only *after*
``tarfile.getmembers()`` has read the whole archive. That call decompresses every member's
data to skip it, reads every GNU long-name / pax header's payload into memory and keeps a
``TarInfo`` per header, so the limits are checked too late: a packet of a few hundred KiB
costs minutes of CPU or hundreds of MiB of memory before it is refused. Measured on this
machine (2 shared cores): a 2 MB packet holding one 2 GiB member of zeros ran 87 s before
"larger than the member limit"; a 670 KB packet of 300 000 empty headers ran 128 s and held
114 MB before "more than 10000 members"; a 915 KB packet whose GNU long name is 200 MiB peaked
at 420 MB. Each test fails on today's code; the cost grows linearly with the packet.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.reproduce import inputs

MIB = 1024 * 1024


class _CountingReader(io.RawIOBase):
    """A file wrapper that counts the bytes read from the packet on disk."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.inner.readinto(buffer)
        self.read_bytes += n or 0
        return n  # type: ignore[no-any-return]

    def close(self) -> None:
        self.inner.close()
        super().close()


def _zeros(gz: Any, size: int) -> None:
    block = b"\0" * (4 * MIB)
    while size > 0:
        n = min(size, len(block))
        gz.write(block[:n])
        size -= n


def _one_big_member(path: Path, size: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as gz:
        info = tarfile.TarInfo("trace.jsonl")
        info.size = size
        gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
        _zeros(gz, size + 1024)


def test_an_oversized_member_is_refused_from_its_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packet = tmp_path / "bomb.tar.gz"
    _one_big_member(packet, inputs.MAX_PACKET_MEMBER_BYTES + 8 * MIB)
    on_disk = packet.stat().st_size
    readers: list[_CountingReader] = []
    real_open = inputs.open_input

    def counting_open(path: Any, kind: str) -> Any:
        reader = _CountingReader(real_open(path, kind))
        readers.append(reader)
        return io.BufferedReader(reader)

    monkeypatch.setattr(inputs, "open_input", counting_open)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InputError, match="larger than the member limit"):
        inputs.safe_extract(packet, dest)
    # The header is in the first 512 bytes: deciding needs a few KiB, not the whole bomb.
    assert readers[0].read_bytes < on_disk // 4, (readers[0].read_bytes, on_disk)


def test_a_huge_long_name_header_is_refused_without_holding_it(tmp_path: Path) -> None:
    packet = tmp_path / "longname.tar.gz"
    size = 64 * MIB
    with gzip.open(packet, "wb", compresslevel=9) as gz:
        info = tarfile.TarInfo("././@LongLink")
        info.type = tarfile.GNUTYPE_LONGNAME
        info.size = size
        gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
        gz.write(b"a" * size)
        gz.write(tarfile.TarInfo("x").tobuf())
        gz.write(b"\0" * 1024)
    assert packet.stat().st_size < 1 * MIB
    dest = tmp_path / "dest"
    dest.mkdir()
    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            inputs.safe_extract(packet, dest)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, f"peak {peak / MIB:.0f} MiB for a packet under 1 MiB"


def test_the_member_count_limit_stops_reading_at_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packet = tmp_path / "many.tar.gz"
    header = tarfile.TarInfo("a").tobuf()
    with gzip.open(packet, "wb", compresslevel=9) as gz:
        gz.write(header * (inputs.MAX_PACKET_MEMBERS * 3))
        gz.write(b"\0" * 1024)
    read = {"headers": 0}
    real_next = tarfile.TarFile.next

    def counting_next(self: tarfile.TarFile) -> Any:
        read["headers"] += 1
        return real_next(self)

    monkeypatch.setattr(tarfile.TarFile, "next", counting_next)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InputError):
        inputs.safe_extract(packet, dest)
    assert read["headers"] <= inputs.MAX_PACKET_MEMBERS + 2, read
