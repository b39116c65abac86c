"""Your packages in the sandbox image: a wheelhouse filled on the host, installed with no index.

A build container may not reach a package registry (here it meets a TLS-intercepting proxy
whose CA only the host trusts, DOCKER-NOTES.md; elsewhere a registry mirror only the host is
configured for), and the sandbox image is built with ``network_mode=none`` anyway. So the host
does the downloading and the image build only installs files:

1. the *target* is read off the base image, inside a hardened sandbox (`probe_target`): its
   Python version, implementation, machine and glibc;
2. ``pip download -d WHEELHOUSE --only-binary=:all:`` with ``--platform``/``--python-version``/
   ``--implementation`` of that target (`download`) fills the wheelhouse on the host, through
   whatever index and certificates the host's pip is configured with; pip itself is
   downloaded too, because images need not have it (the offline Debian base has none); the
   default wheelhouse is a cache folder per target (`default_wheelhouse`), so a second build
   downloads nothing new;
3. `stage_context` copies the image's build context (``images/``) and the wheelhouse's wheels
   into a temporary folder, with ``wheelhouse/requirements.txt`` (what to install) and
   ``wheelhouse/SHA256SUMS``; images/Dockerfile installs them with ``pip install --no-index
   --find-links`` (pip run from its own wheel when the wheelhouse has it) and keeps the list
   of installed distributions and the checksums in the image.

Only wheels: no sdist is ever built in the image (no compilers there, by design).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.backends import labels as L
from runner.backends.base import STDOUT, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.errors import InfrastructureError, InputError

CONTEXT_WHEELHOUSE = "wheelhouse"
"""Folder of the build context holding the wheels (images/Dockerfile COPYs it)."""

MANIFEST = "SHA256SUMS"
REQUIREMENTS = "requirements.txt"
_LOG_TAIL = 30
_OLDEST_MANYLINUX_MINOR = 5  # manylinux1 is glibc 2.5 (PEP 600)

# Runs inside the sandbox with python3 -I -c; prints one JSON object.
PROBE_SCRIPT = (
    "import json, platform, sys; "
    "print(json.dumps({'version': list(sys.version_info[:3]), "
    "'implementation': sys.implementation.name, 'machine': platform.machine(), "
    "'libc': list(platform.libc_ver())}))"
)


@dataclass(frozen=True)
class Target:
    """The interpreter of an image, as pip's download options need it.

    Attributes:
        python: ``(major, minor, micro)`` of the image's ``python3``.
        implementation: ``sys.implementation.name`` (``cpython``).
        machine: ``platform.machine()`` (``x86_64``, ``aarch64``).
        glibc: ``(major, minor)`` of the image's glibc; None for another libc (musl), where
            only pure-Python wheels (``py3-none-any``) are taken.
    """

    python: tuple[int, int, int]
    implementation: str
    machine: str
    glibc: tuple[int, int] | None

    @property
    def python_version(self) -> str:
        """``3.11``: pip's ``--python-version``."""
        return f"{self.python[0]}.{self.python[1]}"

    @property
    def implementation_tag(self) -> str:
        """The ``--implementation`` of pip (``cp`` for CPython, ``pp`` for PyPy, else ``py``)."""
        return {"cpython": "cp", "pypy": "pp"}.get(self.implementation, "py")

    def platforms(self) -> list[str]:
        """The wheel platform tags the image accepts, most specific first (PEP 600, PEP 599).

        glibc 2.36 on x86_64 gives ``manylinux_2_36_x86_64`` ... ``manylinux_2_5_x86_64``,
        the legacy aliases ``manylinux2014`` (2.17), ``manylinux2010`` (2.12), ``manylinux1``
        (2.5) where the glibc is new enough, and ``linux_x86_64``.
        """
        arch = self.machine.replace("-", "_").replace(".", "_")
        tags: list[str] = []
        if self.glibc is not None and self.glibc[0] == 2:
            minors = range(self.glibc[1], _OLDEST_MANYLINUX_MINOR - 1, -1)
            tags.extend(f"manylinux_2_{minor}_{arch}" for minor in minors)
            legacy = (("manylinux2014", 17), ("manylinux2010", 12), ("manylinux1", 5))
            tags.extend(f"{name}_{arch}" for name, floor in legacy if self.glibc[1] >= floor)
        tags.append(f"linux_{arch}")
        return tags

    @property
    def key(self) -> str:
        """A folder name for this target's wheels, e.g. ``cp311-manylinux_2_36_x86_64``."""
        impl = f"{self.implementation_tag}{self.python[0]}{self.python[1]}"
        return f"{impl}-{self.platforms()[0]}"

    def pip_options(self) -> list[str]:
        """The pip download options that select this target's wheels."""
        options = ["--only-binary=:all:", "--python-version", self.python_version]
        options += ["--implementation", self.implementation_tag]
        for platform in self.platforms():
            options += ["--platform", platform]
        return options


def parse_probe(text: str) -> Target:
    """The `Target` from the probe's output (its last line).

    Raises:
        InfrastructureError: the output is not the probe's JSON.
    """
    try:
        found = json.loads(text.strip().splitlines()[-1])
        version = tuple(int(part) for part in found["version"])
        libc_name, libc_version = (str(part) for part in found["libc"])
        glibc: tuple[int, int] | None = None
        if libc_name == "glibc":
            major, minor = libc_version.split(".")[:2]
            glibc = (int(major), int(minor))
        python = (version[0], version[1], version[2])
        return Target(python, str(found["implementation"]), str(found["machine"]), glibc)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise InfrastructureError(
            f"reading the base image's Python failed: unexpected probe output {text[-300:]!r}"
        ) from exc


def probe_target(backend: DockerBackend, image: str, timeout_s: float = 60.0) -> Target:
    """Read the `Target` off ``image`` by running `PROBE_SCRIPT` in a hardened sandbox.

    Raises:
        InfrastructureError: the sandbox could not run or printed no probe result.
    """
    spec = SandboxSpec(
        run_id=f"wheelhouse-{uuid.uuid4().hex[:12]}",
        image=image,
        command=("python3", "-I", "-c", PROBE_SCRIPT),
        limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
        labels={f"{L.PREFIX}.purpose": "image-probe"},
    )
    out = bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + timeout_s
        for frame in box.frames(poll_s=0.25):
            if frame is not None and frame[0] == STDOUT:
                out += frame[1]
            if time.monotonic() > deadline:
                break
        box.wait(max(0.1, deadline - time.monotonic()))
    return parse_probe(out.decode("utf-8", "replace"))


def default_wheelhouse(cache_dir: Path, target: Target) -> Path:
    """The cached wheelhouse of ``target``: ``CACHE_DIR/wheelhouse/<target key>``."""
    return cache_dir / "wheelhouse" / target.key


def download_command(
    requirements: Path, wheelhouse: Path, target: Target, pip: Sequence[str] | None = None
) -> list[str]:
    """The ``pip download`` command line that fills ``wheelhouse`` for ``target``.

    ``pip`` is the host's pip (default: this interpreter's, ``python -m pip``); it is
    downloaded into the wheelhouse too, as the installer the image build runs.
    """
    command = list(pip or (sys.executable, "-m", "pip"))
    command += ["download", "--disable-pip-version-check", "--progress-bar", "off"]
    command += ["-d", str(wheelhouse), *target.pip_options(), "-r", str(requirements), "pip"]
    return command


def download(
    requirements: Path,
    wheelhouse: Path,
    target: Target,
    echo: Callable[[str], None],
    pip: Sequence[str] | None = None,
    timeout_s: float = 1800.0,
) -> None:
    """Fill ``wheelhouse`` with the wheels of ``requirements`` (and pip) for ``target``.

    Wheels already there are reused by pip (no second download).

    Raises:
        InputError: the requirements file cannot be read.
        InfrastructureError: pip failed (no wheel for the target, no index reachable; the last
            lines of its output attached) or is not installed on the host.
    """
    if not requirements.is_file():
        raise InputError("requirements file not found", file=str(requirements))
    wheelhouse.mkdir(parents=True, exist_ok=True)
    command = download_command(requirements, wheelhouse, target, pip)
    echo(
        f"downloading wheels for {target.key} (python {target.python_version}) "
        f"into {wheelhouse} ..."
    )
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"pip download could not run: {exc}") from exc
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        tail = "\n".join(lines[-_LOG_TAIL:])
        raise InfrastructureError(
            f"pip download for {target.key} failed (exit {proc.returncode}); only wheels are "
            f"taken (--only-binary=:all:), for the image's python {target.python_version}:\n"
            f"{tail}",
            file=str(requirements),
        )


@dataclass(frozen=True)
class StagedContext:
    """A build context with a wheelhouse, made by `stage_context`.

    Attributes:
        path: the folder to build (a copy of images/ plus ``wheelhouse/``).
        wheels: file names of the wheels staged, sorted.
        digest: sha256 hex over ``SHA256SUMS`` and ``requirements.txt`` (the image's label
            ``io.sandbox-replay.wheelhouse``: same digest, same packages).
    """

    path: Path
    wheels: tuple[str, ...]
    digest: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_files(wheelhouse: Path) -> list[Path]:
    """The regular ``*.whl`` files directly in ``wheelhouse``, sorted by name.

    Raises:
        InputError: the folder does not exist.
    """
    if not wheelhouse.is_dir():
        raise InputError("wheelhouse folder not found", file=str(wheelhouse))
    return sorted(
        (p for p in wheelhouse.iterdir() if p.suffix == ".whl" and p.is_file()),
        key=lambda p: p.name,
    )


def stage_context(
    images: Path, wheelhouse: Path, requirements: Path | None, into: Path
) -> StagedContext:
    """Copy the build context ``images`` and the wheels of ``wheelhouse`` into ``into``.

    ``wheelhouse/requirements.txt`` of the staged context is a copy of ``requirements``, or,
    without one, every wheel of the wheelhouse but pip's (the installer), by file name.

    Raises:
        InputError: the wheelhouse is missing or holds no wheel, or the requirements file
            cannot be read.
    """
    wheels = wheel_files(wheelhouse)
    if not wheels:
        raise InputError(
            "the wheelhouse holds no wheel (*.whl): fill it with "
            "`pip download -d DIR --only-binary=:all: ...` or give --requirements",
            file=str(wheelhouse),
        )
    shutil.copytree(images, into, dirs_exist_ok=True)
    target = into / CONTEXT_WHEELHOUSE
    target.mkdir(exist_ok=True)
    sums: list[str] = []
    for wheel in wheels:
        shutil.copyfile(wheel, target / wheel.name)
        sums.append(f"{_sha256(wheel)}  {wheel.name}")
    if requirements is not None:
        try:
            wanted = requirements.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                f"cannot read the requirements file: {exc}", file=str(requirements)
            ) from exc
    else:
        wanted = "".join(f"./{w.name}\n" for w in wheels if not w.name.lower().startswith("pip-"))
    manifest = "".join(f"{line}\n" for line in sums)
    (target / MANIFEST).write_text(manifest, encoding="utf-8")
    (target / REQUIREMENTS).write_text(wanted, encoding="utf-8")
    digest = hashlib.sha256(f"{manifest}\0{wanted}".encode()).hexdigest()
    return StagedContext(into, tuple(w.name for w in wheels), digest)
