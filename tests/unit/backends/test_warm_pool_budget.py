"""The warm pool makes no sandbox beyond the runs still to come (`WarmPool.expect`).

Before, a submission of N runs at pool size S made about N - 1 + S warm sandboxes and drained
S of them unused at the end (25 % more containers for 20 runs at concurrency 4): each one a
whole start's CPU for nothing.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from runner.backends.warmpool.pool import WarmPool
from runner.backends.warmpool.pooled import PooledBackend
from tests.unit.backends.test_warm_pool import SPEC, FakeEngine, _run, _until


def _settled(pool: WarmPool) -> None:
    """Wait until the fillers made what they will make (nothing pending, counts steady)."""
    last: Any = None
    for _ in range(20):
        time.sleep(0.05)
        now = (pool.stats(), pool.warm_count())
        if now == last:
            return
        last = now


def test_the_pool_never_holds_more_sandboxes_than_runs_to_come() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=5, idle_cap_s=60)
    try:
        pool.expect(3)
        for n in range(3):
            _run(pool, f"run-{n}")
            _settled(pool)
            assert pool.warm_count() <= 2 - n  # runs still to come after this one
        _settled(pool)
        stats = pool.stats()
        assert stats["warm"] == 0
        assert stats["created"] == stats["assigned"] == 2  # the first run started cold
        assert stats["cold"] == 1
    finally:
        pool.close()
    assert len(engine.pooled()) == 2  # none made only to be drained


def test_more_runs_than_expected_still_run_cold() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=2, idle_cap_s=60)
    try:
        pool.expect(1)
        _run(pool, "run-1")
        _settled(pool)
        assert pool.warm_count() == 0
        box = _run(pool, "run-2")  # a retry the caller did not count
        assert box.run_id == "run-2" and pool.stats()["cold"] == 2
    finally:
        pool.close()


def test_a_larger_expectation_refills_again() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=2, idle_cap_s=60)
    try:
        pool.expect(1)
        _run(pool, "run-1")
        _settled(pool)
        assert pool.warm_count() == 0
        pool.expect(5)
        _until(lambda: pool.warm_count() == 2)
    finally:
        pool.close()


def test_the_pooled_backend_passes_the_expectation_to_its_pool() -> None:
    engine = FakeEngine()

    class Inner:
        name = "docker"

        def sandbox(self, spec: Any) -> Any:
            return engine.open(spec)

        def close(self) -> None:
            pass

    backend = PooledBackend(Inner(), size=3, idle_cap_s=60)  # type: ignore[arg-type]
    try:
        backend.expect_runs(2)
        with backend.sandbox(replace(SPEC, run_id="run-a")):
            pass
        _settled(backend.pool)
        assert backend.pool.warm_count() == 1
    finally:
        backend.close()
