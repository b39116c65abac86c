"""The sandbox image with this host's runtime baked in, for engines that cannot see the host.

In copy mode (`runner.backends.docker.hostfiles`) the runtime (the sandbox side of ``runner``:
its ``__init__.py`` and `runner.wire.protocol.SANDBOX_PACKAGES`) is not bind-mounted: it is
baked into an image built FROM the sandbox image, through the engine's API (the build context
is sent to the engine, so a remote engine builds it), with no network and no pull:

    FROM <the sandbox image's id>
    USER 0:0
    COPY runtime/ /opt/sandbox-replay/         (root-owned, folders 0755, files 0644)
    RUN python3 -m compileall -q /opt/sandbox-replay/runner/<each package>  (the image's Python)
    USER <the sandbox image's own user>

**Versioned.** The image is labelled with the runtime's digest (`RUNTIME_LABEL`: sha256 of the
deterministic archive of the runtime files, `runner.backends.docker.filetree`), the version of
sandbox-replay that baked it and the id of the image it was built from, and tagged
``sandbox-replay-runtime:<image id, 12>-<runtime digest, 12>``: one tag per (image, runtime),
never the shared ``sandbox-replay:latest``. A tag whose label is not the host runtime's digest
is rebuilt; ``doctor`` reports the digest it found against the host's (`RuntimeImage`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import Mount
from runner.backends.docker.build import run_build
from runner.backends.docker.client import retrying
from runner.backends.docker.filetree import Entry, archive, entries_of
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.wire import protocol

__all__ = [
    "RUNTIME_IMAGE_REPOSITORY",
    "RUNTIME_LABEL",
    "RuntimeImage",
    "RuntimeImages",
    "is_runtime_mount",
    "runtime_entries",
]

log = get_logger(__name__)

RUNTIME_LABEL = f"{L.PREFIX}.runtime"
"""Image label: sha256 hex of the runtime archive baked into the image."""
RUNTIME_VERSION_LABEL = f"{L.PREFIX}.runtime-version"
RUNTIME_BASE_LABEL = f"{L.PREFIX}.runtime-base"
RUNTIME_RECIPE_LABEL = f"{L.PREFIX}.runtime-recipe"
RUNTIME_RECIPE = "1"  # bump when `_dockerfile` changes: images of another recipe are rebuilt
RUNTIME_IMAGE_REPOSITORY = "sandbox-replay-runtime"
_CONTEXT_DIR = "runtime"


def is_runtime_mount(mount: Mount) -> bool:
    """Whether ``mount`` brings the runtime (its target is under ``RUNTIME_ROOT/runner``)."""
    runner = f"{protocol.RUNTIME_ROOT}/runner"
    return mount.target == runner or mount.target.startswith(runner + "/")


def runtime_entries(mounts: Sequence[Mount]) -> list[Entry]:
    """The archive entries of the runtime mounts, placed as they would be mounted.

    Each mount's target relative to ``RUNTIME_ROOT`` is its place under ``runtime/`` in the
    build context (``runtime/runner/__init__.py``, ``runtime/runner/sdk/...``), in sorted order.

    Raises:
        InfrastructureError: a source is missing, a link or a special file.
    """
    found: list[Entry] = []
    for mount in sorted(mounts, key=lambda m: m.target):
        relative = PurePosixPath(mount.target).relative_to(protocol.RUNTIME_ROOT)
        found += entries_of(mount.source, str(PurePosixPath(_CONTEXT_DIR, relative)))
    # the folders above the mounted ones (runtime/, runtime/runner/), first
    parents = sorted(
        {str(p) for e in found for p in PurePosixPath(e.name).parents if str(p) != "."}
        - {e.name for e in found}
    )
    return [Entry(p, None) for p in parents] + found


def _dockerfile(base_id: str, user: str, entries: Sequence[Entry]) -> bytes:
    """The runtime image's Dockerfile; bytecode for the mounted folders only.

    ``runner/__init__.py`` is bind-mounted as a lone file (no ``__pycache__`` beside it), so
    only the packages are compiled: the sandbox sees the same entries in both modes.
    """
    folders = sorted(
        f"{protocol.RUNTIME_ROOT}/{PurePosixPath(e.name).relative_to(_CONTEXT_DIR)}"
        for e in entries
        if e.source is None and len(PurePosixPath(e.name).parts) == 3  # runtime/runner/<pkg>
    )
    lines = [f"FROM {base_id}", "USER 0:0", f"COPY {_CONTEXT_DIR}/ {protocol.RUNTIME_ROOT}/"]
    if folders:
        lines.append("RUN python3 -m compileall -q " + " ".join(folders))
    if user:
        lines.append(f"USER {user}")
    return ("\n".join(lines) + "\n").encode()


@dataclass(frozen=True)
class RuntimeImage:
    """The image a copy-mode sandbox runs: the sandbox image with the runtime baked in.

    Attributes:
        tag: ``sandbox-replay-runtime:<image id>-<digest>``.
        image: the sandbox image it was built from, as configured.
        digest: the runtime digest this host would bake (sha256 hex).
        found: the digest the image carries (equal to ``digest`` once ensured).
        version: the sandbox-replay version that baked it.
        built: True when this process built it.
    """

    tag: str
    image: str
    digest: str
    found: str
    version: str
    built: bool

    @property
    def matches(self) -> bool:
        """The image's runtime is this host's."""
        return self.found == self.digest


class RuntimeImages:
    """Builds (once per image and runtime) and remembers runtime images for one backend.

    Args:
        api: low-level docker client.
        version: the sandbox-replay version written into the labels.
    """

    def __init__(self, api: Any, *, version: str = __version__) -> None:
        self.api = api
        self.version = version
        self._lock = threading.Lock()
        self._known: dict[tuple[str, tuple[Mount, ...]], RuntimeImage] = {}

    def ensure(self, image: str, mounts: Sequence[Mount]) -> RuntimeImage:
        """The runtime image of ``image`` with the runtime that ``mounts`` would bring.

        Built when missing or when its label is not this runtime's digest.

        Raises:
            InfrastructureError: the image is missing, or the build failed.
        """
        key = (image, tuple(sorted(mounts, key=lambda m: m.target)))
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                return known
            made = self._ensure(image, key[1])
            self._known[key] = made
            return made

    def _ensure(self, image: str, mounts: Sequence[Mount]) -> RuntimeImage:
        base = retrying(f"inspect image {image}", self.api.inspect_image, image)
        base_id = str(base["Id"])
        user = str((base.get("Config") or {}).get("User") or "")
        entries = runtime_entries(mounts)
        context = archive(entries)  # the runtime alone: its digest names it
        try:
            digest = context.digest
            tag = f"{RUNTIME_IMAGE_REPOSITORY}:{base_id.split(':')[-1][:12]}-{digest[:12]}"
            present = self._labels(tag)
            if (
                present is not None
                and present.get(RUNTIME_LABEL) == digest
                and present.get(RUNTIME_RECIPE_LABEL) == RUNTIME_RECIPE
            ):
                return RuntimeImage(
                    tag, image, digest, digest, present.get(RUNTIME_VERSION_LABEL, "?"), False
                )
            context.close()
            context = archive(entries, extra={"Dockerfile": _dockerfile(base_id, user, entries)})
            log.info("runtime_image_build", tag=tag, image=image, runtime=digest[:12])
            run_build(
                self.api,
                tag,
                image,
                fileobj=context.data,
                custom_context=True,
                labels={
                    RUNTIME_LABEL: digest,
                    RUNTIME_VERSION_LABEL: self.version,
                    RUNTIME_BASE_LABEL: base_id,
                    RUNTIME_RECIPE_LABEL: RUNTIME_RECIPE,
                },
            )
        finally:
            context.close()
        labels = self._labels(tag) or {}
        found = labels.get(RUNTIME_LABEL, "")
        if found != digest:
            raise InfrastructureError(
                f"the runtime image {tag} carries runtime {found[:12] or 'none'} after its "
                f"build, not {digest[:12]}",
                image=tag,
            )
        return RuntimeImage(tag, image, digest, found, self.version, True)

    def _labels(self, tag: str) -> dict[str, str] | None:
        try:
            info = retrying(f"inspect image {tag}", self.api.inspect_image, tag)
        except InfrastructureError as exc:
            if exc.fields.get("status") == 404:
                return None
            raise
        return dict((info.get("Config") or {}).get("Labels") or {})
