"""A worker node killed mid-job: its runs end ``infra_error``, the node's reaper
(on a node started again on the same engine) removes the container the dead worker left, and
``submit --resume`` completes the job with every pair charged once.

The node is lost the way a machine is: everything on it stops at once. Its engine's run
containers are paused the moment each starts (the engine's own ``start`` events, read as they
come), then the node's processes are killed. A fixed margin (kill within the 8 s a run sleeps)
was not a loss: on a loaded machine the run on B could finish, or its worker process (which
outlives its raylet by about a second) could remove its container, before the kill landed, and
the first job then ended 0 or left nothing to reap.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from tests.integration._ray import RayCluster, ray_cluster, ray_module, second_engine, worker_args
from tests.integration.test_ray_backend import _project, _submit

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(sandbox_image: str) -> Iterator[RayCluster]:
    ray = ray_module()
    with second_engine(sandbox_image) as engine, ray_cluster(engine) as running:
        ray.init(address=running.address, include_dashboard=False, log_to_driver=False)
        try:
            yield running
        finally:
            ray.shutdown()


def _managed(host: str, *, running: bool) -> list[str]:
    args = ["docker", "-H", host, "ps", "-q", "--filter", f"label={L.MANAGED}=1"]
    args += [] if running else ["-a"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def _owner_pids(host: str) -> set[int]:
    out = subprocess.run(
        ["docker", "-H", host, "ps", "-a", "--filter", f"label={L.MANAGED}=1",
         "--format", f'{{{{.Label "{L.OWNER_PID}"}}}}'],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return {int(p) for p in out.stdout.split() if p.isdigit()}


class _Freezer(threading.Thread):
    """Pauses each run container the engine at ``host`` starts once ``armed`` (its events)."""

    def __init__(self, host: str, armed: Any) -> None:
        super().__init__(daemon=True)
        self.host, self.armed = host, armed
        self.paused: list[str] = []
        self.first = threading.Event()
        self.proc = subprocess.Popen(
            ["docker", "-H", host, "events", "--format", "{{json .}}", "--filter",
             "type=container", "--filter", "event=start", "--filter", f"label={L.MANAGED}=1"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            container = json.loads(line)["id"]
            if not self.armed():  # the tool description's sandbox, before the job exists
                continue
            subprocess.run(["docker", "-H", self.host, "pause", container], check=False,
                           capture_output=True, timeout=60)  # fmt: skip
            self.paused.append(container)
            self.first.set()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.slow
def test_a_killed_worker_leaves_nothing_after_its_reaper_and_resume_completes(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from runner.ledger import Ledger

    assert cluster.engine is not None
    host = cluster.engine.host
    work = _project(tmp_path / "p", tasks=3, sleep_s=8.0)
    first: dict[str, Any] = {}

    def submit() -> None:
        first["code"], first["report"] = _submit(
            work, "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl",
            "--concurrency", "4",
        )  # fmt: skip

    jobs = work / "state" / "jobs"
    freezer = _Freezer(host, jobs.is_dir)
    freezer.start()
    thread = threading.Thread(target=submit)
    thread.start()
    try:
        assert freezer.first.wait(240), "no run started on B"
        cluster.cluster.remove_node(cluster.workers[1], allow_graceful=False)
    finally:
        freezer.stop()
    thread.join(timeout=600)
    assert first["code"] == 6, first  # worker B's runs: infra_error
    left = _managed(host, running=False)
    assert {c[:12] for c in freezer.paused} <= set(left), (freezer.paused, left)  # not removed
    owners = _owner_pids(host)  # every container B's worker processes made, paused or not

    def owners_dead() -> bool:
        return not any(Path(f"/proc/{pid}").exists() for pid in owners)

    _wait(owners_dead, 60, "the killed worker's processes to end")
    cluster.workers[1] = cluster.cluster.add_node(**worker_args(host, cluster.caches / "b2"))
    cluster.cluster.wait_for_nodes()
    with Ledger(work / "state" / "ledger.sqlite3") as ledger:
        (job,) = [r["id"] for r in ledger._db.read("SELECT id FROM jobs")]
    code, report = _submit(work, "--resume", job)
    assert code == 0, report
    assert _managed(host, running=False) == []  # reaped on its node before the job went on
    with Ledger(work / "state" / "ledger.sqlite3") as ledger:
        rows = ledger._db.read("SELECT variant, task_id, status FROM runs WHERE purpose = 'replay'")
    done = [(r["variant"], r["task_id"]) for r in rows if r["status"] == "succeeded"]
    assert len(done) == 6 and len(set(done)) == 6  # every pair once, none charged twice
