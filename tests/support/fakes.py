"""Test doubles. NOT a sandbox: `SubprocessBackend` runs a command as a local subprocess with
pipes, so the host side (channel, episode driver, classification) can be tested without Docker.
Tests only; never used by the product."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from runner.backends.base import STDERR, STDOUT, Backend, ExitState, Reaped, Sandbox, SandboxSpec
from runner.backends.timed_write import TimedWriter
from runner.errors import InfrastructureError

_EOF = object()


class SubprocessSandbox(Sandbox):
    def __init__(self, run_id: str, argv: Sequence[str], env: dict[str, str], cwd: str) -> None:
        self.run_id = run_id
        self.name = f"fake-{run_id}"  # as an engine names its sandbox (the trace's ``sandbox``)
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.killed_by_host = False
        self.written = bytearray()
        self._writer = TimedWriter(self._write_all, run_id)
        self._queue: queue.Queue[object] = queue.Queue()
        self._open = 2
        for stream, pipe in ((STDOUT, self.proc.stdout), (STDERR, self.proc.stderr)):
            threading.Thread(target=self._read, args=(stream, pipe), daemon=True).start()

    def _read(self, stream: int, pipe: object) -> None:
        fd = pipe.fileno()  # type: ignore[attr-defined]
        while True:
            try:
                data = os.read(fd, 32768)
            except OSError:
                data = b""
            if not data:
                self._queue.put(_EOF)
                return
            self._queue.put((stream, data))

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        self.written += data
        try:
            self._writer.write(data, timeout_s)
        except (ValueError, OSError) as exc:  # TimeoutError included
            raise InfrastructureError(f"stdin closed: {exc}", run_id=self.run_id) from exc

    def _write_all(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        while self._open:
            try:
                item = self._queue.get(timeout=poll_s)
            except queue.Empty:
                yield None
                continue
            if item is _EOF:
                self._open -= 1
                continue
            yield item  # type: ignore[misc]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed_by_host = True
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout_s: float) -> ExitState:
        try:
            self.proc.wait(timeout=max(timeout_s, 0.01))
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        code = self.proc.returncode
        return ExitState(
            exit_code=128 - code if code < 0 else code, killed_by_host=self.killed_by_host
        )


class SubprocessBackend(Backend):
    """Runs ``argv`` (not the spec's command) as a local process; records the specs it got.

    Args:
        argv: the program to run instead of the sandbox command.
        oom: report ``oom_killed`` in the exit state (simulates the engine's flag).
        fail_start: raise `InfrastructureError` instead of starting.
        fail_teardown: raise `InfrastructureError` after the sandbox ended (removal failed).
    """

    name = "subprocess-fake"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        oom: bool = False,
        fail_start: bool = False,
        fail_teardown: bool = False,
        cwd: Path | None = None,
    ) -> None:
        self.argv = list(argv)
        self.oom = oom
        self.fail_start = fail_start
        self.fail_teardown = fail_teardown
        self.cwd = str(cwd or Path.cwd())
        self.specs: list[SandboxSpec] = []
        self.sandboxes: list[SubprocessSandbox] = []

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        self.specs.append(spec)
        if self.fail_start:
            raise InfrastructureError("fake engine refused to start", run_id=spec.run_id)
        env = {
            "PATH": os.environ.get("PATH", ""),
            **spec.env,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        box = SubprocessSandbox(spec.run_id, self.argv, env, self.cwd)
        self.sandboxes.append(box)
        original_wait = box.wait

        def wait(timeout_s: float) -> ExitState:
            state = original_wait(timeout_s)
            if self.oom:
                return ExitState(
                    exit_code=137, oom_killed=True, killed_by_host=state.killed_by_host
                )
            return state

        box.wait = wait  # type: ignore[method-assign]
        try:
            yield box
        finally:
            box.kill()
            box.proc.wait()
        if self.fail_teardown:
            raise InfrastructureError("fake engine could not remove the sandbox")

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []


class StubBackend(Backend):
    """A backend that makes no sandbox: for tests whose runs are stubbed (``run_pair``, the
    episode) and that look at what the host asks of the backend.

    Args:
        memory_bytes: what `engine_memory_bytes` tells (None: unknown).
        pools: behave as an engine with a warm pool (`pool_size` of the Docker backend's rule).

    Attributes:
        expected: every `expect_runs` call's count.
        pooled: the sizes `with_pool` was asked for.
        closed: how often `close` was called.
    """

    name = "stub"

    def __init__(self, *, memory_bytes: int | None = None, pools: bool = False) -> None:
        self.memory_bytes = memory_bytes
        self.pools = pools
        self.expected: list[int] = []
        self.pooled: list[int] = []
        self.closed = 0

    def sandbox(self, spec: SandboxSpec) -> Any:
        raise AssertionError(f"no sandbox may be made here ({spec.run_id})")

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []

    def close(self) -> None:
        self.closed += 1

    def engine_memory_bytes(self) -> int | None:
        return self.memory_bytes

    def pool_size(self, concurrency: int) -> int:
        from runner.backends.warmpool.poolkey import pool_size

        return pool_size(concurrency) if self.pools else 0

    def with_pool(self, *, size: int, idle_cap_s: float, **kwargs: Any) -> Backend:
        self.pooled.append(size)
        return self

    def expect_runs(self, runs: int) -> None:
        self.expected.append(runs)


def trusted_packet(
    trace: Path, output: Path, workflow: Path | None = None, *, state_dir: Path
) -> list[str]:
    """`build_packet` of a trusted fixture, its tools described by a local process (no Docker).

    `runner.reproduce.packet.build_packet` describes the tools in a sandbox; for the
    project's own fixtures a local process (`UnsandboxedProcessBackend`) stands in for it.
    """
    from runner.backends.unsandboxed import UnsandboxedProcessBackend
    from runner.reproduce.packet import build_packet
    from runner.settings import Settings

    return build_packet(
        trace,
        output,
        workflow,
        settings=Settings(state_dir=state_dir),
        backend=UnsandboxedProcessBackend(),
    )


def without_description(monkeypatch: Any) -> None:
    """Skip the sandbox that describes the tool modules (``run``, ``submit``): for tests whose
    backend is a stub that cannot run one; the registry read from source is used instead."""
    monkeypatch.setattr("runner.admission.gate.sandbox_gate", lambda report, **kwargs: report)
