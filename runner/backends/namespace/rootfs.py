"""The sandbox image's root filesystem for the namespace backend, extracted once per image id.

The local Docker image is exported once (``docker export`` of a created, never started
container, through the docker SDK) and unpacked under ``ROOT/rootfs/<image id>/tree``, with
what the image's config says of the process (``Env``, ``WorkingDir``) in ``image.json`` beside
it. Later sandboxes of the same image id bind that tree read-only: no engine is involved after
the first run. A folder already holding a root filesystem (the offline debootstrap tree that
``images/build-base-offline.sh`` makes) can be used as it is (`RootFs.from_folder`).

The tar is hostile input (it is whatever the image holds): every member passes
``tarfile.tar_filter`` (no absolute names, nothing outside the destination, also through links
already unpacked; setuid/setgid bits and group/other write cleared), device nodes and FIFOs are
skipped (the sandbox gets bwrap's own minimal ``/dev``), and the archive is bounded
(`MAX_MEMBERS` entries, `MAX_BYTES` of file data, `MAX_NAME` characters a name). A tree is
unpacked into a private temporary folder and renamed into place when complete, so a crash
leaves only a ``.partial-*`` folder, which `sweep_partials` removes.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = [
    "HOSTS",
    "MAX_BYTES",
    "MAX_MEMBERS",
    "RootFs",
    "ensure_hosts",
    "extract_rootfs",
    "image_rootfs",
    "sweep_partials",
]

MAX_MEMBERS = 500_000
MAX_BYTES = 16 * 1024**3
MAX_NAME = 4096
PARTIAL_PREFIX = ".partial-"
PARTIAL_STALE_S = 3600.0
_SKIPPED_TYPES = (tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE)
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class RootFs:
    """A root filesystem ready to be bound read-only, and the image's process config.

    Attributes:
        tree: the folder holding ``/`` of the image.
        image_id: the image id (``sha256:...``) or ``dir:<folder>`` for a plain folder.
        env: the image's ``Env`` (``KEY=VALUE`` entries as a mapping).
        workdir: the image's ``WorkingDir`` ("" when unset).
    """

    tree: Path
    image_id: str
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = ""

    @classmethod
    def from_folder(cls, folder: Path) -> RootFs:
        """A root filesystem already unpacked in ``folder`` (e.g. a debootstrap tree).

        Raises:
            InfrastructureError: ``folder`` has no ``usr`` folder (not a root filesystem).
        """
        if not (folder / "usr").is_dir():
            raise InfrastructureError(f"{folder} is not a root filesystem (no usr/)")
        return cls(tree=folder, image_id=f"dir:{folder}", env={"PATH": _DEFAULT_PATH})


class _ChunkReader:
    """A read-only file over an iterator of byte chunks (the export stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            try:
                self._buffer += next(self._chunks)
            except StopIteration:
                break
        if size < 0:
            size = len(self._buffer)
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


class _Bounds:
    """The member filter: `tarfile.tar_filter`, no device nodes, bounded size and count."""

    def __init__(self, max_members: int, max_bytes: int) -> None:
        self.members = 0
        self.bytes = 0
        self.max_members, self.max_bytes = max_members, max_bytes

    def __call__(self, member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        self.members += 1
        self.bytes += max(0, member.size)
        if self.members > self.max_members or self.bytes > self.max_bytes:
            raise InfrastructureError(
                f"the image's root filesystem exceeds {self.max_members} entries or "
                f"{self.max_bytes} bytes: refused"
            )
        if len(member.name) > MAX_NAME or "\x00" in member.name:
            raise InfrastructureError("the image's root filesystem has an over-long entry name")
        if member.type in _SKIPPED_TYPES:
            return None
        return tarfile.tar_filter(member, dest)


def extract_rootfs(
    stream: IO[bytes] | Any,
    dest: Path,
    *,
    max_members: int = MAX_MEMBERS,
    max_bytes: int = MAX_BYTES,
) -> None:
    """Unpack the tar read from ``stream`` into the new folder ``dest`` under the rules above.

    Args:
        stream: a file-like object with ``read`` (read sequentially, never seeked).
        dest: a folder that does not exist yet.
        max_members: most entries accepted.
        max_bytes: most bytes of file data accepted.

    Raises:
        InfrastructureError: the archive breaks a rule or is not a tar (``dest`` is removed).
    """
    dest.mkdir(mode=0o755)
    bounds = _Bounds(max_members, max_bytes)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            archive.extractall(dest, filter=bounds)  # noqa: S202 - every member filtered (_Bounds)
    except (tarfile.TarError, OSError, ValueError, KeyError) as exc:  # KeyError: a bad hard link
        shutil.rmtree(dest, ignore_errors=True)
        raise InfrastructureError(f"cannot unpack the image's root filesystem: {exc}") from exc
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    dest.chmod(0o755)
    log.debug("rootfs_extracted", dest=str(dest), members=bounds.members, bytes=bounds.bytes)


# What the Docker engine writes at /etc/hosts of a container with network "none" (read from
# `docker run --network none ... cat /etc/hosts` on engine 20.10): the image's own file is an
# empty placeholder, so without it "localhost" does not resolve in a namespace sandbox.
HOSTS = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "ff00::0\tip6-mcastprefix\n"
    "ff02::1\tip6-allnodes\n"
    "ff02::2\tip6-allrouters\n"
)


def ensure_hosts(tree: Path) -> bool:
    """Give the exported tree Docker's ``/etc/hosts`` when the image's is missing or empty.

    Only a plain ``etc`` folder of the tree is written (never through a symlink: the tree is
    the image's, and a link could point anywhere on the host); an image's own non-empty file
    stays. Runs on every tree the backend uses, so trees exported before this rule get it too.

    Returns:
        True when the file was written.
    """
    etc = tree / "etc"
    hosts = etc / "hosts"
    if etc.is_symlink() or not etc.is_dir() or hosts.is_symlink():
        return False
    if hosts.exists() and (not hosts.is_file() or hosts.stat().st_size > 0):
        return False
    partial = etc / f".hosts-{uuid.uuid4().hex[:8]}"
    partial.write_text(HOSTS, encoding="ascii")
    partial.chmod(0o644)
    partial.replace(hosts)
    return True


def _cache_key(image_id: str) -> str:
    algo, _, digest = image_id.partition(":")
    if not digest.isalnum() or not algo.isalnum():
        raise InfrastructureError(f"unexpected image id from the engine: {image_id!r}")
    return f"{algo}-{digest}"


def _env_of(config: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in config.get("Env") or []:
        if isinstance(entry, str) and "=" in entry:
            key, value = entry.split("=", 1)
            env[key] = value
    return env


def image_rootfs(api: Any, image: str, cache: Path) -> RootFs:
    """The cached root filesystem of the local Docker image ``image``, exported on first use.

    Args:
        api: a low-level ``docker.APIClient`` (``inspect_image``, ``create_container``,
            ``export``, ``remove_container``).
        image: the image reference.
        cache: ``ROOT/rootfs``; made when missing.

    Raises:
        InfrastructureError: the image is missing or its export broke a rule.
    """
    info = api.inspect_image(image)
    image_id = str(info["Id"])
    config = info.get("Config") or {}
    final = cache / _cache_key(image_id)
    meta = final / "image.json"
    if not meta.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        partial = cache / f"{PARTIAL_PREFIX}{uuid.uuid4().hex[:12]}"
        partial.mkdir(mode=0o755)
        container = api.create_container(image, command=["/bin/true"], network_disabled=True)
        started = time.monotonic()
        try:
            extract_rootfs(_ChunkReader(api.export(container["Id"])), partial / "tree")
        finally:
            api.remove_container(container["Id"], force=True)
        (partial / "image.json").write_text(
            json.dumps(
                {"id": image_id, "env": _env_of(config), "workdir": config.get("WorkingDir")}
            )
        )
        try:
            partial.rename(final)
        except OSError:  # another process finished first: theirs is as good
            shutil.rmtree(partial, ignore_errors=True)
        log.info(
            "rootfs_cached", image=image, image_id=image_id, s=round(time.monotonic() - started, 1)
        )
    data = json.loads(meta.read_text(encoding="utf-8"))
    ensure_hosts(final / "tree")
    return RootFs(
        tree=final / "tree",
        image_id=image_id,
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        workdir=str(data.get("workdir") or ""),
    )


def sweep_partials(cache: Path, *, now: float | None = None) -> list[Path]:
    """Remove unfinished extractions (``.partial-*``) older than `PARTIAL_STALE_S`.

    Returns:
        The removed folders.
    """
    removed: list[Path] = []
    if not cache.is_dir():
        return removed
    moment = time.time() if now is None else now
    for entry in cache.iterdir():
        if not entry.name.startswith(PARTIAL_PREFIX):
            continue
        try:
            age = moment - entry.stat().st_mtime
        except OSError:
            continue
        if age > PARTIAL_STALE_S:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
