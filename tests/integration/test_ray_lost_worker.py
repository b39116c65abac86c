"""A worker node killed mid-job: its runs end ``infra_error``, the node's reaper
(on a node started again on the same engine) removes the container the dead worker left, and
``submit --resume`` completes the job with every pair charged once."""

from __future__ import annotations

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


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_a_killed_worker_leaves_nothing_after_its_reaper_and_resume_completes(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from runner.ledger import Ledger

    host = cluster.engine.host
    work = _project(tmp_path / "p", tasks=3, sleep_s=8.0)
    first: dict[str, Any] = {}

    def submit() -> None:
        first["code"], first["report"] = _submit(
            work, "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl",
            "--concurrency", "4",
        )  # fmt: skip

    thread = threading.Thread(target=submit)
    thread.start()
    # a run's sandbox (the tool description's sandbox runs before the job exists)
    jobs = work / "state" / "jobs"
    _wait(lambda: jobs.is_dir() and bool(_managed(host, running=True)), 240, "a run on B")
    owners = _owner_pids(host)
    cluster.cluster.remove_node(cluster.workers[1], allow_graceful=False)
    thread.join(timeout=600)
    assert first["code"] == 6, first  # worker B's runs: infra_error
    assert _managed(host, running=False), "the dead worker's container is still there"

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
