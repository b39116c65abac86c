"""Host folders and files as tar archives the engine's API takes, with the digest of their content.

Used by the copy mode of `runner.backends.docker.hostfiles` (no host path is bind-mounted: the
runtime is baked into an image built through the API, the tools are copied into volumes with
``put_archive``). Every archive is deterministic: members in sorted order of their relative
path, owner and group 0 (``root``), modification time 0, folders 0755, files 0644 (0755 when
the host file is executable by its owner); nothing else of the host (users, times, other mode
bits) goes in. So the same content gives the same archive, and its sha256 names it.

Only folders and regular files are archived; ``__pycache__`` folders and ``.pyc`` files are
left out (the image compiles its own). A symbolic link or a special file is refused with an
`InfrastructureError`: the tool snapshot holds none (`runner.tools.snapshot`), and the
runtime's folders none either, so one here is a bug, never something to follow.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from runner.errors import InfrastructureError

__all__ = ["Archive", "Entry", "archive", "entries_of"]

DIR_MODE = 0o755
FILE_MODE = 0o644
EXEC_MODE = 0o755
_SPOOL_BYTES = 8 * 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """One member of an archive.

    Attributes:
        name: its path inside the archive (POSIX, relative, no ``..``).
        source: the host file, or None for a folder.
        executable: the host file is executable by its owner (mode 0755 in the archive).
    """

    name: str
    source: Path | None
    executable: bool = False


@dataclass
class Archive:
    """A tar archive spooled to memory or a temporary file, with its sha256.

    Attributes:
        data: the archive, positioned at its start (close it when done).
        digest: sha256 hex of the archive's bytes.
        size: its length in bytes.
        members: how many entries it holds.
    """

    data: IO[bytes]
    digest: str
    size: int
    members: int

    def close(self) -> None:
        """Release the spooled archive."""
        self.data.close()


def _skip(name: str) -> bool:
    return name == "__pycache__" or name.endswith(".pyc")


def entries_of(source: Path, prefix: str = "") -> Iterator[Entry]:
    """The archive entries of ``source`` (a folder's content, or one file) under ``prefix``.

    Args:
        source: a host folder (its content, not the folder itself, unless ``prefix`` names
            it) or a regular file (then ``prefix`` is its name in the archive).
        prefix: the path the content goes under inside the archive ("": the root).

    Raises:
        InfrastructureError: a symbolic link or a special file, or ``source`` is missing.
    """
    try:
        top = os.lstat(source)
    except OSError as exc:
        raise InfrastructureError(f"cannot read {source}: {exc.strerror}") from exc
    if stat.S_ISREG(top.st_mode):
        if not prefix:
            raise InfrastructureError(f"a file needs a name in the archive: {source}")
        yield Entry(prefix, source, bool(top.st_mode & stat.S_IXUSR))
        return
    if not stat.S_ISDIR(top.st_mode):
        raise InfrastructureError(f"{source} is neither a folder nor a regular file")
    if prefix:
        yield Entry(prefix, None)
    for path in sorted(source.iterdir(), key=lambda p: p.name):
        if _skip(path.name):
            continue
        name = str(PurePosixPath(prefix, path.name)) if prefix else path.name
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            yield from entries_of(path, name)
        elif stat.S_ISREG(mode):
            yield Entry(name, path, bool(mode & stat.S_IXUSR))
        else:
            raise InfrastructureError(
                f"{path} is a link or a special file: only folders and regular files are copied"
            )


def archive(entries: Sequence[Entry], *, extra: dict[str, bytes] | None = None) -> Archive:
    """A deterministic tar of ``entries`` (and ``extra`` files given as bytes), with its digest.

    Args:
        entries: what goes in, in the order given (`entries_of` gives sorted order).
        extra: more files, ``{name: content}`` (e.g. a Dockerfile), added after ``entries``.

    Raises:
        InfrastructureError: a file could not be read.
    """
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
    members = 0
    try:
        with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                info = _info(entry.name)
                if entry.source is None:
                    info.type, info.mode = tarfile.DIRTYPE, DIR_MODE
                    tar.addfile(info)
                else:
                    try:
                        with entry.source.open("rb") as handle:
                            info.size = os.fstat(handle.fileno()).st_size
                            info.mode = EXEC_MODE if entry.executable else FILE_MODE
                            tar.addfile(info, handle)
                    except OSError as exc:
                        raise InfrastructureError(
                            f"cannot read {entry.source}: {exc.strerror}"
                        ) from exc
                members += 1
            for name, content in (extra or {}).items():
                info = _info(name)
                info.size, info.mode = len(content), FILE_MODE
                tar.addfile(info, io.BytesIO(content))
                members += 1
        size = spool.tell()
        spool.seek(0)
        digest = hashlib.sha256()
        while chunk := spool.read(_CHUNK):
            digest.update(chunk)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return Archive(spool, digest.hexdigest(), size, members)


def _info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    return info
