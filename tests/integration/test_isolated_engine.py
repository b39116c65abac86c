"""The demo against an engine that cannot see this machine's paths (copy mode).

The engine (tests/integration/_isolated_engine.py) runs in its own network and mount
namespaces, with the checkout, the temporary folders and the home folder hidden from it, and
the sandbox image loaded into it. ``SANDBOX_REPLAY_HOST_FILES`` is left unset (``auto``): the
probe must find that the engine cannot see the host's files. Then ``doctor`` passes and says
so, and ``run``, ``submit`` and ``reproduce`` of the demo (examples/helpdesk) give the same
outcomes there as on the main engine (bind mounts). Before the copy mode every sandbox bind-mounted
host paths: that engine refused each one ("bind source path does not exist").
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

from tests.integration._isolated_engine import IsolatedEngine, isolated_engine

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

SUBMIT = ["submit", "--json", "--variant", "v1.yaml", "--variant", "v2.yaml"]


@pytest.fixture(scope="module")
def engine(sandbox_image: str) -> Any:
    with isolated_engine(sandbox_image) as made:
        yield made


def _cli(
    args: list[str], work: Path, image: str, host: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "SANDBOX_REPLAY_"))}
    env.update(
        SANDBOX_REPLAY_IMAGE=image,
        SANDBOX_REPLAY_STATE_DIR=str(work / "state"),
        SANDBOX_REPLAY_LOG_LEVEL="warning",
        DOCKER_CONFIG=str(work / "no-docker-config"),
    )
    if host is not None:
        env["DOCKER_HOST"] = host
    return subprocess.run(
        [CLI, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _submit_outcome(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    grading = report["grading"]
    return {
        "status": report["status"],
        "runs_by_status": report["runs_by_status"],
        "pairs": sorted((p["variant"], p["task_id"], p["status"]) for p in report["pairs"]),
        "ranking": [(v["variant"], v["mean_rank"], v["versus"]) for v in grading["variants"]],
        "unrecorded": report["unrecorded"],
    }


def _project(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    shutil.copytree(REPO / "examples" / "helpdesk", work)
    return work


@pytest.mark.slow
def test_the_demo_gives_the_same_outcomes_on_an_engine_that_cannot_see_this_host(
    engine: IsolatedEngine, sandbox_image: str, tmp_path: Path
) -> None:
    outcomes: dict[str, dict[str, Any]] = {}
    for name, host in (("main", None), ("isolated", engine.host)):
        work = _project(tmp_path, name)
        run = _cli(
            ["run", "v1.yaml", "--tasks", "tasks.jsonl", "--task", "ticket-1000", "--json"],
            work,
            sandbox_image,
            host,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        ran = json.loads(run.stdout)
        submit = _cli(
            [*SUBMIT, "--tasks", "tasks.jsonl", "--ceiling-runs", "50"],
            work,
            sandbox_image,
            host,
        )
        failing = _cli(["reproduce", "traces/failing.jsonl"], work, sandbox_image, host)
        incomplete = _cli(["reproduce", "traces/incomplete.jsonl"], work, sandbox_image, host)
        outcomes[name] = {
            "run": (ran["status"], ran.get("output")),
            "submit": _submit_outcome(submit),
            "reproduce": [
                (failing.returncode, failing.stdout.splitlines()[0]),
                (incomplete.returncode, incomplete.stdout.splitlines()[0]),
                "first difference [extra_turn]: call #3 kb.search" in incomplete.stdout,
            ],
        }
    assert outcomes["isolated"] == outcomes["main"]
    # and they are the demo's outcomes, not two identical failures
    main = outcomes["main"]
    assert main["run"][0] == "succeeded"
    assert main["submit"]["runs_by_status"] == {"succeeded": 44}
    assert main["submit"]["ranking"][0][0] == "helpdesk-triage@2"
    assert main["reproduce"] == [
        (0, "traces/failing.jsonl: reproduced (exit 0)"),
        (1, "traces/incomplete.jsonl: not_reproduced (exit 1)"),
        True,
    ]


def test_doctor_reports_the_copy_mode_and_the_runtime_it_baked(
    engine: IsolatedEngine, sandbox_image: str, tmp_path: Path
) -> None:
    done = _cli(["doctor", "--json"], _project(tmp_path, "doctor"), sandbox_image, engine.host)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["engine"]["ok"] and engine.host in checks["engine"]["detail"]
    files = checks["files"]
    assert files["ok"] and files["required"], files
    assert files["detail"].startswith("copied through the engine's API"), files
    assert "bind source path does not exist" in files["detail"], files
    assert "sandbox-replay-runtime:" in files["detail"]
    assert all(checks[n]["ok"] for n in ("hardening", "network", "python"))


def test_a_bind_mode_forced_on_that_engine_fails_with_the_fix(
    engine: IsolatedEngine, sandbox_image: str, tmp_path: Path
) -> None:
    work = _project(tmp_path, "forced-bind")
    env_cli = [CLI, "doctor"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "SANDBOX_REPLAY_"))}
    env.update(
        DOCKER_HOST=engine.host,
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_STATE_DIR=str(work / "state"),
        SANDBOX_REPLAY_HOST_FILES="bind",
    )
    done = subprocess.run(
        env_cli, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 6, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.split()[1:2] == ["files"])
    assert line.startswith("FAIL") and "SANDBOX_REPLAY_HOST_FILES=bind" in line, done.stdout
    assert "SANDBOX_REPLAY_HOST_FILES=copy" in done.stdout  # the fix
