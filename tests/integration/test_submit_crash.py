"""``kill -9`` of a real ``submit``, then ``--resume``: the ledger charges what ran.

Two runs are in flight (each sleeps 4 s in its sandbox) when the orchestrator is killed. Their
containers outlive it; ``--resume`` reaps them, reads the engine's start and finish times first
(a container still running: until its removal), and charges each dead run those seconds, not
its reservation (timeout plus grace, ~316 s).
"""

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

from runner.backends import labels as L
from runner.ledger import Ledger

CLI = str(Path(sys.executable).parent / "sandbox-replay")
SLEEP_S = 4.0

pytestmark = pytest.mark.docker

TOOLS = """
import time

from runner.sdk import Effect, tool


@tool("slow.wait", effect=Effect.PURE, description="Wait, then answer.")
def wait(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
"""

WORKFLOW = """\
name: slow
version: "1"
tools: [slow_tools]
steps:
  - id: wait
    tool: slow.wait
    args: {seconds: "${task.sleep_s}"}
"""


def _project(root: Path, sleep_s: float = SLEEP_S, tasks_n: int = 2) -> Path:
    root.mkdir(parents=True)
    root.chmod(0o755)
    tasks = "".join(
        json.dumps({"task_id": f"t{i}", "input": {"sleep_s": sleep_s}}) + "\n"
        for i in range(1, tasks_n + 1)
    )
    for name, text in (("slow_tools.py", TOOLS), ("slow.yaml", WORKFLOW), ("tasks.jsonl", tasks)):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _env(work: Path, image: str, pool: str = "1") -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SANDBOX_REPLAY_STATE_DIR": str(work / "state"), "SANDBOX_REPLAY_IMAGE": image})
    env["SANDBOX_REPLAY_POOL"] = pool
    return env


def _containers(client: Any, pid: int) -> list[dict[str, Any]]:
    # the low-level list: the high-level one inspects each container and races with removal
    return list(client.api.containers(all=True, filters={"label": [f"{L.OWNER_PID}={pid}"]}))


def _runs_in_flight(client: Any, pid: int, state: Path) -> int:
    """Runs with a running sandbox: a run's own container, or a pooled one bound to a run."""
    boxes = [c for c in _containers(client, pid) if c["State"] == "running"]
    own = [c for c in boxes if not (c.get("Labels") or {}).get(L.POOL)]
    bound = list((state / "pool").glob("*.json")) if (state / "pool").exists() else []
    return len(own) + len(bound)


def _wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _kill_when_running(
    work: Path, args: list[str], image: str, pool: str, client: Any, *, runs: int
) -> subprocess.Popen[bytes]:
    """Start ``sandbox-replay ARGS``; ``kill -9`` it 1 s after ``runs`` sandboxes run."""
    proc = subprocess.Popen(
        [CLI, "--log-format", "json", *args, "--json"],
        cwd=work,
        env=_env(work, image, pool),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def running() -> bool:
            return _runs_in_flight(client, proc.pid, work / "state") >= runs

        _wait_for(running, 120, f"{runs} running sandbox(es) of the submit")
        time.sleep(1.0)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc


@pytest.mark.parametrize("pool", ["1", "0"])  # with the warm pool (the default) and without
def test_kill_9_then_resume_charges_the_dead_runs_what_their_containers_ran(
    tmp_path: Path, sandbox_image: str, docker_client: Any, pool: str
) -> None:
    work = _project(tmp_path / "crash")
    args = ["submit", "--variant", "slow.yaml", "--tasks", "tasks.jsonl", "--concurrency", "2"]
    proc = _kill_when_running(work, args, sandbox_image, pool, docker_client, runs=2)
    (job,) = [p.name for p in (work / "state" / "jobs").iterdir()]
    with Ledger.for_state_dir(work / "state") as ledger:
        open_runs = [c for c in ledger.charges(job) if c.kind == "run" and c.state == "reserved"]
    assert len(open_runs) == 2  # the crash left both reservations open
    reserved_s = open_runs[0].estimate.sandbox_s
    assert reserved_s > 300

    assert len(_containers(docker_client, proc.pid)) >= 2  # they outlive their host
    done = subprocess.run(
        [CLI, "--log-format", "json", "--log-level", "info", "submit", "--resume", job, "--json"],
        cwd=work,
        env=_env(work, sandbox_image, pool),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "complete" and report["runs_by_status"]["succeeded"] == 2
    assert _containers(docker_client, proc.pid) == []  # reaped
    with Ledger.for_state_dir(work / "state") as ledger:
        charges = [c for c in ledger.charges(job) if c.kind == "run"]
        runs = {r.key: r for r in ledger.runs(job)}
    dead = [c for c in charges if c.key in {r.key for r in open_runs}]
    assert len(dead) == 2
    for charge in dead:
        assert charge.state == "settled" and charge.actual is not None
        # measured by the engine (a reaper of another session running code older than this
        # would have removed the container first: the log lines say who reaped what)
        reaper_log = [x for x in done.stderr.splitlines() if "reap" in x or "settled" in x]
        assert not charge.estimated, reaper_log
        assert 1.0 <= charge.actual.sandbox_s < SLEEP_S + 10, charge.actual
        assert runs[str(charge.run_key)].status == "interrupted"
    spend = report["spend"]["replay"]
    assert spend["estimated_charges"] == 0
    assert spend["charged"]["sandbox_s"] < 4 * (SLEEP_S + 10) < reserved_s


@pytest.mark.parametrize("pool", ["1", "0"])
@pytest.mark.slow
def test_kill_9_under_a_tight_sandbox_seconds_ceiling_then_resume_stays_under_it(
    tmp_path: Path, sandbox_image: str, docker_client: Any, pool: str
) -> None:
    """The host dies while a run holds its budget-clock deadline; the sandbox runs on
    (30 s) past the 12-s ceiling; ``--resume`` charges it at most its bound, charges nothing
    twice and stops at the line (exit 4). On main no run could start: each reserved 375.7 s."""
    ceiling = 12.0
    work = _project(tmp_path / "tight", sleep_s=30.0, tasks_n=4)
    args = ["submit", "--variant", "slow.yaml", "--tasks", "tasks.jsonl", "--concurrency", "2"]
    args += ["--ceiling-sandbox-s", str(ceiling)]
    proc = _kill_when_running(work, args, sandbox_image, pool, docker_client, runs=1)
    (job,) = [p.name for p in (work / "state" / "jobs").iterdir()]
    with Ledger.for_state_dir(work / "state") as ledger:
        assert ledger.committed(job, "replay").sandbox_s <= ceiling  # bounds, not timeouts
        open_runs = [c for c in ledger.charges(job) if c.kind == "run" and c.state == "reserved"]
    assert open_runs

    def sandboxes_ended() -> bool:  # the sleep outlives the deadline its dead host set
        return all(c["State"] != "running" for c in _containers(docker_client, proc.pid))

    _wait_for(sandboxes_ended, 120, "the orphaned sandboxes to end by themselves")
    done = subprocess.run(
        [CLI, "--log-format", "json", "submit", "--resume", job, "--json"],
        cwd=work,
        env=_env(work, sandbox_image, pool),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 4, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["not_run"] and report["ceiling_reached"]["limit"] == "sandbox_s"
    with Ledger.for_state_dir(work / "state") as ledger:
        charges = [c for c in ledger.charges(job) if c.kind == "run"]
        total = ledger.totals(job)["replay"].charged.sandbox_s
    keys = [c.key for c in charges]
    assert len(keys) == len(set(keys))  # no pair charged twice
    assert total <= ceiling
    for charge in (c for c in charges if c.key in {o.key for o in open_runs}):
        assert charge.actual is not None and charge.actual.sandbox_s <= charge.estimate.sandbox_s
