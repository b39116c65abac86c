"""The one list of sandboxing backends the conformance suite runs against (the Inspect pattern).

Every backend that isolates a run (a `runner.backends.base.Backend` other than the exempt ones)
has one `SandboxingBackend` entry in `BACKENDS`; `test_conformance.py` runs each of its tests
once per entry. A new backend joins by appending an entry: how to connect it (failing, never
skipping, under ``CI=true`` when its engine is unusable), the image it runs, how to list the
sandboxes of its session, and the `Capabilities` where it legitimately differs; the suite reads
the flags and asserts the stronger property wherever a flag is set.

`EXEMPT` names the backends that are not sandboxes by design, each with the reason; the
registry test (`test_conformance_registry.py`) fails when a backend class of `runner.backends` is in
neither list.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runner.backends.base import Backend, Sandbox
from runner.backends.unsandboxed import UnsandboxedProcessBackend


@dataclass(frozen=True)
class Capabilities:
    """Where a sandboxing backend may legitimately differ; the suite reads these flags.

    Attributes:
        reports_oom: a run killed by its memory limit has ``ExitState.oom_killed`` set (without
            it the suite still asserts that the allocation fails).
        pids_limit: ``ResourceLimits.pids_limit`` is enforced (threads and processes count).
        cpu_limit: ``ResourceLimits.cpus`` is enforced as a CFS quota the sandbox's cgroup shows.
    """

    reports_oom: bool = True
    pids_limit: bool = True
    cpu_limit: bool = True


# (destination, source on the host, read-only) of each mount of a started sandbox
MountSeen = tuple[str, str, bool]


@dataclass(frozen=True)
class SandboxingBackend:
    """One backend of the suite.

    Attributes:
        name: the backend's ``name`` (the test id).
        connect: ``(request, session_id) -> Backend``; asks the fixtures its engine needs, so an
            unusable engine fails under ``CI=true`` (tests/conftest.py) and skips otherwise.
        image: ``request -> image`` the sandboxes run (the real sandbox image).
        leftovers: ``backend -> names`` of the sandboxes of the backend's session still there.
        connect_code: Python source run in a child process that binds ``backend`` for the
            session id ``sys.argv[1]`` (the reaper test kills that process).
        mounts_of: ``(backend, sandbox) -> mounts`` of a started sandbox as its engine reports
            them, or None when the engine reports none (the in-sandbox view is checked anyway).
        capabilities: see `Capabilities`.
        marks: pytest marks of the entry's tests (``docker`` for an engine of Docker).
    """

    name: str
    connect: Callable[[pytest.FixtureRequest, str], Backend]
    image: Callable[[pytest.FixtureRequest], str]
    leftovers: Callable[[Backend], list[str]]
    connect_code: str
    mounts_of: Callable[[Backend, Sandbox], list[MountSeen]] | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    marks: tuple[Any, ...] = ()


def _docker_connect(request: pytest.FixtureRequest, session_id: str) -> Backend:
    request.getfixturevalue("docker_client")  # unusable engine: fail under CI, else skip
    from runner.backends.docker import DockerBackend

    return DockerBackend.connect(session_id=session_id)


def _docker_leftovers(backend: Backend) -> list[str]:
    return [str(c["Names"][0]) for c in backend.containers(session_only=True)]  # type: ignore[attr-defined]


def _docker_mounts(backend: Backend, sandbox: Sandbox) -> list[MountSeen]:
    info = backend.api.inspect_container(sandbox.container_id)  # type: ignore[attr-defined]
    return [(m["Destination"], m["Source"], not m["RW"]) for m in info["Mounts"]]


DOCKER = SandboxingBackend(
    name="docker",
    connect=_docker_connect,
    image=lambda request: str(request.getfixturevalue("sandbox_image")),
    leftovers=_docker_leftovers,
    connect_code=(
        "from runner.backends.docker import DockerBackend\n"
        "backend = DockerBackend.connect(session_id=sys.argv[1])\n"
    ),
    mounts_of=_docker_mounts,
    marks=(pytest.mark.docker,),
)


def _docker_copy_connect(request: pytest.FixtureRequest, session_id: str) -> Backend:
    request.getfixturevalue("docker_client")  # unusable engine: fail under CI, else skip
    from runner.backends.docker import DockerBackend

    return DockerBackend.connect(session_id=session_id, host_files="copy")


# The Docker backend in copy mode (issue 29: engines that cannot see this host's paths): no
# bind mount, the runtime baked into an image, the tools in read-only volumes. Every test of the
# suite and every attack of the battery runs against it too.
DOCKER_COPY = SandboxingBackend(
    name="docker-copy",
    connect=_docker_copy_connect,
    image=lambda request: str(request.getfixturevalue("sandbox_image")),
    leftovers=_docker_leftovers,
    connect_code=(
        "from runner.backends.docker import DockerBackend\n"
        "backend = DockerBackend.connect(session_id=sys.argv[1], host_files='copy')\n"
    ),
    mounts_of=None,  # volumes, not host paths: the view from inside is the check
    marks=(pytest.mark.docker,),
)

# The namespace backend's folder: one per uid, kept between runs (the image's root filesystem is
# exported into it once per image id).
NAMESPACE_ROOT = Path(tempfile.gettempdir()) / f"sandbox-replay-ns-tests-{os.getuid()}"


def _namespace_connect(
    request: pytest.FixtureRequest, session_id: str, start: str = "zygote"
) -> Backend:
    request.getfixturevalue("bwrap_usable")  # unusable bwrap: fail under CI, else skip
    request.getfixturevalue("sandbox_image")  # the root filesystem is the Docker image's
    from runner.backends.namespace import NamespaceBackend

    return NamespaceBackend(NAMESPACE_ROOT, session_id=session_id, start=start)


def _namespace_capabilities() -> Capabilities:
    from runner.backends.namespace.cgroups import probe_host

    return Capabilities(**probe_host().capabilities())


# The namespace backend as it starts by default: each sandbox forked from its key's zygote
# (issue 31, runner/runtime/zygote/), a command other than the runtime exec'd in the fork.
NAMESPACE = SandboxingBackend(
    name="namespace",
    connect=_namespace_connect,
    image=lambda request: str(request.getfixturevalue("sandbox_image")),
    leftovers=lambda backend: backend.sandboxes(session_only=True),  # type: ignore[attr-defined]
    connect_code=(
        "from pathlib import Path\n"
        "from runner.backends.namespace import NamespaceBackend\n"
        f"backend = NamespaceBackend(Path({str(NAMESPACE_ROOT)!r}), session_id=sys.argv[1])\n"
    ),
    capabilities=_namespace_capabilities(),
    marks=(pytest.mark.docker,),
)

# The namespace backend starting one bwrap per sandbox (``start="bwrap"``,
# ``SANDBOX_REPLAY_NAMESPACE_START=bwrap``): the way before the zygote, still selectable.
NAMESPACE_BWRAP = SandboxingBackend(
    name="namespace-bwrap",
    connect=lambda request, session_id: _namespace_connect(request, session_id, "bwrap"),
    image=lambda request: str(request.getfixturevalue("sandbox_image")),
    leftovers=lambda backend: backend.sandboxes(session_only=True),  # type: ignore[attr-defined]
    connect_code=(
        "from pathlib import Path\n"
        "from runner.backends.namespace import NamespaceBackend\n"
        f"backend = NamespaceBackend(Path({str(NAMESPACE_ROOT)!r}), session_id=sys.argv[1],"
        " start='bwrap')\n"
    ),
    capabilities=_namespace_capabilities(),
    marks=(pytest.mark.docker,),
)

# Append the Ray backend here when it lands.
BACKENDS: list[SandboxingBackend] = [DOCKER, DOCKER_COPY, NAMESPACE, NAMESPACE_BWRAP]

# Backends that are not sandboxes, by name, with the reason: the suite does not run them.
EXEMPT: dict[str, str] = {
    UnsandboxedProcessBackend.name: (
        "record's local process backend: runs the user's own tools unsandboxed, by design"
    ),
    "ray": (
        "dispatches each sandbox to a node's own Docker backend (the entry above, which this"
        " suite covers); the Ray layer itself needs a cluster: tests/integration/test_ray_*.py"
    ),
}
