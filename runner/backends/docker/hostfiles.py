"""How the host's files reach a Docker sandbox: bind mounts, or copies through the engine's API.

A `SandboxSpec` lists host folders to mount read-only (`runner.backends.base.Mount`): the
runtime (under ``/opt/sandbox-replay/runner``) and the tool snapshot (``/sandbox/tools/i``).
Everything else of a run (the run spec, the task, recorded calls) travels over stdin in the
``start`` message, so nothing else needs the host's file system. Two ways, chosen per backend
(`HostFiles.mode`, setting ``SANDBOX_REPLAY_HOST_FILES``: ``auto``, ``bind``, ``copy``):

- **bind**: the folders are bind-mounted read-only. Needs an engine that sees this host's paths
  (a local dockerd; Docker Desktop within its file-sharing list).
- **copy**: no host path is mounted. The runtime is baked into an image built FROM the sandbox
  image through the API (`runner.backends.docker.runtimeimage`); each tool folder is copied
  into a Docker volume named by the sha256 of its deterministic archive
  (`runner.backends.docker.filetree`): filled once per content by ``put_archive`` into a
  helper container that is created and never started, and mounted read-only into every
  sandbox. The files in it are owned by root, folders 0755 and files 0644, and the mount is
  read-only: the sandbox user (never root) can read them and change nothing, as with bind
  mounts. A remote ``DOCKER_HOST``, a dind service, Docker Desktop outside its shared folders.
- **auto** (the default): a probe decides, once per backend, at the first sandbox with mounts:
  a helper container (created, never started) binds that sandbox's folders, and one file of
  each is read back through the engine (``GET /containers/{id}/archive``) and compared, byte for
  byte, with the host's. All equal: bind. Anything else (the engine refuses the bind, the file
  is missing or different): copy, and the reason is kept for ``doctor``.

A volume is complete only when its marker volume (``<name>.filled``) exists, created after the
copy succeeded: a command that finds the volume without its marker waits for it (another
command is filling it) and fills it itself after `FILL_WAIT_S` (that one died). Volumes are
shared by every command on the engine (they hold tool code, a few MB; ``docker volume ls
--filter label=io.sandbox-replay.files`` lists them); the reaper (`DockerBackend.reap`, at the
start of every command) removes those made more than `PRUNE_AGE_S` ago that no container uses.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from docker.types import Mount as DockerMount

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import Mount, SandboxSpec
from runner.backends.docker.client import call, retrying
from runner.backends.docker.filetree import archive, entries_of
from runner.backends.docker.runtimeimage import RuntimeImage, RuntimeImages, is_runtime_mount
from runner.backends.docker.sandbox import engine_time
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

__all__ = [
    "FILES_LABEL",
    "HostFiles",
    "HostFilesMode",
    "Placement",
    "Visibility",
]

log = get_logger(__name__)

HostFilesMode = Literal["auto", "bind", "copy"]
FILES_LABEL = f"{L.PREFIX}.files"
"""Volume label: sha256 hex of the archive a files volume was filled from."""
VOLUME_PREFIX = "sandbox-replay-files-"
FILLED_SUFFIX = ".filled"
FILL_WAIT_S = 120.0
PRUNE_AGE_S = 7 * 86400.0  # files volumes older than this, unused, are removed by the reaper
_FILL_POLL_S = 0.5
_SAMPLE_MAX_BYTES = 1024 * 1024
_SAMPLE_SCAN = 2000


@dataclass(frozen=True)
class Visibility:
    """What the probe found: whether the engine sees the host's paths, and why.

    Attributes:
        visible: every probed file read back through the engine equals the host's.
        reason: what decided, in words (the first path the engine could not see, or the
            files it read back).
    """

    visible: bool
    reason: str


@dataclass(frozen=True)
class Placement:
    """The image and the mounts one container is created with.

    Attributes:
        image: the image to run (copy mode: the runtime image).
        mounts: the engine's mount objects (bind or volume), read-only.
    """

    image: str
    mounts: list[DockerMount]


def _sample(mount: Mount) -> tuple[Path, str] | None:
    """One regular file of ``mount``'s source (at most 1 MiB) and its path in the container."""
    source = Path(mount.source)
    if source.is_file():
        return (source, mount.target) if source.stat().st_size <= _SAMPLE_MAX_BYTES else None
    scanned = 0
    for path in sorted(source.rglob("*")):
        scanned += 1
        if scanned > _SAMPLE_SCAN:
            return None
        if "__pycache__" in path.parts or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_size <= _SAMPLE_MAX_BYTES:
            relative = path.relative_to(source).as_posix()
            return path, str(PurePosixPath(mount.target, relative))
    return None


def _read_back(api: Any, container: str, target: str) -> bytes | None:
    """The content of the file ``target`` in ``container`` as the engine sees it (None: none)."""
    stream, _stat = call(f"read {target} of {container}", api.get_archive, container, target)
    data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                handle = tar.extractfile(member)
                return handle.read(_SAMPLE_MAX_BYTES + 1) if handle is not None else None
    return None


class HostFiles:
    """The host-files mode of one Docker backend, and what copy mode has built for it.

    Args:
        api: low-level docker client.
        mode: ``bind``, ``copy`` or ``auto`` (probe at the first sandbox with mounts).
        labels: labels of the helper containers (the backend's session and owner, so that the
            reaper removes those of a crashed process).
        version: written into the labels of what copy mode makes.
    """

    def __init__(
        self,
        api: Any,
        mode: HostFilesMode = "bind",
        *,
        labels: dict[str, str] | None = None,
        version: str = __version__,
    ) -> None:
        if mode not in ("auto", "bind", "copy"):
            raise ValueError(f"unknown host files mode {mode!r}")
        self.api = api
        self.asked: HostFilesMode = mode
        self.version = version
        self._labels = dict(labels or {})
        self._lock = threading.Lock()
        self._decided: Visibility | None = None
        if mode != "auto":
            self._decided = Visibility(
                mode == "bind", f"SANDBOX_REPLAY_HOST_FILES={mode} (not probed)"
            )
        self.runtime_images = RuntimeImages(api, version=version)
        self._volumes: dict[str, str] = {}  # archive digest -> volume name, filled
        self._by_folder: dict[Path, str] = {}  # a snapshot folder never changes: its volume
        self._volume_locks: dict[str, threading.Lock] = {}

    # -- the decision --------------------------------------------------------------------------

    @property
    def visibility(self) -> Visibility | None:
        """What decided the mode (None: ``auto`` and not probed yet)."""
        return self._decided

    def mode(self, image: str, mounts: Sequence[Mount]) -> Literal["bind", "copy"]:
        """``bind`` or ``copy`` for this backend, probing with ``mounts`` on the first call.

        Raises:
            InfrastructureError: the engine failed during the probe.
        """
        with self._lock:
            if self._decided is None:
                self._decided = self.probe(image, mounts)
                log.info(
                    "host_files_mode",
                    mode="bind" if self._decided.visible else "copy",
                    reason=self._decided.reason,
                )
            return "bind" if self._decided.visible else "copy"

    def probe(self, image: str, mounts: Sequence[Mount]) -> Visibility:
        """Whether the engine sees ``mounts``' host files (module docstring: the probe).

        Raises:
            InfrastructureError: the engine failed otherwise than by refusing the binds.
        """
        # one file per folder the mounts come from (the runtime's packages share one): each
        # read is a round trip to the engine
        by_parent: dict[Path, Mount] = {}
        for mount in mounts:
            by_parent.setdefault(Path(mount.source).parent, mount)
        samples = [s for s in (_sample(m) for m in by_parent.values()) if s is not None]
        if not samples:
            return Visibility(True, "nothing to probe: no file in the mounted folders")
        binds = [
            DockerMount(target=m.target, source=str(m.source), type="bind", read_only=True)
            for m in mounts
        ]
        try:
            container = self._helper("probe", image, binds)
        except InfrastructureError as exc:
            if exc.fields.get("status") in (400, 500):  # the engine refused the bind source
                return Visibility(False, f"the engine refused to bind this host's paths: {exc}")
            raise
        try:
            for path, target in samples:
                try:
                    seen = _read_back(self.api, container, target)
                except (InfrastructureError, tarfile.TarError) as exc:
                    return Visibility(False, f"the engine cannot read {path} ({exc})")
                if seen != path.read_bytes():
                    return Visibility(False, f"the engine sees another {path} than this host")
        finally:
            retrying(f"remove {container}", self.api.remove_container, container, force=True)
        shown = ", ".join(str(p) for p, _ in samples[:3])
        return Visibility(True, f"the engine read back this host's files ({shown})")

    def _helper(self, kind: str, image: str, mounts: list[DockerMount]) -> str:
        """Create, never start, a helper container with ``mounts`` and no network; its id.

        Labelled with the backend's session and owner: the reaper removes it when this process
        dies before removing it itself.

        Raises:
            InfrastructureError: the engine refused it (a bind source it cannot see: 400).
        """
        name = f"sandbox-replay-{kind}-{uuid.uuid4().hex[:12]}"
        created = call(
            f"create {name}",
            self.api.create_container,
            image,
            command=["true"],
            name=name,
            labels={**self._labels, L.RUN: name},
            host_config=self.api.create_host_config(network_mode="none", mounts=mounts),
        )
        return str(created["Id"])

    # -- placement -----------------------------------------------------------------------------

    def place(self, spec: SandboxSpec) -> Placement:
        """The image and mounts of ``spec``'s container in this backend's mode.

        Raises:
            InfrastructureError: the probe, the runtime image or a volume's copy failed.
        """
        mounts = list(spec.mounts)
        if not mounts or self.mode(spec.image, mounts) == "bind":
            return Placement(
                spec.image,
                [
                    DockerMount(
                        target=m.target, source=str(m.source), type="bind", read_only=m.read_only
                    )
                    for m in mounts
                ],
            )
        runtime = [m for m in mounts if is_runtime_mount(m)]
        image = spec.image
        if runtime:
            image = self.runtime_images.ensure(spec.image, runtime).tag
        placed = []
        for mount in mounts:
            if is_runtime_mount(mount):
                continue
            if not mount.read_only:
                raise InfrastructureError(
                    f"a writable mount ({mount.target}) cannot be copied to an engine that does "
                    "not see this host's files; set SANDBOX_REPLAY_HOST_FILES=bind"
                )
            volume = self.volume_for(spec.image, Path(mount.source))
            placed.append(
                DockerMount(
                    target=mount.target, source=volume, type="volume", read_only=True, no_copy=True
                )
            )
        return Placement(image, placed)

    def runtime_image(self, spec: SandboxSpec) -> RuntimeImage | None:
        """The runtime image of ``spec`` in copy mode (built when missing), else None.

        Raises:
            InfrastructureError: the build failed.
        """
        runtime = [m for m in spec.mounts if is_runtime_mount(m)]
        if not runtime or self.mode(spec.image, list(spec.mounts)) == "bind":
            return None
        return self.runtime_images.ensure(spec.image, runtime)

    # -- volumes -------------------------------------------------------------------------------

    def volume_for(self, image: str, folder: Path) -> str:
        """The name of a volume holding a copy of ``folder``, filled once per content.

        Args:
            image: an image present in the engine (the fill's helper container; never run).
            folder: the host folder (a snapshot folder: it does not change).

        Raises:
            InfrastructureError: the folder is unreadable or the engine failed.
        """
        with self._lock:
            known = self._by_folder.get(folder)
        if known is not None:
            return known
        content = archive(list(entries_of(folder)))
        try:
            name = VOLUME_PREFIX + content.digest[:40]
            with self._lock:
                if content.digest in self._volumes:
                    return self._volumes[content.digest]
                lock = self._volume_locks.setdefault(content.digest, threading.Lock())
            with lock:
                if content.digest not in self._volumes:
                    self._fill(name, content.digest, image, content.data)
                    with self._lock:
                        self._volumes[content.digest] = name
            with self._lock:
                self._by_folder[folder] = name
            return name
        finally:
            content.close()

    def discard(self, folder: Path) -> None:
        """Remove the volume (and its marker) made for ``folder``, if any (a one-off copy).

        Raises:
            InfrastructureError: the engine failed (a volume still in use is left).
        """
        with self._lock:
            name = self._by_folder.pop(folder, None)
            if name is not None:
                self._volumes = {d: v for d, v in self._volumes.items() if v != name}
        if name is None:
            return
        for volume in (name + FILLED_SUFFIX, name):
            try:
                retrying(f"remove volume {volume}", self.api.remove_volume, volume)
            except InfrastructureError as exc:
                if exc.fields.get("status") not in (404, 409):
                    raise

    def _exists(self, name: str) -> bool:
        try:
            retrying(f"inspect volume {name}", self.api.inspect_volume, name)
        except InfrastructureError as exc:
            if exc.fields.get("status") == 404:
                return False
            raise
        return True

    def _fill(self, name: str, digest: str, image: str, data: Any) -> None:
        marker = name + FILLED_SUFFIX
        if self._exists(marker):
            return
        labels = {L.MANAGED: "1", FILES_LABEL: digest, L.VERSION: self.version}
        if self._exists(name):  # another command is filling it, or died doing so
            deadline = time.monotonic() + FILL_WAIT_S
            while time.monotonic() < deadline:
                time.sleep(_FILL_POLL_S)
                if self._exists(marker):
                    return
            log.warning("files_volume_refill", volume=name)
        call(f"create volume {name}", self.api.create_volume, name, labels=labels)
        helper = self._helper(
            "fill", image, [DockerMount(target="/fill", source=name, type="volume")]
        )
        try:
            ok = call(f"copy into {name}", self.api.put_archive, helper, "/fill", data)
            if not ok:
                raise InfrastructureError(f"the engine did not take the copy into volume {name}")
        finally:
            retrying(f"remove {helper}", self.api.remove_container, helper, force=True)
        call(f"create volume {marker}", self.api.create_volume, marker, labels=labels)
        log.info("files_volume_filled", volume=name)

    def prune(self, max_age_s: float = PRUNE_AGE_S, now: datetime | None = None) -> list[str]:
        """Remove the files volumes made more than ``max_age_s`` ago that no container uses.

        A volume in use (the engine answers 409) is kept; its marker goes only after it.

        Returns:
            The names of the volumes removed.

        Raises:
            InfrastructureError: the engine failed while listing.
        """
        listed = retrying("list volumes", self.api.volumes, filters={"label": [FILES_LABEL]})
        now = now or datetime.now(UTC)
        removed: list[str] = []
        for volume in (listed or {}).get("Volumes") or []:
            name = str(volume.get("Name", ""))
            created = engine_time(volume.get("CreatedAt"))
            if not name.startswith(VOLUME_PREFIX) or name.endswith(FILLED_SUFFIX):
                continue
            if created is None or (now - created).total_seconds() < max_age_s:
                continue
            try:
                retrying(f"remove volume {name}", self.api.remove_volume, name)
            except InfrastructureError as exc:
                if exc.fields.get("status") in (404, 409):  # gone, or in use: kept
                    continue
                raise
            with suppress(InfrastructureError):
                retrying(f"remove volume {name}", self.api.remove_volume, name + FILLED_SUFFIX)
            with self._lock:
                self._by_folder = {f: v for f, v in self._by_folder.items() if v != name}
                self._volumes = {d: v for d, v in self._volumes.items() if v != name}
            removed.append(name)
        if removed:
            log.info("files_volumes_pruned", count=len(removed))
        return removed

    def describe(self) -> str:
        """The mode in words, for ``doctor``."""
        if self._decided is None:
            return "not decided yet (probed at the first sandbox)"
        how = "bind mounts" if self._decided.visible else "copied through the engine's API"
        return f"{how}: {self._decided.reason}"
