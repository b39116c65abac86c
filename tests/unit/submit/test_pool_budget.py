"""The warm pool's spare sandboxes count in the concurrency bound.

A pooled sandbox waiting for its run has the run's memory limit and pids limit already: the
admitted runs plus the pool's spares must fit the budget (`runner.backends.capacity`). The
runs come first (a spare only saves a start); the pool gets what the budget leaves, up to its
wanted size (`runner.backends.warmpool.pool.pool_size`), and the plan line says how many. The
engine's memory is injected (no Docker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.backends.capacity import (
    ENGINE_PIDS_PER_SANDBOX,
    HOST_THREADS_PER_SANDBOX,
    HostResources,
    bound_concurrency,
)
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit.options import SubmitOptions
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import TESTS

GIB = 1024**3
ROOMY = HostResources(pids_free=10**7, nproc_free=None, fds_free=10**6)
FIX = TESTS / "fixtures" / "submit"


def _pool(concurrency: int) -> int:
    return concurrency + 1  # as `pool_size`


@pytest.mark.parametrize("asked", [1, 2, 8, 20, 23, 24, 25, 500])
def test_the_runs_and_the_pools_spares_never_pass_the_memory_budget(asked: int) -> None:
    room = 24  # 0.75 x 16 GiB / 512 MiB: sandboxes the memory budget holds
    bound = bound_concurrency(
        asked, memory_mb=512, pids_limit=128, engine_memory_bytes=16 * GIB, host=ROOMY, pool=_pool
    )
    assert bound.admitted == min(asked, room)  # the runs come first
    assert bound.spares == min(_pool(bound.admitted), room - bound.admitted)
    assert bound.admitted + bound.spares <= room


def test_the_plan_line_says_the_pools_share_of_the_budget() -> None:
    bound = bound_concurrency(
        20, memory_mb=512, pids_limit=128, engine_memory_bytes=16 * GIB, host=ROOMY, pool=_pool
    )
    assert (bound.admitted, bound.spares) == (20, 4)
    line = bound.describe()
    assert line.startswith("20 at once (as asked: nothing here bounds it lower)")
    assert "warm pool: 4 spare sandboxes (of 21 wanted; bound by memory: 24 sandboxes)" in line
    assert bound.to_json()["pool_spares"] == 4
    roomy = bound_concurrency(
        4, memory_mb=512, pids_limit=128, engine_memory_bytes=16 * GIB, host=ROOMY, pool=_pool
    )
    assert "warm pool: 5 spare sandboxes" in roomy.describe() and "wanted" not in roomy.describe()
    none = bound_concurrency(
        4, memory_mb=512, pids_limit=128, engine_memory_bytes=16 * GIB, host=ROOMY
    )
    assert none.spares == 0 and "warm pool" not in none.describe()


def test_the_pools_spares_count_in_the_kernel_pids_too() -> None:
    per_sandbox = 128 + ENGINE_PIDS_PER_SANDBOX + HOST_THREADS_PER_SANDBOX
    host = HostResources(pids_free=per_sandbox * 10 * 4 // 3 + 1, nproc_free=None, fds_free=10**6)
    bound = bound_concurrency(
        6, memory_mb=96, pids_limit=128, engine_memory_bytes=None, host=host, pool=_pool
    )
    assert (bound.admitted, bound.spares) == (6, 4)  # 10 sandboxes' pids
    assert "bound by pids: 10 sandboxes" in bound.describe()


def _options(concurrency: int) -> SubmitOptions:
    return SubmitOptions(
        variants=(FIX / "a.yaml",),
        names=(None,),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,
        concurrency=concurrency,
    )


def _Docker() -> StubBackend:
    """The Docker engine as the plan asks it: its memory (injected) and its warm pool."""
    return StubBackend(memory_bytes=4 * GIB, pools=True)  # 0.75 x 4 GiB / 512 MiB = 6


class _Captured(Exception):
    pass


def test_submit_sizes_its_pool_by_the_spares_the_budget_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(HostResources, "read", classmethod(lambda cls: ROOMY))
    settings = Settings(state_dir=tmp_path / "state", memory_mb=512)
    plan = submit_module.prepare(_options(4), settings, job_id="job-1", engine=_Docker())
    assert plan.concurrency == 4 and plan.capacity is not None and plan.capacity.spares == 2
    line = next(x for x in plan.lines() if x.startswith("  concurrency:"))
    assert "warm pool: 2 spare sandboxes (of 5 wanted; bound by memory: 6 sandboxes)" in line
    docker = _Docker()

    def with_pool(**kwargs: Any) -> Any:
        docker.pooled.append(kwargs["size"])
        raise _Captured

    monkeypatch.setattr(docker, "with_pool", with_pool)
    without_description(monkeypatch)  # the stub backend runs no sandbox
    with pytest.raises(_Captured):
        submit_module.execute(
            plan, _options(4), settings, backend_factory=lambda: docker, handle_signals=False
        )
    assert docker.pooled == [2]
    off = settings.model_copy(update={"pool": False})
    plan = submit_module.prepare(_options(4), off, job_id="job-2", engine=_Docker())
    assert plan.capacity is not None and plan.capacity.spares == 0
    assert "warm pool" not in "\n".join(plan.lines())


def test_submits_printed_plan_weighs_the_engines_memory_and_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's plan asks the local engine before it prints (it said ``unknown: memory``)."""
    from typer.testing import CliRunner

    from runner.cli.app import app

    monkeypatch.setattr(HostResources, "read", classmethod(lambda cls: ROOMY))
    monkeypatch.setattr(
        "runner.backends.docker.DockerBackend.from_settings",
        classmethod(lambda cls, s, options=None: _Docker()),
    )
    args = ["submit", "--variant", str(FIX / "a.yaml"), "--tasks", str(FIX / "tasks.jsonl")]
    env = {"SANDBOX_REPLAY_STATE_DIR": str(tmp_path), "SANDBOX_REPLAY_MEMORY_MB": "512"}
    out = CliRunner().invoke(app, [*args, "--concurrency", "4", "--dry-run"], env=env)
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("  concurrency:"))
    assert "unknown: memory" not in line and "memory 6" in line, line
    assert "warm pool: 2 spare sandboxes (of 5 wanted; bound by memory: 6 sandboxes)" in line
