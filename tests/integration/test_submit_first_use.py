"""submit in real containers, as the new-user trial ran it (examples/helpdesk, no network):
a runs ceiling gives that many complete runs; a closed stdout (``| head -1``) keeps the exit
code; Ctrl-C prints how to continue and the resumed plan says how many runs are left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
HELPDESK = REPO / "examples" / "helpdesk"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "submit"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]


def _env(state: Path, image: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(SANDBOX_REPLAY_STATE_DIR=str(state), SANDBOX_REPLAY_IMAGE=image)
    return env


def test_runs_ceiling_of_ten_gives_ten_complete_runs(tmp_path: Path, sandbox_image: str) -> None:
    done = subprocess.run(
        [
            *CLI,
            *("submit", "--json", "--variant", "v1.yaml", "--variant", "v2.yaml"),
            *("--tasks", "tasks.jsonl", "--ceiling-runs", "10"),
        ],
        cwd=HELPDESK,
        env=_env(tmp_path / "state", sandbox_image),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 4, done.stderr[-3000:]  # 34 pairs not run
    report = json.loads(done.stdout)
    assert report["runs_by_status"] == {"not_run": 34, "succeeded": 10}
    assert report["stopped_by_ceiling"] == []
    assert report["spend"]["replay"]["charged"]["runs"] == 10
    ranked = {r["variant"] for t in report["grading"]["tasks"] for r in t["ranking"]}
    assert ranked == {"helpdesk-triage@1", "helpdesk-triage@2"}


def test_a_closed_stdout_keeps_the_exit_code_and_prints_no_traceback(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join((HELPDESK / "tasks.jsonl").read_text().splitlines(True)[:2]))
    proc = subprocess.Popen(
        [*CLI, "submit", "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", str(tasks)],
        cwd=HELPDESK,
        env=_env(tmp_path / "state", sandbox_image),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=300)
    assert first.startswith("plan job-")
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


def _session_containers(client: Any, pid: int) -> list[Any]:
    from runner.backends import labels as L

    return client.api.containers(all=True, filters={"label": [f"{L.OWNER_PID}={pid}"]})


def test_ctrl_c_says_how_to_continue_and_the_resumed_plan_counts_what_is_left(
    tmp_path: Path, sandbox_image: str, docker_client: Any
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        f"variants:\n  - {{name: s1, workflow: {FIX / 'slow.yaml'}}}\n"
        f"  - {{name: s2, workflow: {FIX / 'slow.yaml'}}}\n"
        f"tasks: {FIX / 'tasks.jsonl'}\nconcurrency: 2\n"
    )
    env = _env(tmp_path / "state", sandbox_image)
    proc = subprocess.Popen(
        [*CLI, "submit", str(job)],
        cwd=FIX,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_session_containers(docker_client, proc.pid)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    job_id = out.split()[1].rstrip(":")
    assert f"continue with: sandbox-replay submit --resume {job_id}" in err
    assert err.count("SIGINT: stopping") == 1 and "submit_interrupted" not in err
    assert "pairs interrupted (Ctrl-C): s" in out  # one line for the identical reasons
    assert out.count("interrupted (Ctrl-C)") == 1
    plan = subprocess.run(
        [*CLI, "submit", "--resume", job_id, "--dry-run"],
        cwd=FIX,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plan.returncode == 0, plan.stderr
    assert f"resuming {job_id}: 8 planned, 0 finished, 8 to run" in plan.stdout


def test_a_variant_image_the_engine_lacks_is_exit_2_before_the_plan_and_no_job(
    tmp_path: Path, sandbox_image: str
) -> None:
    """The trial: a variant's ``image:`` not built printed a plan, exited 6 from the describing
    sandbox's "image not found", and its job id named nothing in ``jobs`` or ``--resume``."""
    work = tmp_path / "helpdesk"
    work.mkdir()
    for name in ("v1.yaml", "v2.yaml", "tasks.jsonl", "helpdesk_tools.py", "helpdesk_model.py"):
        (work / name).write_bytes((HELPDESK / name).read_bytes())
    missing = "sandbox-replay-no-such-image:cli3"
    (work / "v2.yaml").write_text((HELPDESK / "v2.yaml").read_text() + f"image: {missing}\n")
    env = _env(tmp_path / "state", sandbox_image)
    args = [
        *CLI,
        "submit",
        "--variant",
        "v1.yaml",
        "--variant",
        "v2.yaml",
        "--tasks",
        "tasks.jsonl",
    ]
    done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert done.stdout == "" and "plan " not in done.stderr  # no plan, no job id shown
    assert "variant helpdesk-triage@2" in done.stderr and f"image {missing}" in done.stderr
    assert f"sandbox-replay image build --tag {missing}" in done.stderr
    assert "Traceback" not in done.stderr
    jobs = subprocess.run(
        [*CLI, "jobs", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert json.loads(jobs.stdout)["jobs"] == []
