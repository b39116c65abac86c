"""submit --repeats K with real containers: K fresh episodes per pair, each charged and graded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.ledger import Ledger

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "submit"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]


def test_repeats_run_fresh_episodes_each_charged_and_graded_per_repeat(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
    )
    args = ["submit", "--json", "--variant", "a.yaml", "--variant", "b.yaml"]
    args += ["--tasks", "tasks.jsonl", "--repeats", "2", "--seed", "9"]
    proc = subprocess.run(
        [*CLI, *args], cwd=FIX, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["plan"]["formula"] == "2 variants x 4 tasks x 2 repeats = 16 runs"
    assert report["plan"]["repeats"] == 2 and report["runs_by_status"] == {"succeeded": 16}
    episodes = {(p["variant"], p["task_id"], p["repeat"]) for p in report["pairs"]}
    assert len(episodes) == 16
    traces = {p["trace"] for p in report["pairs"]}
    assert len(traces) == 16  # every repeat is its own episode, its own trace
    with Ledger.for_state_dir(tmp_path / "state") as ledger:
        runs = ledger.runs(report["job_id"])
        totals = ledger.totals(report["job_id"])
    assert len({r.key for r in runs}) == 16 and totals["replay"].charged.runs == 16
    assert {r.repeat for r in runs} == {0, 1}
    grading = report["grading"]
    assert grading["seed"] == 9
    assert sorted((t["task_id"], t["repeat"]) for t in grading["tasks"]) == sorted(
        (f"t{i}", r) for i in range(1, 5) for r in (0, 1)
    )
    assert all(t["detail"]["order"] for t in grading["tasks"])
    (verdict,) = grading["verdicts"]
    assert verdict["verdict"] == "too_few_tasks"  # 4 tasks, however many repeats
    assert grading["uncertainty"]["win_rates"]["fixture@b"]["fixture@a"]["groups"] == 8
