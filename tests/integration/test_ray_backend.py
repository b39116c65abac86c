"""``submit --backend ray`` on a real three-node Ray cluster on 127.0.0.1.

Head (no sandbox slots) + worker A on the main engine + worker B on a second dockerd of its
own (tests/integration/_ray.py). The driver is this test process (``ray.init`` on the
cluster's address) and runs ``submit`` through the CLI app, so ledger and traces are here while
containers are made by the nodes' engines. Fails (never skips) under CI=true without Ray,
root or Docker.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._ray import RayCluster, node_ids, ray_cluster, ray_module, second_engine

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

TOOLS = """
import time

from runner.sdk import Effect, tool


@tool("slow.wait", effect=Effect.PURE, description="Wait, then answer.")
def wait(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
"""


def _workflow(version: str) -> str:
    return (
        f'name: slow\nversion: "{version}"\ntools: [slow_tools]\nsteps:\n'
        '  - id: wait\n    tool: slow.wait\n    args: {seconds: "${task.sleep_s}"}\n'
    )


def _project(root: Path, tasks: int, sleep_s: float) -> Path:
    root.mkdir(parents=True)
    root.chmod(0o755)
    lines = "".join(
        json.dumps({"task_id": f"t{i}", "input": {"sleep_s": sleep_s}}) + "\n" for i in range(tasks)
    )
    files = {"slow_tools.py": TOOLS, "v1.yaml": _workflow("1"), "v2.yaml": _workflow("2")}
    for name, text in {**files, "tasks.jsonl": lines}.items():
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


@pytest.fixture(scope="module")
def cluster(sandbox_image: str) -> Iterator[RayCluster]:
    ray = ray_module()
    with second_engine(sandbox_image) as engine, ray_cluster(engine) as running:
        ray.init(address=running.address, include_dashboard=False, log_to_driver=False)
        try:
            yield running
        finally:
            ray.shutdown()


def _submit(work: Path, *args: str, backend: str = "ray") -> tuple[int, dict[str, Any]]:
    from typer.testing import CliRunner

    from runner.cli.app import app

    cwd = Path.cwd()
    os.chdir(work)
    old = os.environ.get("SANDBOX_REPLAY_STATE_DIR")
    os.environ["SANDBOX_REPLAY_STATE_DIR"] = str(work / "state")
    try:
        result = CliRunner().invoke(app, ["submit", *args, "--backend", backend, "--json"])
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("SANDBOX_REPLAY_STATE_DIR")
        else:
            os.environ["SANDBOX_REPLAY_STATE_DIR"] = old
    out = result.stdout.strip().splitlines()
    return result.exit_code, json.loads(out[-1]) if out and out[-1].startswith("{") else {}


def _traces(work: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = []
    for path in sorted((work / "state" / "traces").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        found.append((json.loads(lines[0]), json.loads(lines[-1])))
    return found


def _created_on(host: str) -> list[str]:
    """Names of the sandbox-replay containers the engine at ``host`` created (its events)."""
    out = subprocess.run(
        [
            "docker", "-H", host, "events", "--since", "0", "--until", "0s",
            "--filter", "type=container", "--filter", "event=create",
            "--format", "{{.Actor.Attributes.name}}",
        ],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [n for n in out.stdout.split() if n.startswith("sandbox-replay-")]


@pytest.mark.slow
def test_episodes_land_on_both_workers_and_the_ledger_adds_up(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from runner.ledger import Ledger

    work = _project(tmp_path / "p", tasks=4, sleep_s=1.5)
    code, report = _submit(
        work, "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl",
        "--concurrency", "4",
    )  # fmt: skip
    assert code == 0, report
    traces = _traces(work)
    assert len(traces) == 8
    nodes = node_ids(cluster)
    assert {run["backend"] for run, _ in traces} == {"ray"}
    assert {run["node"] for run, _ in traces} == set(nodes.values())  # both workers ran some
    assert {end["status"] for _, end in traces} == {"succeeded"}
    on_b = {run["run_id"] for run, _ in traces if run["node"] == nodes["b"]}
    assert cluster.engine is not None
    created_b = _created_on(cluster.engine.host)
    assert on_b and all(any(r in name for name in created_b) for r in on_b)  # B's own engine
    with Ledger(work / "state" / "ledger.sqlite3") as ledger:
        rows = ledger._db.read("SELECT status, sandbox_s FROM runs WHERE purpose = 'replay'")
    assert len(rows) == 8
    spent = sum(end["meter"]["sandbox_s"] for _, end in traces)
    assert sum(float(r["sandbox_s"]) for r in rows) == pytest.approx(spent, rel=0.05)


def test_a_runs_ceiling_stops_dispatch_on_every_node(cluster: RayCluster, tmp_path: Path) -> None:
    work = _project(tmp_path / "p", tasks=4, sleep_s=0.5)
    code, _ = _submit(
        work, "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl",
        "--concurrency", "4", "--ceiling-runs", "3",
    )  # fmt: skip
    assert code == 4
    assert len(_traces(work)) == 3  # three runs in all, not three per node


@pytest.fixture(scope="module")
def ray_subject(
    cluster: RayCluster, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The registry's ``ray`` backend on this cluster, as a conformance `Subject`."""
    from runner.backends.conformance import Subject
    from runner.backends.registry import BACKENDS
    from runner.episode.prepare import runner_mounts
    from runner.settings import Settings

    scratch = tmp_path_factory.mktemp("ray-conformance")
    settings = Settings(state_dir=scratch / "state", image=sandbox_image)
    backend = BACKENDS["ray"].make(settings)  # this process joined the cluster (``cluster``)

    def no_second_backend(session: str) -> Any:
        raise AssertionError("the sandbox checks connect no second backend")

    subject = Subject(
        "ray", backend, sandbox_image, no_second_backend, "", runner_mounts(), scratch
    )
    yield subject
    backend.close()


# Known gap, found by this check: a node unpacks the shipped runtime with every file's mtime at 0
# (deterministic blobs, runner/backends/ray/shipping.py), so the bytecode prepared on the driver
# (timestamp pycs) is stale there and every sandbox of a node compiles the runtime from source.
STALE_BYTECODE = pytest.mark.xfail(
    strict=True, reason="ray blobs carry mtime 0: the driver's timestamp pycs are stale on a node"
)


def _sandbox_checks() -> list[Any]:
    from runner.backends.conformance import SANDBOX_CHECKS, runtime_loads_from_the_mounted_bytecode

    return [
        pytest.param(
            c,
            id=c.__name__,
            marks=[STALE_BYTECODE] if c is runtime_loads_from_the_mounted_bytecode else [],
        )
        for c in SANDBOX_CHECKS
    ]


@pytest.mark.parametrize("check", _sandbox_checks())
def test_the_shipped_sandbox_checks_pass_on_a_node(ray_subject: Any, check: Any) -> None:
    """Each sandbox check of `runner.backends.conformance` through the driver and a node's
    engine (which node: Ray's choice); the lifecycle checks are the node's Docker backend's
    (the docker entry of the conformance suite)."""
    from runner.backends.conformance import NotApplicable

    try:
        check(ray_subject)
    except NotApplicable as exc:
        pytest.skip(str(exc))
