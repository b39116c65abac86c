"""``sandbox-replay ledger [--job ID] [--json]``: totals by purpose from the state directory."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runner.ledger import Amount, Ledger


def run_cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", "ledger", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SANDBOX_REPLAY_STATE_DIR": str(state_dir), "COLUMNS": "200"},
        check=False,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    with Ledger.for_state_dir(state) as led:
        led.create_job("job1", {"runs": 2}, {})
        led.create_job("job2", {}, {})
        led.start_run("job1", "A", "t1")
        led.finish_run("run/replay/job1/A/t1/1", "succeeded", Amount(sandbox_s=1.5))
        led.reserve("r1", "job1", "replay", Amount(runs=1), kind="run")
        led.settle("r1", Amount(runs=1, tokens_in=100, tokens_out=10, usd=0.5, sandbox_s=1.5))
        led.reserve("r2", "job1", "replay", Amount(runs=1, usd=0.25), kind="run")
        led.reserve("j1", "job1", "judge", Amount(runs=1, tokens_in=50), kind="model_call")
        led.settle("j1", Amount(runs=1, tokens_in=40, tokens_out=5, usd=0.125))
        led.reserve("r3", "job2", "replay", Amount(runs=1), kind="run")
        led.settle("r3", Amount(runs=1, usd=2.0))
    return state


def test_json_totals_by_purpose_over_all_jobs(state_dir: Path) -> None:
    proc = run_cli(state_dir, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ledger"] == str(state_dir / "ledger.sqlite3")
    assert data["job"] is None and data["schema_version"] == 4
    assert set(data["purposes"]) == {"live", "replay", "judge"}
    replay = data["purposes"]["replay"]
    assert replay["charged"] == {
        "runs": 2,
        "tokens_in": 100,
        "tokens_out": 10,
        "usd": 2.5,
        "sandbox_s": 1.5,
    }
    assert replay["reserved"]["runs"] == 1 and replay["reserved"]["usd"] == 0.25
    assert replay["runs_by_status"] == {"succeeded": 1}
    judge = data["purposes"]["judge"]
    assert judge["model_calls"] == 1 and judge["charged"]["usd"] == 0.125
    assert data["purposes"]["live"]["settled_charges"] == 0


def test_job_narrows_the_totals(state_dir: Path) -> None:
    data = json.loads(run_cli(state_dir, "--job", "job2", "--json").stdout)
    assert data["job"]["id"] == "job2" and data["job"]["status"] == "running"
    assert data["purposes"]["replay"]["charged"]["usd"] == 2.0
    assert data["purposes"]["judge"]["charged"]["runs"] == 0


def test_table_output(state_dir: Path) -> None:
    proc = run_cli(state_dir, "--job", "job1")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[1]: line for line in proc.stdout.splitlines() if line.startswith("│")}
    assert "job job1 (running)" in proc.stdout
    assert "$0.5000" in rows["replay"] and "1 run $0.2500" in rows["replay"]
    assert "succeeded 1" in rows["replay"]
    assert "$0.1250" in rows["judge"]


def test_no_ledger_yet_shows_zeros_and_creates_nothing(tmp_path: Path) -> None:
    state = tmp_path / "empty"
    proc = run_cli(state, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema_version"] is None
    assert all(p["charged"]["runs"] == 0 for p in data["purposes"].values())
    assert not state.exists()
    assert "none yet" in run_cli(state).stdout


@pytest.mark.parametrize(
    ("job", "message"),
    [("nope", "no job 'nope' in"), ("../x", "invalid job id"), ("a/b", "invalid job id")],
)
def test_bad_job_is_invalid_input(state_dir: Path, job: str, message: str) -> None:
    for args in (("--job", job), ("--job", job, "--json")):
        proc = run_cli(state_dir, *args)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert message in proc.stdout + proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr


def test_a_newer_ledger_is_refused_clearly(state_dir: Path) -> None:
    raw = sqlite3.connect(state_dir / "ledger.sqlite3", isolation_level=None)
    raw.execute("UPDATE schema_version SET version = 99")
    raw.close()
    proc = run_cli(state_dir)
    assert proc.returncode == 2
    assert "ledger schema version 99 is newer" in proc.stderr
    assert "Traceback" not in proc.stderr
