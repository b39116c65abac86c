"""The engine reached only through a docker context at a non-default socket.

``DOCKER_HOST`` is unset and the docker config (``DOCKER_CONFIG``, a folder of the test) has a
current context whose endpoint is a socket path nobody else uses (a link to this machine's
engine socket): ``doctor`` exits 0 naming the context, and ``run`` of the demo works. Before
engine discovery the client ignored contexts and went to the default socket.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _unusable
from tests.support.dockercontext import write_context

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker


def _engine_socket() -> Path:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        _unusable(
            f"the engine is not on a local socket ({host}): these tests point a docker"
            " context at it"
        )  # fails under CI=true, skips otherwise
    return Path(host[len("unix://") :])


def _context_env(tmp_path: Path, *, current: str, host: str) -> dict[str, str]:
    config = tmp_path / "docker-config"
    write_context(config, current, host, current=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
    env.pop("SANDBOX_REPLAY_DOCKER_HOST", None)
    env.update({"DOCKER_CONFIG": str(config), "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state")})
    return env


def test_doctor_and_run_through_a_context_at_a_non_default_socket(
    tmp_path: Path, docker_client: Any, sandbox_image: str
) -> None:
    elsewhere = tmp_path / "engine" / "elsewhere.sock"
    elsewhere.parent.mkdir()
    elsewhere.symlink_to(_engine_socket())
    env = _context_env(tmp_path, current="laptop-vm", host=f"unix://{elsewhere}")
    env["SANDBOX_REPLAY_IMAGE"] = sandbox_image

    doctor = subprocess.run(
        [CLI, "doctor"], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    engine_line = next(line for line in doctor.stdout.splitlines() if " engine " in line)
    assert f"unix://{elsewhere}" in engine_line, doctor.stdout
    assert "docker context 'laptop-vm'" in engine_line, doctor.stdout

    work = tmp_path / "helpdesk"
    shutil.copytree(REPO / "examples" / "helpdesk", work)
    run = subprocess.run(
        [CLI, "run", "v1.yaml", "--tasks", "tasks.jsonl", "--task", "ticket-1000", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["status"] == "succeeded", run.stdout


def test_a_context_pointing_nowhere_fails_doctor_naming_it(tmp_path: Path) -> None:
    env = _context_env(tmp_path, current="stopped-vm", host=f"unix://{tmp_path}/gone.sock")
    doctor = subprocess.run(
        [CLI, "doctor"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert doctor.returncode == 6, doctor.stdout + doctor.stderr
    first, fix = doctor.stdout.splitlines()[:2]
    assert first.startswith("FAIL  engine") and f"{tmp_path}/gone.sock" in first
    assert "docker context 'stopped-vm'" in first
    assert "fix:" in fix and "docker context use" in fix
    assert "Traceback" not in doctor.stderr
