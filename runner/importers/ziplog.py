r"""Read members of a zip archive a source wrote (an Inspect ``.eval`` log), bounded and strict.

The archive is hostile input: its directory may lie about sizes, its members may inflate to
gigabytes (zip bombs), its names may be anything. This reader:

- opens the file through the one bounded reader (`runner.inputfile.open_input`, kind
  ``import source``: a regular file of at most 512 MiB) and lets `zipfile` parse only the
  central directory (any failure is an `InputError` naming the file);
- refuses more than `MAX_MEMBERS` members, encrypted members, and names that are not plain
  relative paths (no ``..``, no leading ``/`` or ``\\``, no control characters): names select
  members and never become paths;
- reads a member's compressed bytes itself (the local header is parsed, the sizes are the
  central directory's) and inflates them with a bound: stored, deflate (``zlib``) and
  Zstandard (method 93, what Inspect writes since 2025; ``compression.zstd`` on Python 3.14,
  else the ``zstandard`` package, the optional extra ``inspect``), never more than
  `MAX_MEMBER_BYTES` of output per member nor `MAX_TOTAL_BYTES` for the archive, and checks
  the output against the declared size and CRC-32.

Nothing from the archive is executed or imported; inspect-ai itself is not needed.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from runner.errors import InputError
from runner.inputfile import open_input

__all__ = [
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "ZipLog",
    "is_zip",
]

MAX_MEMBERS = 100_000
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
_STORED, _DEFLATED, _ZSTD = 0, 8, 93
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CHUNK = 1 << 20


def is_zip(path: Path) -> bool:
    r"""Whether ``path`` starts like a zip archive (``PK\\x03\\x04``), read through the bounds."""
    with open_input(path, "import source") as handle:
        return handle.read(4) == b"PK\x03\x04"


def _plain_name(name: str) -> bool:
    if not name or name.startswith(("/", "\\")) or "\\" in name:
        return False
    if any(not c.isprintable() for c in name):
        return False
    return ".." not in name.split("/")


def _zstd_reader(raw: bytes) -> BinaryIO:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+

        reader: BinaryIO = zstd.ZstdFile(io.BytesIO(raw))
        return reader
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise InputError(
            "a Zstandard-compressed member (as Inspect writes logs): install the optional "
            "extra 'inspect' (pip install 'sandbox-replay[inspect]', the zstandard package)"
        ) from None
    stream: BinaryIO = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw))
    return stream


class ZipLog:
    """A zip archive's members by name, read one at a time under the module's bounds.

    Use as a context manager. ``names`` lists the members (plain names only).

    Raises:
        InputError: (on open) not a zip archive, a broken directory, too many members, a
            name that is not plain (file and member index named).
    """

    def __init__(self, path: Path) -> None:
        self.file = str(path)
        self._handle = open_input(path, "import source")
        self._inflated = 0
        try:
            self._zip = zipfile.ZipFile(self._handle)
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error) as exc:
            self._handle.close()
            raise InputError(f"not a readable zip archive: {exc}", file=self.file) from None
        if len(infos) > MAX_MEMBERS:
            self._handle.close()
            raise InputError(f"more than {MAX_MEMBERS} members: not read", file=self.file)
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for i, info in enumerate(infos):
            if not _plain_name(info.filename):
                self._handle.close()
                raise InputError(
                    f"member {i} has a name that is not a plain relative path: {info.filename!r}",
                    file=self.file,
                )
            self._infos.setdefault(info.filename, info)

    def __enter__(self) -> ZipLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

    @property
    def names(self) -> list[str]:
        """The members' names, in the archive's order."""
        return list(self._infos)

    def read(self, name: str) -> bytes:
        """The bytes of member ``name``, inflated and checked.

        Raises:
            InputError: no such member; encrypted; an unknown compression method; it
                inflates past `MAX_MEMBER_BYTES`, past the archive's `MAX_TOTAL_BYTES`, or to
                another size than declared; a CRC-32 mismatch (file and member named).
        """
        info = self._infos.get(name)
        if info is None:
            raise InputError(f"no member {name!r}", file=self.file)
        where = f"member {name!r}"
        if info.flag_bits & 0x1:
            raise InputError(f"{where} is encrypted", file=self.file)
        if info.file_size > MAX_MEMBER_BYTES:
            raise InputError(
                f"{where} declares {info.file_size} bytes, more than the {MAX_MEMBER_BYTES} read",
                file=self.file,
            )
        raw = self._raw(info, where)
        limit = min(MAX_MEMBER_BYTES, MAX_TOTAL_BYTES - self._inflated)
        data = self._inflate(raw, info.compress_type, limit, where)
        if len(data) > limit:
            raise InputError(
                f"{where} inflates past {limit} bytes (the reader's bound): not read",
                file=self.file,
            )
        if len(data) != info.file_size:
            raise InputError(
                f"{where} inflates to {len(data)} bytes, not the {info.file_size} declared",
                file=self.file,
            )
        if zlib.crc32(data) != info.CRC:
            raise InputError(f"{where} fails its CRC-32 check", file=self.file)
        self._inflated += len(data)
        return data

    def _raw(self, info: zipfile.ZipInfo, where: str) -> bytes:
        handle = self._handle
        try:
            handle.seek(info.header_offset)
            head = handle.read(_LOCAL.size)
            if len(head) != _LOCAL.size:
                raise InputError(f"{where}: its local header is cut off", file=self.file)
            fields = _LOCAL.unpack(head)
            if fields[0] != b"PK\x03\x04":
                raise InputError(f"{where}: no local header at its offset", file=self.file)
            handle.seek(info.header_offset + _LOCAL.size + fields[9] + fields[10])
            raw = handle.read(info.compress_size)
        except (OSError, ValueError) as exc:
            raise InputError(f"{where}: cannot read it: {exc}", file=self.file) from None
        if len(raw) != info.compress_size:
            raise InputError(f"{where} is cut off", file=self.file)
        return raw

    def _inflate(self, raw: bytes, method: int, limit: int, where: str) -> bytes:
        if method == _STORED:
            return raw[: limit + 1]
        if method == _DEFLATED:
            inflater = zlib.decompressobj(-15)
            try:
                data = inflater.decompress(raw, limit + 1)
            except zlib.error as exc:
                raise InputError(f"{where}: broken deflate data: {exc}", file=self.file) from None
            return data
        if method == _ZSTD:
            return b"".join(self._bounded(lambda: _zstd_reader(raw), limit, where))
        raise InputError(f"{where}: compression method {method} is not read", file=self.file)

    def _bounded(self, open_: Callable[[], BinaryIO], limit: int, where: str) -> Iterator[bytes]:
        try:
            with open_() as stream:
                left = limit + 1
                while left > 0:
                    chunk = stream.read(min(_CHUNK, left))
                    if not chunk:
                        return
                    left -= len(chunk)
                    yield chunk
        except InputError:
            raise
        except Exception as exc:  # the decoder's own error class, whichever library it is
            raise InputError(f"{where}: broken Zstandard data: {exc}", file=self.file) from None
