"""Mount sources as content-addressed bytes: packed on the driver, unpacked on a node.

A worker node has none of the driver's folders (the run folder, the tool snapshot, the sandbox
side of ``runner``), so every `Mount` of a `SandboxSpec` travels as a blob: a deterministic tar
of the mount's source (a folder, or one file) whose name is the sha256 of its bytes. A node
keeps each blob it unpacked under ``<cache>/<digest>/`` and mounts it from there (a blob no run
used for `UNUSED_BLOB_S` is removed, `evict_unused`); a blob is
unpacked once per node whatever the number of runs using it (the snapshot and the runtime), and
is verified against its digest before anything of it is written.

Invariants: a blob holds regular files and folders only (links, devices and anything else on
the driver side are refused, never followed), with modes 0644/0755 and no owner or time
(two packs of equal content are equal bytes); unpacking writes nothing outside its own
``<digest>`` folder (`tarfile`'s ``data`` filter) and publishes it with an atomic rename, so a
half-written blob is never mounted.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import InfrastructureError

# The member a file mount is packed as; the folder of a folder mount is the blob's root.
FILE_MEMBER = "file"
# At most this many bytes in one blob (the tool snapshot's own cap is 256 MiB).
MAX_BLOB_BYTES = 320 * 1024 * 1024
# A blob no run of the node used for this long is removed (`evict_unused`): far beyond any run's
# lifetime cap, so a blob a sandbox still mounts is never taken away.
UNUSED_BLOB_S = 24 * 3600.0


@dataclass(frozen=True)
class Blob:
    """One packed mount source.

    Attributes:
        digest: sha256 hex of ``data``.
        data: the tar bytes.
        is_file: the source was one file (member `FILE_MEMBER`), not a folder.
    """

    digest: str
    data: bytes
    is_file: bool


def _info(name: str, size: int, executable: bool, is_dir: bool) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir or executable else 0o644
    info.size = 0 if is_dir else size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _entries(root: Path) -> list[tuple[str, Path, os.stat_result]]:
    """(relative name, path, lstat) of everything under ``root``, sorted by name."""
    found: list[tuple[str, Path, os.stat_result]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        for name in sorted([*dirs, *files]):
            path = base / name
            found.append((path.relative_to(root).as_posix(), path, path.lstat()))
    found.sort(key=lambda e: e[0])
    return found


def pack(source: Path) -> Blob:
    """Pack a mount source (a folder or a regular file) into a content-addressed blob.

    Args:
        source: an absolute host path.

    Returns:
        The blob; equal content gives equal bytes and digest (no times, owners or host paths).

    Raises:
        InfrastructureError: the source is missing, holds something that is neither a regular
            file nor a folder (a link, a socket), or is larger than `MAX_BLOB_BYTES`.
    """
    try:
        top = source.lstat()
    except OSError as exc:
        raise InfrastructureError(f"cannot ship mount source {source}: {exc}") from exc
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if stat.S_ISREG(top.st_mode):
            members = [(FILE_MEMBER, source, top)]
        elif stat.S_ISDIR(top.st_mode):
            members = _entries(source)
        else:
            raise InfrastructureError(f"cannot ship mount source {source}: not a file or folder")
        for name, path, st in members:
            if stat.S_ISDIR(st.st_mode):
                tar.addfile(_info(name, 0, True, True))
                continue
            if not stat.S_ISREG(st.st_mode):
                raise InfrastructureError(
                    f"cannot ship {path}: only regular files and folders travel to a node"
                )
            total += st.st_size
            if total > MAX_BLOB_BYTES:
                raise InfrastructureError(f"mount source {source} is over {MAX_BLOB_BYTES} bytes")
            with path.open("rb") as handle:
                tar.addfile(_info(name, st.st_size, bool(st.st_mode & 0o111), False), handle)
    data = buffer.getvalue()
    return Blob(hashlib.sha256(data).hexdigest(), data, stat.S_ISREG(top.st_mode))


def fingerprint(source: Path) -> str:
    """A cheap key for a source's current content: names, sizes, modes and mtimes (no reads).

    The driver packs a source again only when this changes (`runner.backends.ray.backend`).

    Raises:
        OSError: the source cannot be listed.
    """
    top = source.lstat()
    digest = hashlib.sha256(f"{source}\0{top.st_mode}\0{top.st_size}\0{top.st_mtime_ns}\n".encode())
    if stat.S_ISDIR(top.st_mode):
        for name, _, st in _entries(source):
            digest.update(f"{name}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def unpacked_path(cache: Path, digest: str, is_file: bool) -> Path:
    """Where the blob ``digest`` is mounted from on this node (the file, or the folder)."""
    folder = cache / digest
    return folder / FILE_MEMBER if is_file else folder


def is_unpacked(cache: Path, digest: str) -> bool:
    """True when the blob ``digest`` is already unpacked in ``cache``."""
    return (cache / digest).is_dir()


def unpack(cache: Path, digest: str, data: bytes) -> Path:
    """Verify and unpack a blob into ``cache/<digest>`` (once; concurrent callers agree).

    Args:
        cache: this node's blob folder (created 0755 when missing).
        digest: the sha256 hex the blob must have.
        data: the tar bytes.

    Returns:
        ``cache/<digest>``.

    Raises:
        InfrastructureError: the bytes do not have that digest, or are not a tar of files and
            folders only.
    """
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InfrastructureError(f"blob digest is not sha256 hex: {digest[:80]!r}")
    if hashlib.sha256(data).hexdigest() != digest:
        raise InfrastructureError(f"blob {digest} arrived with other content")
    final = cache / digest
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(0o755)
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                if not (member.isfile() or member.isdir()):
                    raise InfrastructureError(f"blob {digest} holds {member.name!r}: not a file")
            tar.extractall(work, filter="data")
        for folder, _dirs, files in os.walk(work):  # readable by the sandbox's own uid
            Path(folder).chmod(0o755)
            for name in files:
                path = Path(folder) / name
                path.chmod(0o755 if path.stat().st_mode & 0o100 else 0o644)
        try:
            work.rename(final)
        except OSError:  # another run of this node unpacked it first: same content
            if not final.is_dir():
                raise
    except (OSError, tarfile.TarError) as exc:
        raise InfrastructureError(f"cannot unpack blob {digest}: {exc}") from exc
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final


@contextmanager
def cache_lock(cache: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the node cache's lock: shared to use blobs, exclusive to evict them.

    Every Ray worker process of a node shares the one cache; ``flock`` on ``cache/.lock``
    orders them (released when the holder dies).
    """
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(0o755)
    fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def mark_used(cache: Path, digest: str) -> None:
    """Stamp the blob ``digest`` as used now (its folder's mtime; `evict_unused` reads it)."""
    os.utime(cache / digest)


def evict_unused(cache: Path, older_than_s: float = UNUSED_BLOB_S, now: float | None = None) -> int:
    """Remove the blobs of ``cache`` no run used for ``older_than_s`` s, and stale unpack folders.

    Takes the cache's exclusive lock (runs that are materializing mounts finish first).

    Returns:
        How many folders were removed.
    """
    if not cache.is_dir():
        return 0
    limit = (time.time() if now is None else now) - older_than_s
    removed = 0
    with cache_lock(cache, exclusive=True):
        for entry in os.scandir(cache):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime < limit:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    return removed


__all__ = [
    "FILE_MEMBER",
    "MAX_BLOB_BYTES",
    "UNUSED_BLOB_S",
    "Blob",
    "cache_lock",
    "evict_unused",
    "fingerprint",
    "is_unpacked",
    "mark_used",
    "pack",
    "unpack",
    "unpacked_path",
]
