"""Many sandboxes may run at once, but only a few are being started by the engine at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from runner.backends.base import Backend, Reaped, Sandbox, SandboxSpec
from runner.backends.capacity import starts_at_once
from runner.submit.scheduler import TrackingBackend


class SlowStarts(Backend):
    """Entering a sandbox (the engine's start) takes until the test lets it; counts overlaps."""

    name = "slow-starts"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starting = 0
        self.most_starting = 0
        self.running = 0
        self.most_running = 0
        self.go = threading.Semaphore(0)

    @contextmanager
    def _sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        with self.lock:
            self.starting += 1
            self.most_starting = max(self.most_starting, self.starting)
        self.go.acquire(timeout=30)
        with self.lock:
            self.starting -= 1
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        box: Any = type("Box", (), {"run_id": spec.run_id, "kill": lambda self: None})()
        yield box

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        return self._sandbox(spec)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []


def test_starts_are_gated_while_started_sandboxes_are_not() -> None:
    inner = SlowStarts()
    backend = TrackingBackend(inner, starts=2)
    all_running = threading.Barrier(9)

    def run(n: int) -> None:
        with backend.sandbox(SandboxSpec(run_id=f"run-{n:04d}", image="i", command=("x",))):
            all_running.wait(timeout=30)  # every run holds its sandbox until all 8 run

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for _ in range(8):
        inner.go.release()
    all_running.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    assert inner.most_starting <= 2  # never more than two starts in the engine at once
    assert inner.most_running == 8  # yet all eight ran at once


def test_starts_at_once_is_two_per_engine_cpu() -> None:
    assert starts_at_once(2.0) == 4 and starts_at_once(0.5) == 2 and starts_at_once(None) == 4
