"""submit with real containers: cost visibility, ceilings, budgets per purpose, Ctrl-C, SIGKILL
and resume, tournament. Model calls go to a fake OpenAI-compatible server on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from runner.ledger import Ledger
from tests.support.fake_openai import FakeOpenAI, serve

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "submit"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]
DEAD_URL = "http://127.0.0.1:9/v1"  # discard port on loopback: refused at once


def _env(state: Path, image: str, openai_url: str = DEAD_URL) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(state),
        SANDBOX_REPLAY_IMAGE=image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
        SANDBOX_REPLAY_OPENAI_BASE_URL=openai_url,
        SANDBOX_REPLAY_OPENAI_API_KEY="sk-fake",
    )
    return env


def submit(state: Path, image: str, *args: str, url: str = DEAD_URL) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [*CLI, "submit", "--json", *args],
        cwd=FIX,
        env=_env(state, image, url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def variants(*names: str) -> list[str]:
    out: list[str] = []
    for name in names:
        out += ["--variant", name]
    return out


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serve(FakeOpenAI()) as server:
        yield server


def test_cost_visibility_twelve_replay_episodes_and_judge_calls_under_judge(
    state: Path, sandbox_image: str, fake: FakeOpenAI
) -> None:
    code, report = submit(
        state,
        sandbox_image,
        *variants("a.yaml", "b.yaml", "c.yaml"),
        "--tasks",
        "tasks.jsonl",
        "--judge",
        "model:gpt-4.1-mini",
        url=fake.url,
    )
    assert code == 0, report
    assert report["plan"]["runs"] == 12 and report["plan"]["formula"].endswith("= 12 runs")
    assert report["runs_by_status"] == {"succeeded": 12}
    with Ledger.for_state_dir(state) as ledger:
        runs = ledger.runs(report["job_id"])
        totals = ledger.totals(report["job_id"])
    assert len(runs) == 12 and {r.purpose for r in runs} == {"replay"}
    assert totals["replay"].charged.runs == 12
    # a model judge ranks each of the 4 groups in two orders (runner.grading.order)
    assert totals["judge"].model_calls == 8 and totals["judge"].charged.usd > 0
    assert totals["replay"].model_calls == 0  # the judge's calls never count as replay
    assert len(fake.requests) == 8 and report["plan"]["judge"]["model_calls"] == 8
    assert report["grading"]["consistency"]["checked"] == 4
    # the model judge tied everyone on every task (the fake ranks all candidates 1)
    ranks = {r["rank"] for t in report["grading"]["tasks"] for r in t["ranking"]}
    assert ranks == {1}
    assert (state / "jobs" / report["job_id"] / "report.json").exists()


def test_tournament_b_matching_expected_rates_above_a_and_equal_episodes_tie(
    state: Path, sandbox_image: str
) -> None:
    code, report = submit(
        state, sandbox_image, *variants("a.yaml", "b.yaml", "c.yaml"), "--tasks", "tasks.jsonl"
    )
    assert code == 0
    standings = {v["variant"]: v for v in report["grading"]["variants"]}
    a, b, c = standings["fixture@a"], standings["fixture@b"], standings["fixture@c"]
    assert b["rating"]["ordinal"] > a["rating"]["ordinal"]
    assert b["rating"]["mu"] == pytest.approx(c["rating"]["mu"])
    assert b["versus"]["fixture@c"] == {"wins": 0, "ties": 4, "losses": 0}
    assert b["versus"]["fixture@a"] == {"wins": 4, "ties": 0, "losses": 0}
    for task in report["grading"]["tasks"]:
        ranks = {r["variant"]: r["rank"] for r in task["ranking"]}
        assert ranks == {"fixture@b": 1, "fixture@c": 1, "fixture@a": 3}
    again = subprocess.run(
        [*CLI, "report", report["job_id"], "--json"],
        cwd=FIX,
        env=_env(state, sandbox_image),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and json.loads(again.stdout) == report


def test_run_ceiling_five_of_twelve_at_concurrency_four(state: Path, sandbox_image: str) -> None:
    code, report = submit(
        state,
        sandbox_image,
        *variants("a.yaml", "b.yaml", "c.yaml"),
        "--tasks",
        "tasks.jsonl",
        "--ceiling-runs",
        "5",
        "--concurrency",
        "4",
    )
    assert code == 4
    assert report["status"] == "ceiling_reached"
    assert report["ceilings"]["replay"]["runs"] == {"value": 5, "source": "--ceiling-runs"}
    assert len(report["not_run"]) == 7
    assert all("runs" in entry["reason"] for entry in report["not_run"])
    ran = {(p["variant"], p["task_id"]) for p in report["pairs"] if p["status"] != "not_run"}
    assert len(ran) == 5 and ran.isdisjoint(
        {(e["variant"], e["task_id"]) for e in report["not_run"]}
    )
    with Ledger.for_state_dir(state) as ledger:
        assert ledger.totals(report["job_id"])["replay"].charged.runs == 5
        assert len(ledger.runs(report["job_id"])) == 5


def test_usd_ceiling_with_model_calls_from_four_concurrent_containers(
    state: Path, sandbox_image: str, fake: FakeOpenAI
) -> None:
    ceiling = 0.0025
    code, report = submit(
        state,
        sandbox_image,
        *variants("agent.yaml", "agent2.yaml"),
        "--tasks",
        "tasks.jsonl",
        "--concurrency",
        "4",
        "--ceiling-usd",
        str(ceiling),
        url=fake.url,
    )
    assert code == 4, report
    with Ledger.for_state_dir(state) as ledger:
        totals = ledger.totals(report["job_id"])["replay"]
        calls = [c for c in ledger.charges(report["job_id"]) if c.kind == "model_call"]
        runs = ledger.runs(report["job_id"])
    assert totals.charged.usd <= ceiling and totals.reserved.usd == 0
    for run in runs:  # a refused model call: the trace's end line says what the ledger says
        end = json.loads(Path(str(run.trace_path)).read_text().splitlines()[-1])
        assert end["status"] == run.status, (run.key, end["status"], run.status)
        if run.status == "ceiling_reached":
            assert end["failure"]["error_class"] == "CeilingReached"
    settled = [c for c in calls if c.state == "settled"]
    assert settled and len(fake.requests) == len(settled)  # nothing forwarded uncharged
    assert all(r["max_tokens"] == 1024 for r in fake.requests)  # the cap the estimate used
    assert {c.model for c in settled} == {"gpt-4.1-mini-2025-04-14"}  # from the response
    assert report["stopped_by_ceiling"] or report["not_run"]
    assert report["ceiling_reached"]["purpose"] == "replay"


def test_exhausted_replay_budget_leaves_the_judge_budget_and_back(
    state: Path, sandbox_image: str, fake: FakeOpenAI
) -> None:
    code, report = submit(
        state,
        sandbox_image,
        *variants("a.yaml", "b.yaml"),
        "--tasks",
        "tasks.jsonl",
        "--ceiling-runs",
        "2",
        "--concurrency",
        "1",
        "--judge",
        "model:gpt-4.1-mini",
        url=fake.url,
    )
    assert code == 4 and report["ceiling_reached"]["purpose"] == "replay"
    spend = report["spend"]
    assert spend["replay"]["charged"]["runs"] == 2
    assert spend["judge"]["model_calls"] == 2  # t1's group (both variants ran), two orders
    code, report = submit(
        state,
        sandbox_image,
        *variants("a.yaml", "b.yaml"),
        "--tasks",
        "tasks.jsonl",
        "--judge-ceiling-usd",
        "0",
        "--judge",
        "model:gpt-4.1-mini",
        url=fake.url,
    )
    assert code == 4
    assert report["runs_by_status"] == {"succeeded": 8}
    assert report["grading"]["ceiling_reached"]["purpose"] == "judge"
    assert report["spend"]["judge"]["model_calls"] == 0
    assert report["spend"]["replay"]["charged"]["runs"] == 8


def _session_containers(client: Any, pid: int) -> list[dict[str, Any]]:
    # The low-level list: the high-level one inspects each container and races with removal.
    found = client.api.containers(all=True, filters={"label": [f"{L.OWNER_PID}={pid}"]})
    return [c for c in found if (c.get("Labels") or {}).get(L.OWNER_HOST) == L.host_id()]


def _start(state: Path, image: str, job: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "submit", "--json", job],
        cwd=FIX,
        env=_env(state, image),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _job_file(tmp_path: Path, workflow: str) -> str:
    job = tmp_path / "job.yaml"
    job.write_text(
        f"variants:\n  - {{name: s1, workflow: {FIX / workflow}}}\n"
        f"  - {{name: s2, workflow: {FIX / workflow}}}\n"
        f"tasks: {FIX / 'tasks.jsonl'}\nconcurrency: 4\n"
    )
    return str(job)


def test_sigint_during_four_way_submit_exits_130_and_leaves_no_container(
    tmp_path: Path, state: Path, sandbox_image: str, docker_client: Any
) -> None:
    proc = _start(state, sandbox_image, _job_file(tmp_path, "slow.yaml"))
    try:
        deadline = time.monotonic() + 60
        while len(_session_containers(docker_client, proc.pid)) < 4:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        session = _session_containers(docker_client, proc.pid)[0]["Labels"][L.SESSION]
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
        assert time.monotonic() - sent < 15
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, proc.stderr.read()[-2000:] if proc.stderr else ""
    left = docker_client.api.containers(all=True, filters={"label": [f"{L.SESSION}={session}"]})
    assert left == []
    report = json.loads(proc.stdout.read() if proc.stdout else "{}")
    assert report["status"] == "interrupted" and report["exit_code"] == 130
    with Ledger.for_state_dir(state) as ledger:
        assert ledger.get_job(report["job_id"]).status == "interrupted"  # type: ignore[union-attr]
        assert "running" not in {r.status for r in ledger.runs(report["job_id"])}


@pytest.mark.slow
def test_sigkill_then_resume_reaps_runs_the_rest_and_never_charges_twice(
    tmp_path: Path, state: Path, sandbox_image: str, docker_client: Any
) -> None:
    proc = _start(state, sandbox_image, _job_file(tmp_path, "quick_slow.yaml"))
    try:
        deadline = time.monotonic() + 90
        finished: set[tuple[str, str]] = set()
        while True:
            assert proc.poll() is None and time.monotonic() < deadline
            jobs = list((state / "jobs").glob("*")) if (state / "jobs").exists() else []
            if jobs and (state / "ledger.sqlite3").exists():
                with Ledger.for_state_dir(state) as ledger:
                    finished = ledger.finished_pairs(jobs[0].name)
                if finished and _session_containers(docker_client, proc.pid):
                    break
            time.sleep(0.1)
        old_pid = proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    job_id = jobs[0].name
    leftovers = _session_containers(docker_client, old_pid)
    assert leftovers, "a SIGKILLed orchestrator leaves its running containers behind"
    with Ledger.for_state_dir(state) as ledger:
        finished = ledger.finished_pairs(job_id)
        before = {
            (r.variant, r.task_id): r.key
            for r in ledger.runs(job_id)
            if (r.variant, r.task_id) in finished
        }
    resumed = subprocess.run(
        [*CLI, "submit", "--json", "--resume", job_id],
        cwd=FIX,
        env=_env(state, sandbox_image),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = json.loads(resumed.stdout)
    assert report["resumed"] and report["runs_by_status"] == {"succeeded": 8}
    assert _session_containers(docker_client, old_pid) == []  # reaped
    with Ledger.for_state_dir(state) as ledger:
        runs = ledger.runs(job_id)
        charges = [c for c in ledger.charges(job_id) if c.kind == "run"]
    for pair, key in before.items():  # finished pairs were not run again
        assert [r.key for r in runs if (r.variant, r.task_id) == pair] == [key]
    keys = [c.key for c in charges if c.state == "settled"]
    assert len(keys) == len(set(keys)) == len(runs)  # one settled charge per run attempt
    assert {c.state for c in charges} == {"settled"}
