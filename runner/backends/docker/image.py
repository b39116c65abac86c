"""Building the sandbox image (``sandbox-replay image build [--offline]``).

Choice of the base image, in order, and the one taken is reported:

1. the configured base (``python:3.12-slim`` by default) when it is present locally;
2. without ``--offline``: the same base pulled from its registry;
3. otherwise (``--offline``, or the pull failed): the offline base
   (``sandbox-replay-base:bookworm``), reused when present, else built by
   ``build-base-offline.sh`` (debootstrap + ``docker import``; no registry involved) on a
   Linux host. On macOS and Windows there is no debootstrap: a base that could not be had is an
   error whose fix names what works there (`no_base_fix`: the engine's proxy settings,
   ``docker pull``, ``SANDBOX_REPLAY_BASE_IMAGE``), never ``--offline``.

The sandbox image is then built from the packaged build context (`runner.resources.images_dir`)
with ``BASE_IMAGE`` and ``VERSION`` build arguments, the version label, and no network
(``network_mode=none``: the Dockerfile needs none). With `ImagePackages` (``--requirements``,
``--wheelhouse``) the context is a temporary copy with the wheels staged in it
(`runner.backends.docker.wheelhouse`, which also downloads them on the host), and the image is
labelled ``io.sandbox-replay.wheelhouse`` with the staged packages' digest.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runner import __version__
from runner.backends import labels as L
from runner.backends.docker import wheelhouse as wh
from runner.backends.docker.build import run_build
from runner.backends.docker.client import call, retrying
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.resources import images_dir

log = get_logger(__name__)

BaseSource = Literal["local", "pulled", "offline-present", "offline-built"]
_LOG_TAIL = 30
CONTEXT_LABEL = f"{L.PREFIX}.context"
"""Image label: `context_digest` of the build context the image was built from."""
WHEELHOUSE_LABEL = f"{L.PREFIX}.wheelhouse"
"""Image label: sha256 of the staged wheels' SHA256SUMS and requirements (absent: none)."""


@dataclass(frozen=True)
class ImagePackages:
    """The user's packages to install in the image (``--requirements`` / ``--wheelhouse``).

    Attributes:
        requirements: a pip requirements file (self-contained: no ``-r``/``-e`` lines); None:
            install every wheel of ``wheelhouse``.
        wheelhouse: the folder of wheels; None: the cached wheelhouse of the base image's
            target under ``cache_dir`` (needs ``requirements``).
        download: fill the wheelhouse with ``pip download`` on the host first (only with
            ``requirements``); False: use what the wheelhouse holds, no registry.
        cache_dir: where the cached wheelhouses live (``CACHE_DIR/wheelhouse/<target>``).
        target: the base image's interpreter, when known (tests); None: probed in a sandbox.
    """

    requirements: Path | None
    wheelhouse: Path | None
    download: bool
    cache_dir: Path
    target: wh.Target | None = None


@dataclass(frozen=True)
class BuildResult:
    """What ``image build`` did.

    Attributes:
        image: tag of the sandbox image built.
        image_id: its id (``sha256:...``).
        base: the base image it was built FROM.
        wheels: file names of the wheels staged into the image (empty: no packages added).
        wheelhouse: the folder they came from (None: no packages added).
        base_source: how the base was had: present ``local``ly, ``pulled``, the offline base
            already present (``offline-present``) or built now with debootstrap
            (``offline-built``).
    """

    image: str
    image_id: str
    base: str
    base_source: BaseSource
    wheels: tuple[str, ...] = ()
    wheelhouse: str | None = None


def image_present(api: Any, ref: str) -> bool:
    """Whether image ``ref`` exists in the engine.

    Raises:
        InfrastructureError: the engine failed (other than "no such image").
    """
    try:
        retrying(f"inspect image {ref}", api.inspect_image, ref)
    except InfrastructureError as exc:
        if exc.fields.get("status") == 404:
            return False
        raise
    return True


def _pull(api: Any, ref: str, echo: Callable[[str], None]) -> bool:
    repository, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    echo(f"pulling {ref} ...")
    try:
        for event in call(
            f"pull {ref}", api.pull, repository, tag=tag or "latest", stream=True, decode=True
        ):
            if isinstance(event, dict) and event.get("error"):
                echo(f"pull of {ref} failed: {event['error']}")
                return False
    except InfrastructureError as exc:
        echo(f"pull of {ref} failed: {exc}")
        return False
    return image_present(api, ref)


def build_offline_base(tag: str, echo: Callable[[str], None], docker_host: str | None) -> None:
    """Build base image ``tag`` with debootstrap (``build-base-offline.sh``); takes minutes.

    Raises:
        InfrastructureError: the script failed (its last output lines attached).
    """
    script = images_dir() / "build-base-offline.sh"
    env = dict(os.environ)
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    echo(f"building offline base image {tag} with debootstrap ({script.name}) ...")
    proc = subprocess.run(
        ["bash", str(script), tag], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-_LOG_TAIL:])
        raise InfrastructureError(
            f"building the offline base image {tag} failed (exit {proc.returncode}); "
            f"needs root, debootstrap and Debian's package mirror:\n{tail}",
            image=tag,
        )


def can_build_offline(platform: str | None = None) -> bool:
    """Whether this host can build the offline base (debootstrap needs Linux and root)."""
    return (platform or sys.platform).startswith("linux")


def no_base_fix(base_image: str, offline: bool, platform: str | None = None) -> str:
    """What to do when no base image could be had on a host that cannot build one offline."""
    fix = (
        f"let the engine pull {base_image}: check that it reaches Docker Hub (Docker Desktop: "
        f"Settings > Resources > Proxies), run `docker pull {base_image}`, then `sandbox-replay "
        "image build`; or set SANDBOX_REPLAY_BASE_IMAGE to a Python >= 3.9 image you have "
        "(`docker images`)"
    )
    if offline:
        fix = "run `sandbox-replay image build` without --offline, which pulls its base; or " + fix
    return fix


def choose_base(
    api: Any,
    *,
    base_image: str,
    offline_base_image: str,
    offline: bool,
    echo: Callable[[str], None],
    docker_host: str | None = None,
    platform: str | None = None,
) -> tuple[str, BaseSource]:
    """Pick (and if needed make) the base image; see the module docstring for the order.

    Args:
        api: low-level docker client.
        base_image: the preferred base, pulled when absent (unless ``offline``).
        offline_base_image: the debootstrap base, used or built when the pull fails.
        offline: never pull.
        echo: progress lines.
        docker_host: the engine address for the offline script.
        platform: a ``sys.platform`` value (default this host's): the offline base is built
            on Linux only; elsewhere a failed pull is an error whose fix names what works there.

    Raises:
        InfrastructureError: no base image could be had (``fix`` names what to do).
    """
    if image_present(api, base_image):
        return base_image, "local"
    if not offline and _pull(api, base_image, echo):
        return base_image, "pulled"
    if image_present(api, offline_base_image):
        return offline_base_image, "offline-present"
    if not can_build_offline(platform):
        why = "--offline was given" if offline else f"{base_image} could not be pulled"
        fix = no_base_fix(base_image, offline, platform)
        raise InfrastructureError(
            f"no base image for the sandbox image: {why}, and the offline base (debootstrap) "
            f"can only be built on Linux; fix: {fix}",
            image=base_image,
            fix=fix,
        )
    build_offline_base(offline_base_image, echo, docker_host)
    if not image_present(api, offline_base_image):
        raise InfrastructureError(
            f"the offline base image {offline_base_image} is missing after its build",
            image=offline_base_image,
        )
    return offline_base_image, "offline-built"


def build_image(
    api: Any,
    *,
    image: str,
    base_image: str,
    offline_base_image: str,
    offline: bool,
    echo: Callable[[str], None],
    docker_host: str | None = None,
    version: str = __version__,
    packages: ImagePackages | None = None,
    probe: Callable[[str], wh.Target] | None = None,
    platform: str | None = None,
) -> BuildResult:
    """Build the sandbox image ``image``.

    Args:
        api: low-level docker client.
        image: tag to build, e.g. ``sandbox-replay:latest``.
        base_image: preferred base (``python:3.12-slim``).
        offline_base_image: tag of the debootstrap base.
        offline: never pull.
        echo: receives one human-readable progress line at a time.
        docker_host: engine address for the offline script (None: its environment's).
        version: project version, written into the image's labels.
        packages: the user's packages to add (None: the image has Python only).
        probe: ``base image -> wheelhouse.Target``, run when ``packages`` needs the base's
            interpreter and does not carry it (`wheelhouse.probe_target` in a sandbox).
        platform: a ``sys.platform`` value for `choose_base` (default this host's).

    Raises:
        InfrastructureError: no base could be had, the download or the build failed (log
            tail attached).
        InputError: the requirements file or the wheelhouse is missing or empty.
    """
    base, source = choose_base(
        api,
        base_image=base_image,
        offline_base_image=offline_base_image,
        offline=offline,
        echo=echo,
        docker_host=docker_host,
        platform=platform,
    )
    how = {
        "local": "present locally",
        "pulled": "pulled from its registry",
        "offline-present": "offline base, already present",
        "offline-built": "offline base, built now with debootstrap",
    }[source]
    echo(f"base image: {base} ({how})")
    labels = {L.VERSION: version, f"{L.PREFIX}.base": base, CONTEXT_LABEL: context_digest()}
    if packages is None:
        image_id = _build(api, image, images_dir(), base, version, labels)
        echo(f"built {image} ({image_id[:19]}) from {base}")
        return BuildResult(image=image, image_id=image_id, base=base, base_source=source)
    folder = packages.wheelhouse
    if folder is None or (packages.download and packages.requirements is not None):
        target = packages.target
        if target is None:
            if probe is None:
                raise InfrastructureError("the base image's Python is unknown (no probe given)")
            target = probe(base)
        echo(f"base image python: {target.python_version} ({target.key})")
        folder = folder or wh.default_wheelhouse(packages.cache_dir, target)
        if packages.download and packages.requirements is not None:
            wh.download(packages.requirements, folder, target, echo)
    with tempfile.TemporaryDirectory(prefix="sandbox-replay-context-") as tmp:
        staged = wh.stage_context(images_dir(), folder, packages.requirements, Path(tmp))
        echo(f"installing from {len(staged.wheels)} wheel(s) of {folder} (no index, no network)")
        labels[WHEELHOUSE_LABEL] = staged.digest
        image_id = _build(api, image, staged.path, base, version, labels)
    echo(f"built {image} ({image_id[:19]}) from {base} with the wheels of {folder}")
    return BuildResult(
        image=image,
        image_id=image_id,
        base=base,
        base_source=source,
        wheels=staged.wheels,
        wheelhouse=str(folder),
    )


def _build(
    api: Any, image: str, context: Path, base: str, version: str, labels: dict[str, str]
) -> str:
    """Build ``image`` from the folder ``context`` with no network; return its id.

    Raises:
        InfrastructureError: the build failed (log tail attached).
    """
    return run_build(
        api,
        image,
        base,
        path=str(context),
        buildargs={"BASE_IMAGE": base, "VERSION": version},
        labels=labels,
    )


def context_digest(folder: Path | None = None) -> str:
    """sha256 hex over the build context's files (sorted relative paths and contents).

    An image whose `CONTEXT_LABEL` differs was built from another Dockerfile: ``make
    ensure-image`` rebuilds it (a changed Dockerfile must never leave a stale image in use).

    Args:
        folder: the build context (default: the packaged `runner.resources.images_dir`).
    """
    root = folder or images_dir()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
