"""submit --baseline with real containers: PASS, FAIL or INCONCLUSIVE (exit 7) over repeats.

The fixture (tests/fixtures/gate) is a workflow whose one tool flips a coin with no seed
(`random.SystemRandom`) in the sandbox; the rubric scores heads 1, tails 0. An A/A job (the
same workflow twice, 4 tasks x 5 repeats) must never FAIL: its answer is PASS or
INCONCLUSIVE (the rule's false-FAIL chance was measured at 1 in 200 seeded A/A jobs by the
simulation of tests/unit/grading/test_gate_verdicts.py, which checks 30 seeds). A coin
that went from heads 95 % to 5 % must FAIL (every one of 100 simulated seeds did).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gate"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]


def _submit(tmp_path: Path, image: str, *args: str) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
        SANDBOX_REPLAY_IMAGE=image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
    )
    proc = subprocess.run(
        [*CLI, "submit", "--json", *args],
        cwd=FIX,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_an_a_a_job_passes_or_is_inconclusive_never_fails(
    tmp_path: Path, sandbox_image: str
) -> None:
    code, report = _submit(tmp_path, sandbox_image, "aa.yaml")
    assert report["runs_by_status"] == {"succeeded": 40}, report["runs_by_status"]
    gate = report["gate"]
    (verdict,) = gate["verdicts"]
    assert verdict["variant"] == "candidate" and gate["baseline"] == "base"
    assert verdict["verdict"] in ("PASS", "INCONCLUSIVE"), verdict
    assert code == {"PASS": 0, "INCONCLUSIVE": 7}[verdict["verdict"]] == report["exit_code"]
    for entry in report["scores"]["variants"]:
        low, high = entry["interval"]
        assert 0.0 <= low <= entry["mean"] <= high <= 1.0
        assert entry["episodes"] == 20 and entry["pass_at_k"] is not None
    assert report["scores"]["k"] == 5 and report["scores"]["spread"] == "repeats"


def test_a_real_regression_fails_with_exit_1(tmp_path: Path, sandbox_image: str) -> None:
    args = ["--variant", "good.yaml", "--variant", "broken.yaml", "--tasks", "tasks.jsonl"]
    junit = tmp_path / "gate.xml"
    code, report = _submit(
        tmp_path,
        sandbox_image,
        *args,
        "--repeats",
        "5",
        "--baseline",
        "coin@good",
        "--junit",
        str(junit),
    )
    (verdict,) = report["gate"]["verdicts"]
    assert verdict["variant"] == "coin@broken" and verdict["verdict"] == "FAIL", verdict
    assert code == 1 == report["exit_code"]
    assert report["verdict"]["winner"] == "coin@good"
    (case,) = ElementTree.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "coin@broken against coin@good"
    assert case.find("failure") is not None
