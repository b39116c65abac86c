"""The warm pool with real containers: same trace, never reused, drained, reaped, capped.

`runner.backends.warmpool.pool`: sandboxes started before their runs, the run spec sent in
``start``, one sandbox per run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from tests.integration._episodes import PURE_STEPS, PURE_TOOLS, Project

pytestmark = pytest.mark.docker

# the trace fields that differ between any two runs (ids, times, measured durations)
# ids, times, and the channel's byte counts (the hello line carries the runtime's pid and the
# ids their own lengths, so the count moves by a byte or two from run to run)
_VARIABLE = {
    "run_id",
    "started_at",
    "ended_at",
    "duration_s",
    "sandbox_s",
    "wall_s",
    "ts",
    "ran_s",
    "stdout_bytes",
    "stderr_bytes",
    "sandbox",  # the container's name: each run's own (asserted apart)
}


@pytest.fixture(scope="module")
def docker(docker_client: Any) -> Iterator[Any]:
    from runner.backends.docker import DockerBackend

    backend = DockerBackend.connect()
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("pool") / "proj", PURE_TOOLS, module="pure_tools")


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VARIABLE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _until(condition: Any, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.1)


def _session(docker: Any) -> list[dict[str, Any]]:
    return docker.containers(session_only=True)  # type: ignore[no-any-return]


def test_pooled_runs_give_the_unpooled_trace_and_no_container_serves_twice(
    project: Project, docker: Any, sandbox_image: str, tmp_path: Path
) -> None:
    from runner.backends.warmpool.pooled import PooledBackend

    state = tmp_path / "s"
    workflow = project.workflow(PURE_STEPS)
    plain = project.run(docker, sandbox_image, workflow, state_dir=state)
    assert plain.result.status == "succeeded", plain.end
    pooled = PooledBackend(docker, size=2, idle_cap_s=120)
    names: list[str] = []
    real_take = pooled.pool.take

    def take(spec: Any) -> Any:
        context = real_take(spec)

        class Recording:
            def __enter__(self) -> Any:
                box = context.__enter__()
                names.append(box.name)
                assert box.run_id == spec.run_id
                return box

            def __exit__(self, *exc: Any) -> Any:
                return context.__exit__(*exc)

        return Recording()

    pooled.pool.take = take  # type: ignore[method-assign]
    try:
        first = project.run(pooled, sandbox_image, workflow, state_dir=state)  # cold
        _until(lambda: pooled.pool.warm_count() == 2)
        outs = []
        for _ in range(3):
            _until(lambda: pooled.pool.warm_count() >= 1)
            outs.append(project.run(pooled, sandbox_image, workflow, state_dir=state))
        assert pooled.pool.stats()["assigned"] == 3
    finally:
        pooled.pool.close()
    for out in [first, *outs]:
        assert out.result.status == "succeeded", out.end
        assert [_stable(line) for line in out.lines] == [_stable(line) for line in plain.lines]
    assert len(names) == len(set(names)) == 4  # one container per run, never reused
    # each trace names the container that ran it (a pooled one's pool name): not only the log
    assert [out.lines[0]["sandbox"] for out in [first, *outs]] == names
    assert sum(n.startswith("sandbox-replay-pool-") for n in names) == 3
    left = {c["Names"][0].lstrip("/") for c in _session(docker)}
    assert left.isdisjoint(names)  # each removed after its run; the drain removed the rest
    assert not any(c["Labels"].get(L.POOL) for c in _session(docker))


def test_a_pooled_container_never_assigned_ends_itself_at_its_idle_cap(
    docker: Any, sandbox_image: str, tmp_path: Path, project: Project
) -> None:
    from runner.backends.warmpool.pool import pooled_spec

    spec = _runtime_spec(project, sandbox_image, tmp_path)
    context = docker.sandbox(pooled_spec(spec, "pool-idle-1", idle_cap_s=3))
    started = time.monotonic()
    with context as box:
        # hello, then nothing: no ``start`` ever comes; its own idle cap ends it (exit 137)
        state = box.wait(60)
    assert state.exit_code == 137 and not state.killed_by_host, state
    assert 2.5 <= time.monotonic() - started < 30


def _runtime_spec(project: Project, image: str, tmp_path: Path) -> Any:
    from runner.domain.ids import sequential_ids
    from runner.domain.tasks import Task
    from runner.domain.workflow import load_workflow
    from runner.episode.prepare import prepare_run
    from runner.episode.request import EpisodeRequest
    from runner.policy import load_policy
    from runner.settings import Settings
    from runner.tools.snapshot.sources import project_snapshot
    from runner.tools.source import registry_for_workflow

    wf = load_workflow(project.workflow(PURE_STEPS))
    policy = load_policy("shadow")
    request = EpisodeRequest(
        workflow=wf,
        task=Task(task_id="t1", input={}),
        policy=policy,
        registry=registry_for_workflow(wf).restrict(policy),
        image=image,
        snapshot=project_snapshot([wf], state_dir=tmp_path / "s"),
    )
    prepared = prepare_run(request, Settings(state_dir=tmp_path / "s"), sequential_ids("idle"))
    return prepared.spec


# serial: a reaper elsewhere meanwhile (every `run` starts with one) would take this dead
# owner's sandbox first: it has no ledger (pyproject.toml's markers)
@pytest.mark.serial
def test_the_reaper_removes_an_orphan_pooled_container(
    docker: Any, sandbox_image: str, tmp_path: Path, project: Project, docker_client: Any
) -> None:
    import subprocess

    from runner.backends.docker import DockerBackend
    from runner.backends.warmpool.pool import pooled_spec

    # an owner that is certainly dead: a process that has exited
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = L.Owner(host=L.host_id(), pid=gone.pid, start="dead-owner")
    orphaned = DockerBackend(docker.api, address=docker.address, owner=dead)
    spec = pooled_spec(_runtime_spec(project, sandbox_image, tmp_path), "pool-orphan-1", 120)
    context = orphaned.sandbox(spec)
    box = context.__enter__()
    try:
        assert box.output_open()
        found = orphaned.containers(session_only=True)
        assert [c["Labels"][L.POOL] for c in found] == ["1"]
        reaped = docker.reap()
        names = {r.name for r in reaped}
        assert box.name in names
        entry = next(r for r in reaped if r.name == box.name)
        assert entry.labels.get(L.POOL) == "1" and entry.run_id == "pool-orphan-1"
        assert L.LEDGER_KEY not in entry.labels  # nothing of a run to charge
        assert orphaned.containers(session_only=True) == []
    finally:
        box.close()
        if orphaned.containers(session_only=True):  # the test failed: leave nothing behind
            docker_client.api.remove_container(box.container_id, force=True)


@pytest.mark.parametrize("pool", ["1", "0"])
def test_submit_uses_the_pool_by_default_and_leaves_nothing_on_exit(
    tmp_path: Path, sandbox_image: str, docker_client: Any, pool: str
) -> None:
    import json
    import os
    import subprocess
    import sys

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "submit"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
        SANDBOX_REPLAY_LOG_LEVEL="info",
        SANDBOX_REPLAY_POOL=pool,
    )
    cli = [sys.executable, "-c", "from runner.cli import main; main()", "submit", "--json"]
    args = ["--variant", "a.yaml", "--variant", "b.yaml", "--tasks", "tasks.jsonl"]
    proc = subprocess.Popen(
        [*cli, *args, "--concurrency", "2"],
        cwd=fix,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    report = json.loads(stdout)
    assert report["runs_by_status"] == {"succeeded": 8}
    events = [json.loads(x) for x in stderr.splitlines() if x.startswith("{")]
    assigned = [e for e in events if e.get("event") == "pool_assigned"]
    drained = [e for e in events if e.get("event") == "pool_drained"]
    if pool == "1":
        assert assigned and len({e["container"] for e in assigned}) == len(assigned)
        assert len({e["run_id"] for e in assigned}) == len(assigned)  # one run per container
        assert len(drained) == 1  # drained on exit
    else:
        assert assigned == [] and drained == []
    # nothing of that process is left: its runs' containers and the pool's are all removed
    left = docker_client.api.containers(all=True, filters={"label": [f"{L.OWNER_PID}={proc.pid}"]})
    assert [c for c in left if c["Labels"].get(L.OWNER_HOST) == L.host_id()] == []
