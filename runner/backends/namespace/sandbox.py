"""One started namespace sandbox: the bwrap process's stdio as the channel, kill, wait.

The byte channel is the bwrap process's own stdin, stdout and stderr (bwrap hands them to the
namespace's PID 1), or a zygote's child's pipes. They are driven from the episode's own thread
(`runner.backends.namespace.pipeio.PipeIO`: ``select``, no reader or writer threads; a bounded
buffer, so a sandbox that floods a busy host blocks on its own writes). Writes give up at their
``timeout_s``.

The kill is ``SIGKILL`` to the bwrap process (its PID 1 child dies with it:
``--die-with-parent``), or, for a zygote's sandbox, to its PID 1 through a pidfd (the whole
PID namespace goes with it), then to every process left in the sandbox's cgroup when it has
one. ``killed_by_host`` is set only when the kill found the sandbox still running.

A sandbox that ends by itself before it wrote a byte on stdout (the runtime's ``hello`` is its
first) never ran the runtime when bwrap (or the launcher in front of it) says why: its stderr
begins with ``bwrap:`` (bwrap's own errors: a mount it cannot make, a program it cannot
execute) or the launcher's step failed (`EXIT_LAUNCH_FAILED`). That is the backend's failure,
as a container that cannot start is Docker's: `NamespaceSandbox.wait` raises
`InfrastructureError` (exit 6, the episode ``infra_error``) with the first
`SETUP_STDERR_BYTES` of that stderr, every control or format character escaped. A zygote's
sandbox whose zygote ended first (its ``lost``, `runner.backends.namespace.zygote.ZygoteChild`)
has no exit status: `NamespaceSandbox.wait` raises `InfrastructureError` naming the zygote.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import IO, Protocol

from runner.backends.base import STDERR, STDOUT, ExitState, Sandbox
from runner.backends.namespace.launcher import EXIT_LAUNCH_FAILED
from runner.backends.namespace.pipeio import PipeIO
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["SETUP_STDERR_BYTES", "NamespaceSandbox", "SandboxProcess"]
_AFTER_KILL_WAIT_S = 30.0
SETUP_STDERR_BYTES = 1000  # of a set-up failure's stderr, kept for its message
_BWRAP_SAYS = b"bwrap:"  # how bwrap's own errors begin (its die())


class SandboxProcess(Protocol):
    """What a sandbox's process must offer: `subprocess.Popen`, or a zygote's child."""

    pid: int
    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code (`subprocess.TimeoutExpired` after ``timeout`` s)."""

    def send_signal(self, sig: int) -> None:
        """Signal it (nothing once it ended)."""


def _inert(data: bytes) -> str:
    r"""``data`` as one line of text: UTF-8, anything else and every unprintable as escapes."""
    text = data.decode("utf-8", "backslashreplace").strip()
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)[:SETUP_STDERR_BYTES]


class NamespaceSandbox(Sandbox):
    """A running bwrap sandbox (made by `runner.backends.namespace.NamespaceBackend`).

    Args:
        name: the sandbox's name (its record and cgroup folder are named so).
        run_id: the run attempt.
        process: the started launcher/bwrap process with piped stdio, or a zygote's child.
        oom_killed: reads whether the kernel OOM-killed a process of the sandbox.
        kill_rest: kills whatever is left of the sandbox after bwrap (its cgroup).
    """

    def __init__(
        self,
        name: str,
        run_id: str,
        process: SandboxProcess,
        *,
        oom_killed: Callable[[], bool] = lambda: False,
        kill_rest: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.run_id = run_id
        self.pid = process.pid
        self._process = process
        self._oom_killed = oom_killed
        self._kill_rest = kill_rest
        self.killed_by_host = False
        self.exit_state: ExitState | None = None
        self.idle_s = 0.0  # set by a warm pool: how long it waited for its run (not charged)
        self._started = time.monotonic()
        self._ended: float | None = None
        assert process.stdout is not None and process.stderr is not None
        self._output = PipeIO(process.stdin, process.stdout, process.stderr)
        self._spoke = False  # a byte arrived on stdout: the runtime ran
        self._stderr_head = b""
        self._setup_error: InfrastructureError | None = None

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Yield ``(stream, payload)``, ``None`` after ``poll_s`` s of silence; end at EOF."""
        for frame in self._output.frames(poll_s):
            if frame is not None:
                stream, payload = frame
                if stream == STDOUT and payload:
                    self._spoke = True
                elif stream == STDERR and len(self._stderr_head) < SETUP_STDERR_BYTES:
                    self._stderr_head += payload[: SETUP_STDERR_BYTES - len(self._stderr_head)]
            yield frame

    def drain(self) -> bytes:
        """Everything received and not yet consumed, stdout and stderr interleaved."""
        return self._output.drain()

    def wait_output(self, timeout_s: float) -> bool:
        """Wait for its first stdout bytes (or their end); False on timeout.

        A warm pool (`runner.backends.warmpool.pool`) counts a sandbox warm at its ``hello``.
        """
        return self._output.wait_output(timeout_s)

    def output_open(self) -> bool:
        """Whether it still runs with its stdout open (False: it ended).

        A warm pool asks this before it hands a spare out. Nobody reads a spare's stdout while
        it waits, so its end is seen from its process too: a zygote's children end with their
        zygote (`runner.backends.namespace.zygote`), and a spare forked from a killed zygote
        must not be handed to a run (it was, as an ``infra_error``, before this check).
        """
        return self._output.stdout_open and self._process.poll() is None

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Send ``data`` to the sandbox's stdin within ``timeout_s`` seconds (``None``: no limit).

        Raises:
            InfrastructureError: the channel is broken, or the sandbox did not take ``data`` in
                time (raised from a `TimeoutError`).
        """
        try:
            self._output.write(data, timeout_s)
        except (OSError, ValueError) as exc:  # TimeoutError included
            raise InfrastructureError(
                f"cannot write to the stdin of {self.name}: {exc}", run_id=self.run_id
            ) from exc

    def is_running(self) -> bool:
        """Whether the bwrap process still runs."""
        return self._process.poll() is None

    def kill(self) -> None:
        """SIGKILL the sandbox (bwrap, then its cgroup's rest); remembers that the host did it."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGKILL)
                self.killed_by_host = True
                log.debug("namespace_sandbox_killed", sandbox=self.name, run_id=self.run_id)
        self._kill_rest()

    def wait(self, timeout_s: float) -> ExitState:
        """Wait up to ``timeout_s`` s; on expiry kill, then wait for the end.

        Raises:
            InfrastructureError: the sandbox did not end within 30 s of its SIGKILL, or bwrap
                could not set it up (see the module docstring; its stderr in the message).
        """
        if self._setup_error is not None:
            raise self._setup_error
        if self.exit_state is not None:
            return self.exit_state
        try:
            code = self._process.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            self.kill()
            try:
                code = self._process.wait(timeout=_AFTER_KILL_WAIT_S)
            except subprocess.TimeoutExpired as exc:
                raise InfrastructureError(
                    f"{self.name} did not stop within 30 s of SIGKILL", run_id=self.run_id
                ) from exc
        state = self._record(code)
        self._setup_error = self._setup_failure(state)
        if self._setup_error is not None:
            raise self._setup_error
        return state

    def _setup_failure(self, state: ExitState) -> InfrastructureError | None:
        """The set-up failure of a sandbox that ended so (module docstring), else None."""
        lost = getattr(self._process, "lost", None)
        if lost:
            log.warning("namespace_sandbox_lost", sandbox=self.name, run_id=self.run_id)
            return InfrastructureError(
                f"{lost}: the sandbox {self.name} ended with it", run_id=self.run_id
            )
        if self._spoke or state.killed_by_host or state.exit_code == 0:
            return None
        said = self._stderr_head.lstrip()
        if not said.startswith(_BWRAP_SAYS) and state.exit_code != EXIT_LAUNCH_FAILED:
            return None
        log.warning("namespace_setup_failed", sandbox=self.name, run_id=self.run_id)
        return InfrastructureError(
            f"bwrap could not set up the sandbox {self.name} (exit {state.exit_code}): "
            + (_inert(said) or "no output"),
            run_id=self.run_id,
        )

    def _record(self, code: int) -> ExitState:
        if self._ended is None:
            self._ended = time.monotonic()
        self.exit_state = ExitState(
            exit_code=128 - code if code < 0 else code,
            oom_killed=self._oom_killed(),
            killed_by_host=self.killed_by_host,
            ran_s=round(max(0.0, self._ended - self._started - self.idle_s), 3),
        )
        log.debug(
            "namespace_sandbox_exited",
            sandbox=self.name,
            run_id=self.run_id,
            exit_code=self.exit_state.exit_code,
            oom_killed=self.exit_state.oom_killed,
            killed_by_host=self.killed_by_host,
        )
        return self.exit_state

    def close(self) -> None:
        """Close the pipes (after the process ended)."""
        for handle in (self._process.stdin, self._process.stdout, self._process.stderr):
            if handle is not None:
                with contextlib.suppress(OSError, ValueError):
                    handle.close()
