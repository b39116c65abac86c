"""The warm pool's logic with a fake backend: keying, sizing, refill, drain, idle cap, no reuse."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from runner.backends.base import Mount, ResourceLimits, SandboxSpec
from runner.backends.warmpool.pool import (
    HANDOUT_MARGIN_S,
    WarmPool,
    pool_key,
    pool_size,
    pooled_spec,
)
from runner.backends.warmpool.pooled import PooledBackend
from runner.errors import InfrastructureError
from runner.runtime.pid1 import ENV_IDLE_CAP

SPEC = SandboxSpec(
    run_id="run-1",
    image="img:1",
    command=("python3", "-u", "-m", "runner.runtime"),
    mounts=(Mount(Path("/snap/0"), "/sandbox/tools/0"),),
    env={"TZ": "UTC"},
    labels={"io.sandbox-replay.task": "t1"},
    init=True,
)


class FakeBox:
    def __init__(self, spec: SandboxSpec) -> None:
        self.run_id = spec.run_id
        self.name = f"box-{spec.run_id}"
        self.spec = spec
        self.alive = True
        self.exited = 0

    def output_open(self) -> bool:
        return self.alive


class FakeEngine:
    """``open_sandbox`` of a fake backend: records every sandbox made and every removal."""

    def __init__(self, fail: bool = False) -> None:
        self.made: list[FakeBox] = []
        self.lock = threading.Lock()
        self.fail = fail

    @contextmanager
    def open(self, spec: SandboxSpec) -> Iterator[FakeBox]:
        if self.fail:
            raise InfrastructureError("engine down")
        box = FakeBox(spec)
        with self.lock:
            self.made.append(box)
        try:
            yield box
        finally:
            box.exited += 1

    def pooled(self) -> list[FakeBox]:
        with self.lock:
            return [b for b in self.made if b.spec.labels.get(L.POOL) == "1"]


def _until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.01)


def _run(pool: WarmPool, run_id: str) -> FakeBox:
    with pool.take(replace(SPEC, run_id=run_id)) as box:
        assert box.run_id == run_id  # the run's id is bound at assignment
        return box  # type: ignore[return-value]


def test_the_key_is_what_creation_fixes_and_not_the_run() -> None:
    other_run = replace(SPEC, run_id="run-2", labels={"io.sandbox-replay.task": "t2"})
    assert pool_key(other_run) == pool_key(SPEC)
    for changed in (
        replace(SPEC, image="img:2"),
        replace(SPEC, mounts=(Mount(Path("/snap/1"), "/sandbox/tools/0"),)),
        replace(SPEC, env={"TZ": "UTC", "X": "1"}),
        replace(SPEC, limits=ResourceLimits(memory_mb=256)),
        replace(SPEC, user="10002:10002"),
        replace(SPEC, limits=ResourceLimits(timeout_s=30)),  # the cap differs too
    ):
        assert pool_key(changed) != pool_key(SPEC)


def test_a_pooled_spec_carries_no_run_and_has_its_idle_cap() -> None:
    spec = pooled_spec(SPEC, "pool-7", idle_cap_s=120.5)
    assert spec.run_id == "pool-7" and spec.labels == {L.POOL: "1"}
    assert spec.env[ENV_IDLE_CAP] == "121" and spec.env["TZ"] == "UTC"
    assert spec.hard_cap == SPEC.hard_cap  # the run's cap, applied from ``start``
    assert pool_key(replace(spec, env=SPEC.env)) == pool_key(SPEC)
    assert L.container_name(spec.run_id, "s1") == "sandbox-replay-pool-7-s1"


def test_a_pooled_spec_keeps_the_ledger_of_its_template_and_no_run_label() -> None:
    """Another ledger's reaper leaves it to its own ``--resume`` (the reaper's rule)."""
    run = {
        L.LEDGER: "ledger-a",
        L.LEDGER_KEY: "run/replay/j/v/t/1/run",
        "io.sandbox-replay.task": "t1",
    }
    spec = pooled_spec(replace(SPEC, labels=run), "pool-8", idle_cap_s=60)
    assert spec.labels == {L.POOL: "1", L.LEDGER: "ledger-a"}


def test_size_is_the_concurrency_plus_one() -> None:
    assert pool_size(4) == 5 and pool_size(1) == 2 and pool_size(0) == 2


def test_the_first_run_starts_cold_then_the_pool_fills_to_its_size() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=3, idle_cap_s=60)
    try:
        first = _run(pool, "run-1")
        assert first.spec.run_id == "run-1" and first.spec.labels == SPEC.labels  # cold: own
        _until(lambda: pool.warm_count() == 3)
        time.sleep(0.1)
        assert len(engine.pooled()) == 3  # no more than the size
    finally:
        pool.close()


def test_runs_take_warm_sandboxes_the_pool_refills_and_none_is_used_twice() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=2, idle_cap_s=60)
    try:
        _run(pool, "run-0")
        _until(lambda: pool.warm_count() == 2)
        boxes = []
        for n in range(1, 7):
            _until(lambda: pool.warm_count() >= 1)
            boxes.append(_run(pool, f"run-{n}"))
        assert all(b.spec.labels == {L.POOL: "1"} for b in boxes)  # warm ones
        assert len({id(b) for b in boxes}) == 6  # never reused
        assert all(b.exited == 1 for b in boxes)  # each removed after its one run
        assert [b.run_id for b in boxes] == [f"run-{n}" for n in range(1, 7)]
        _until(lambda: pool.warm_count() == 2)  # refilled
        assert pool.stats()["assigned"] == 6
    finally:
        pool.close()


def test_a_run_id_gets_one_sandbox_only() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=1, idle_cap_s=60)
    try:
        _run(pool, "run-1")
        made = len(engine.made)
        with pytest.raises(InfrastructureError, match="already made for this run id"):
            _run(pool, "run-1")
        _until(lambda: pool.warm_count() == 1)
        assert len(engine.made) == made + 1  # only the refill, nothing for the retry
    finally:
        pool.close()


def test_close_removes_every_warm_sandbox_and_refuses_more_runs() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=3, idle_cap_s=60)
    _run(pool, "run-1")
    _until(lambda: pool.warm_count() == 3)
    pool.close()
    assert all(b.exited == 1 for b in engine.made)
    assert pool.warm_count() == 0
    with pytest.raises(InfrastructureError, match="closed"):
        _run(pool, "run-2")
    time.sleep(0.1)
    assert all(b.exited == 1 for b in engine.made)  # no filler made one after the drain


def test_a_run_interrupted_inside_its_sandbox_still_removes_it() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=1, idle_cap_s=60)
    try:
        _run(pool, "run-0")
        _until(lambda: pool.warm_count() == 1)
        with pytest.raises(KeyboardInterrupt), pool.take(replace(SPEC, run_id="run-1")) as box:
            raise KeyboardInterrupt
        assert box.exited == 1  # type: ignore[attr-defined]
    finally:
        pool.close()


def test_a_sandbox_near_its_idle_cap_or_dead_is_never_handed_out() -> None:
    engine = FakeEngine()
    now = [1000.0]
    pool = WarmPool(engine.open, size=1, idle_cap_s=60, monotonic=lambda: now[0])
    try:
        _run(pool, "run-0")
        _until(lambda: pool.warm_count() == 1)
        old = engine.pooled()[0]
        now[0] += 60 - HANDOUT_MARGIN_S + 1  # past the hand-out margin of its idle cap
        box = _run(pool, "run-1")
        assert box is not old and old.exited == 1  # removed, not handed out
        _until(lambda: pool.warm_count() == 1)
        dead = next(b for b in engine.pooled() if b is not old and b.exited == 0)
        dead.alive = False  # its output ended: it died waiting
        box = _run(pool, "run-2")
        assert box is not dead and dead.exited == 1
    finally:
        pool.close()


def test_idle_sandboxes_expire_even_without_runs() -> None:
    engine = FakeEngine()
    now = [1000.0]
    pool = WarmPool(engine.open, size=2, idle_cap_s=60, monotonic=lambda: now[0])
    try:
        _run(pool, "run-0")
        _until(lambda: pool.warm_count() == 2)
        first = engine.pooled()[:2]
        now[0] += 60
        _until(lambda: all(b.exited == 1 for b in first))  # the fillers' wait expires them
        _until(lambda: pool.warm_count() == 2)  # and fresh ones replace them
    finally:
        pool.close()


def test_a_failing_engine_stops_filling_and_runs_start_cold() -> None:
    engine = FakeEngine()
    pool = WarmPool(engine.open, size=1, idle_cap_s=60)
    try:
        _run(pool, "run-0")
        _until(lambda: pool.warm_count() == 1)
        _run(pool, "run-1")
        engine.fail = True
        with pytest.raises(InfrastructureError, match="engine down"):
            for n in range(2, 5):
                _run(pool, f"run-{n}")
    finally:
        pool.close()


class _Inner:
    name = "docker"
    session_id = "s1"
    api = object()

    def __init__(self) -> None:
        self.engine = FakeEngine()
        self.closed = False
        self.sandbox = self.engine.open

    def close(self) -> None:
        self.closed = True

    def reap(self, ledger: Any = None) -> list[Any]:
        return []

    def engine_cpus(self) -> float:
        return 2.0


def test_the_pooled_backend_pools_runtime_sandboxes_only_and_drains_on_close() -> None:
    inner = _Inner()
    backend = PooledBackend(inner, size=1, idle_cap_s=60)  # type: ignore[arg-type]
    with backend.sandbox(replace(SPEC, run_id="r0")):
        pass
    _until(lambda: backend.pool.warm_count() == 1)
    with backend.sandbox(replace(SPEC, run_id="r1", init=False)) as box:
        assert box.spec.run_id == "r1"  # type: ignore[attr-defined]  # not the runtime: own
    assert backend.api is inner.api and backend.engine_cpus() == 2.0
    backend.close()
    assert inner.closed and all(b.exited == 1 for b in inner.engine.made)


def test_only_the_docker_backend_pools_and_a_size_of_zero_is_no_pool() -> None:
    from runner.backends.docker.backend import DockerBackend
    from tests.support.fakes import SubprocessBackend

    other = SubprocessBackend(["true"])  # the interface's default: no pool, itself
    assert other.with_pool(size=5, idle_cap_s=60) is other and other.pool_size(8) == 0
    docker = DockerBackend(_Inner().api, address="unix:///nowhere.sock")
    assert docker.with_pool(size=0, idle_cap_s=60) is docker  # SANDBOX_REPLAY_POOL=0: size 0
    pooled = docker.with_pool(size=2, idle_cap_s=60)
    assert isinstance(pooled, PooledBackend) and pooled.inner is docker
    assert pooled.name == "docker" and docker.pool_size(4) == pool_size(4) > 0
    pooled.pool.close()


def test_settings_pool_defaults_on_and_env_zero_turns_it_off(monkeypatch: Any) -> None:
    from runner.settings import Settings

    assert Settings().pool is True
    monkeypatch.setenv("SANDBOX_REPLAY_POOL", "0")
    assert Settings().pool is False


def test_a_run_waits_for_a_sandbox_being_started_rather_than_start_one_cold() -> None:
    engine = FakeEngine()
    slow = engine.open

    @contextmanager
    def open_slowly(spec: SandboxSpec) -> Iterator[FakeBox]:
        if spec.labels.get(L.POOL):
            time.sleep(0.3)  # a container start
        with slow(spec) as box:
            yield box

    pool = WarmPool(open_slowly, size=1, idle_cap_s=60)
    try:
        _run(pool, "run-0")  # cold; the fill starts now
        time.sleep(0.1)  # the fill is under way (pending), not done
        assert pool.warm_count() == 0
        box = _run(pool, "run-1")
        assert box.spec.labels == {L.POOL: "1"}  # it waited for the pending one
        assert pool.stats()["cold"] == 1
    finally:
        pool.close()
