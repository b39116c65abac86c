"""``--runtime``: the engine's OCI runtime passes through to every sandbox.

A sandbox of ``DockerBackend.connect(runtime="crun")`` is created with HostConfig ``Runtime``
``crun`` (the engine's inspect says so) and runs; ``sandbox-replay run --runtime crun`` of the
help-desk example succeeds; a runtime the engine lacks is exit 2 naming the runtimes it has,
before any container exists; ``doctor`` lists the engine's runtimes.

crun must be registered with the engine. On a host whose cgroup v2 hierarchy holds controllers
beside cgroup v1 ones ("hybrid", e.g. hugetlb on v2 as on this project's machines), Debian's crun
1.8 refuses to create any container ("cgroups in hybrid mode not supported"); the tests that
start a container under crun then xfail on exactly that engine error, and pass wherever crun
can run. The pass-through itself (the created container's ``Runtime``) is asserted everywhere.

When the shared engine lacks crun (registered only when dockerd starts:
`.ci/ensure-engine.sh`), the tests start a second dockerd of their own with
``--add-runtime=crun=/usr/bin/crun`` (`tests.integration._ray.second_engine`: its own socket and
data root, no network of its own). crun not installed fails these tests under ``CI=true``
(`.ci/ensure-engine.sh` installs it), and skips them elsewhere.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends.base import STDOUT, SandboxSpec
from runner.backends.docker import DockerBackend
from runner.backends.docker.runtimes import engine_runtimes
from runner.errors import InfrastructureError
from tests.conftest import _unusable
from tests.integration._ray import second_engine
from tests.support.cli import run_cli
from tests.support.paths import REPO

pytestmark = pytest.mark.docker

HELPDESK = REPO / "examples" / "helpdesk"
CRUN = "/usr/bin/crun"
# crun 1.8's refusal on a cgroup-hybrid host (libcrun): a limit of crun here, not of ours
HYBRID = "cgroups in hybrid mode not supported"


def _xfail_on_hybrid(message: str) -> None:
    if HYBRID in message:
        pytest.xfail(f"crun cannot create containers on this host: {HYBRID}")


@pytest.fixture(scope="module")
def crun_host(sandbox_image: str) -> Iterator[str | None]:
    """The engine address with crun registered (None: the shared engine has it)."""
    main = DockerBackend.connect()
    try:
        if "crun" in engine_runtimes(main.api).names:
            yield None
            return
    finally:
        main.close()
    if shutil.which("crun") is None:
        _unusable("crun is not installed (apt-get install crun; .ci/ensure-engine.sh does)")
    with second_engine(sandbox_image, [f"--add-runtime=crun={CRUN}"]) as engine:
        yield engine.host


def _env(monkeypatch: pytest.MonkeyPatch, host: str | None) -> None:
    if host is not None:
        monkeypatch.setenv("DOCKER_HOST", host)


def _spec(image: str) -> SandboxSpec:
    return SandboxSpec(
        run_id=f"crun-{uuid.uuid4().hex[:10]}",
        image=image,
        command=("python3", "-c", "print('under crun')"),
    )


def test_the_container_is_created_with_runtime_crun(
    crun_host: str | None, sandbox_image: str
) -> None:
    backend = DockerBackend.connect(crun_host, runtime="crun")
    try:
        created = backend.api.create_container(**backend.create_kwargs(_spec(sandbox_image)))
        try:
            info = backend.api.inspect_container(created["Id"])
        finally:
            backend.api.remove_container(created["Id"], force=True)
        assert info["HostConfig"]["Runtime"] == "crun"
        assert info["HostConfig"]["NetworkMode"] == "none"  # still the hardened config
        plain = DockerBackend.connect(crun_host)
        try:
            assert "Runtime" not in plain.create_kwargs(_spec(sandbox_image))["host_config"]
        finally:
            plain.close()
    finally:
        backend.close()


def test_a_sandbox_runs_under_crun_and_the_engine_says_so(
    crun_host: str | None, sandbox_image: str
) -> None:
    backend = DockerBackend.connect(crun_host, runtime="crun")
    try:
        try:
            with backend.sandbox(_spec(sandbox_image)) as box:
                info = backend.api.inspect_container(box.container_id)
                out = bytearray()
                for frame in box.frames(0.2):
                    if frame is not None and frame[0] == STDOUT:
                        out.extend(frame[1])
                state = box.wait(60)
        except InfrastructureError as exc:
            _xfail_on_hybrid(str(exc))
            raise
        assert info["HostConfig"]["Runtime"] == "crun"
        assert state.exit_code == 0 and out == b"under crun\n"
    finally:
        backend.close()


def test_run_with_runtime_crun_succeeds(
    crun_host: str | None, sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _env(monkeypatch, crun_host)
    work = tmp_path / "helpdesk"
    shutil.copytree(HELPDESK, work, ignore=shutil.ignore_patterns("traces"))
    args = ["run", "v1.yaml", "--tasks", "tasks.jsonl", "--task", "ticket-1000"]
    done = run_cli([*args, "--runtime", "crun", "--json"], work, sandbox_image)
    _xfail_on_hybrid(done.stdout + done.stderr)  # with --json the error is on stdout
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"


def test_an_unknown_runtime_is_exit_2_naming_the_engines_runtimes(
    sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "helpdesk"
    shutil.copytree(HELPDESK, work, ignore=shutil.ignore_patterns("traces"))
    args = ["run", "v1.yaml", "--tasks", "tasks.jsonl", "--task", "ticket-1000"]
    done = run_cli([*args, "--runtime", "no-such-runtime"], work, sandbox_image)
    assert done.returncode == 2, done.stderr
    assert "no runtime 'no-such-runtime'" in done.stderr and "runc" in done.stderr
    assert "Traceback" not in done.stderr
    monkeypatch.setenv("SANDBOX_REPLAY_RUNTIME", "no-such-runtime")
    done = run_cli(args, work, sandbox_image)
    assert done.returncode == 2 and "no runtime 'no-such-runtime'" in done.stderr


def test_doctor_lists_the_engines_runtimes(
    crun_host: str | None, sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _env(monkeypatch, crun_host)
    monkeypatch.setenv("SANDBOX_REPLAY_RUNTIME", "crun")
    done = run_cli(["doctor", "--json"], tmp_path, sandbox_image)
    checks: list[dict[str, Any]] = json.loads(done.stdout)["checks"]
    line = next(c for c in checks if c["name"] == "runtimes")
    assert line["ok"] and line["required"], line
    assert "crun" in line["detail"] and "runc" in line["detail"], line
