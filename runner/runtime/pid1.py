"""The runtime as the sandbox's init (PID 1): not dumpable, the hard lifetime cap, orphans reaped.

Standard library only, Python 3.9+. The Docker backend starts the runtime as the container's
PID 1 (``SandboxSpec.init``: no ``timeout`` wrapper, no docker init), so the process that holds
the channel (the container's stdio, ``/proc/1/fd/0`` and ``1``) is the runtime itself, and the
kernel's rules for a PID namespace's init protect it from every other process of the sandbox,
which all run as the same uid without capabilities:

- Signals: a signal sent from inside the namespace to its init is dropped unless init has a
  handler for it (``kernel/signal.c`` ``sig_task_ignored``: ``SIGNAL_UNKILLABLE`` and
  ``SIG_DFL``); ``SIGKILL`` and ``SIGSTOP`` are never delivered from inside. The runtime
  installs no handler and removes Python's own for ``SIGINT`` (`drop_signal_handlers`), so no
  tool can kill, stop or interrupt it. The engine's ``SIGKILL`` (sent from
  the parent namespace) still ends it, and with it the whole namespace.
- Not dumpable (`make_undumpable`, ``prctl(PR_SET_DUMPABLE, 0)`` through ctypes, the very
  first thing ``__main__`` does): the entries of ``/proc/1`` become owned by root
  (``fs/proc/base.c`` ``task_dump_owner``; the directory itself keeps the uid), so
  ``/proc/1/fd``, ``environ``, ``mem`` and ``maps`` cannot be opened by the sandbox's uid;
  ``ptrace`` needs ``PTRACE_MODE_ATTACH``, which a non-dumpable target refuses to a caller
  without ``CAP_SYS_PTRACE`` (``kernel/ptrace.c`` ``__ptrace_may_access``).
  Children the runtime starts reset the flag at ``execve``; a fork that does not exec keeps it
  (the worker, a fork of the runtime, sets it back to 1 itself: `runner.runtime.worker.fork`).
- The hard cap (`arm_cap`): ``SANDBOX_REPLAY_HARD_CAP_S`` (set by the backend) seconds after
  start a daemon thread kills every other process of the namespace (``kill(-1, SIGKILL)``) and
  exits `EXIT_CAP` (137, what ``timeout -s KILL`` reported before); an init's exit makes the
  kernel kill whatever is left. No tool code runs in this process (it runs in the worker,
  `runner.runtime.worker`), so nothing can hold the GIL against the cap's thread; ptrace and
  signals cannot freeze it (above). This replaces the execute-only ``timeout`` PID 1 of
  images/Dockerfile, which protected the cap but left the runtime an ordinary, killable,
  stoppable child (the channel's holder is what must be init).
- Orphans (`Reaper`): processes whose parent exited are re-parented to init; the reaper waits
  for every child of this process (``waitpid(-1)``) and keeps the exit status of the ones it was
  asked to watch (the worker), so zombies never fill the pids limit.

Where the runtime is not PID 1 (tests, ``record`` with the unsandboxed backend) these still
apply to the process itself, except the signal rule.
"""

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional

from runner.wire.env import ENV_HARD_CAP, ENV_IDLE_CAP  # a pooled sandbox's cap: IDLE_CAP

EXIT_CAP = 137
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
REAP_INTERVAL_S = 0.1

__all__ = [
    "ENV_HARD_CAP",
    "ENV_IDLE_CAP",
    "EXIT_CAP",
    "LifetimeTimer",
    "Reaper",
    "arm_cap",
    "cap_of",
    "drop_signal_handlers",
    "make_undumpable",
    "set_dumpable",
]


def drop_signal_handlers() -> None:
    """Restore the default action of ``SIGINT``, the one signal Python handles by itself.

    Python installs a handler for ``SIGINT`` (``KeyboardInterrupt``); with it a process of the
    sandbox could interrupt PID 1. With ``SIG_DFL`` the kernel drops it, like every other
    signal sent to a namespace's init from inside (``SIGPIPE`` and ``SIGXFSZ`` Python sets to
    ``SIG_IGN``: ignored either way).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def make_undumpable() -> Optional[str]:
    """Make this process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``).

    Returns:
        None when done and confirmed (``PR_GET_DUMPABLE`` reads 0); otherwise why not (no
        ctypes, not Linux, the call failed), for a ``coverage`` note.
    """
    return set_dumpable(False)


def set_dumpable(on: bool) -> Optional[str]:
    """Set this process's dumpable flag (``prctl(PR_SET_DUMPABLE, 1 or 0)``) and confirm it.

    ``1`` is what an ``execve`` of an ordinary binary sets; the forked worker restores it
    (`runner.runtime.worker.fork`). Any process may set its own flag to 0 or 1
    (``man 2 prctl``).

    Returns:
        None when done and ``PR_GET_DUMPABLE`` reads the value set; otherwise why not.
    """
    value = 1 if on else 0
    try:
        import ctypes  # not at module import: this module is imported on every start

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
            return "prctl(PR_SET_DUMPABLE, {}) failed: errno {}".format(value, ctypes.get_errno())
        if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != value:
            return "prctl(PR_GET_DUMPABLE) does not read {}".format(value)
    except Exception as exc:  # no ctypes (a minimal Python), no prctl (not Linux)
        return "cannot call prctl: {!r}".format(exc)[:300]
    return None


def cap_of(
    environ: "os._Environ[str] | Dict[str, str]", name: str = ENV_HARD_CAP
) -> Optional[float]:
    """A cap in seconds from ``environ`` (``name``: `ENV_HARD_CAP` or `ENV_IDLE_CAP`), or None.

    Raises:
        ValueError: set but not a positive finite number.
    """
    value = environ.get(name)
    if value is None or value == "":
        return None
    seconds = float(value)
    if not (0 < seconds < float("inf")):
        raise ValueError("{} must be a positive number of seconds".format(name))
    return seconds


class LifetimeTimer:
    """The sandbox's lifetime cap as a running timer whose end can be moved (`rearm`).

    Its thread wakes at least every second; at the end it writes a line to stderr, kills every
    other process of the namespace (as PID 1) and exits `EXIT_CAP`. Made by `arm_cap`.

    Attributes:
        thread: the daemon thread (joinable in tests).
        seconds: the cap last armed, seconds.
    """

    def __init__(
        self,
        seconds: float,
        monotonic: Callable[[], float],
        kill: Callable[[int, int], None],
        exit: Callable[[int], object],
    ) -> None:
        self._monotonic, self._kill, self._exit = monotonic, kill, exit
        self._lock = threading.Lock()
        self.seconds = seconds
        self._end = monotonic() + seconds
        self.thread = threading.Thread(target=self._watch, name="sandbox-replay-cap", daemon=True)

    def rearm(self, seconds: float) -> None:
        """End the sandbox ``seconds`` from now instead (the run's cap, from its assignment)."""
        with self._lock:
            self.seconds = seconds
            self._end = self._monotonic() + seconds

    def _left(self) -> float:
        with self._lock:
            return self._end - self._monotonic()

    def _watch(self) -> None:
        while True:
            left = self._left()
            if left <= 0:
                break
            time.sleep(min(left, 1.0))
        try:
            sys.stderr.write(
                "sandbox-replay runtime: lifetime cap of {:g} s\n".format(self.seconds)
            )
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if os.getpid() == 1:
            with contextlib.suppress(OSError):
                self._kill(-1, signal.SIGKILL)  # every process of the namespace but this one
        self._exit(EXIT_CAP)


def arm_cap(
    seconds: float,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    kill: Callable[[int, int], None] = os.kill,
    exit: Callable[[int], object] = os._exit,
) -> LifetimeTimer:
    """Start the hard cap: at ``seconds`` from now kill every other process, exit `EXIT_CAP`.

    A pooled sandbox is armed with its idle cap (`ENV_IDLE_CAP`) at start, and the
    runtime rearms it with the run's cap (`ENV_HARD_CAP`) when ``start`` assigns the run: a
    sandbox never assigned ends by itself at its idle cap; an assigned one lives at most the
    run's cap from its assignment.

    Args:
        seconds: the sandbox's lifetime cap.
        monotonic: the clock.
        kill: ``os.kill`` (tests pass something else).
        exit: how to end the process.

    Returns:
        The started timer (``.thread`` is its daemon thread).
    """
    timer = LifetimeTimer(seconds, monotonic, kill, exit)
    timer.thread.start()
    return timer


class Reaper:
    """Waits for every child of this process; remembers the statuses of watched pids.

    As PID 1 every orphan of the sandbox becomes a child of this process; `start` runs a daemon
    thread that reaps them. Blocking (the default as PID 1), it sleeps in ``waitpid(-1, 0)``
    until a child exits, and polls every `REAP_INTERVAL_S` only while there is no child at all;
    otherwise it polls (``WNOHANG``) every `REAP_INTERVAL_S`, and `stop` ends it (tests: a
    blocked ``waitpid`` could not be stopped, and would take other children's statuses). A
    sandbox waiting for its run made ten polls a second (~2.7 ms of CPU per second).
    A watched pid's exit (the worker's) is kept for `wait`. Nothing else in this process may
    wait for its own children (a ``Popen.wait`` would race the reaper): the runtime starts no
    process other than the worker.

    Args:
        blocking: block in ``waitpid`` (None: when this process is PID 1).
    """

    def __init__(self, blocking: Optional[bool] = None) -> None:
        self.blocking = os.getpid() == 1 if blocking is None else blocking
        self._lock = threading.Condition()
        self._watched: Dict[int, Optional[int]] = {}
        self._processes: Dict[int, Any] = {}  # pid -> Popen, where waitpid(-1) is missing
        self._stopped = threading.Event()
        self.reaped = 0  # orphans reaped (not watched)

    def watch(self, pid: int, process: Optional[Any] = None) -> None:
        """Keep ``pid``'s exit status for `wait` (call before it can exit: right after spawn).

        ``process`` is its ``subprocess.Popen`` when it has one: where ``waitpid(-1)`` does not
        exist (Windows: ``record`` runs the runtime locally there), the reaper polls it.
        """
        with self._lock:
            self._watched.setdefault(pid, None)
            if process is not None:
                self._processes[pid] = process

    def reap_once(self) -> int:
        """Reap every child that has exited; return how many."""
        count = 0
        if not hasattr(os, "WNOHANG"):  # no waitpid(-1): the watched processes, by their Popen
            for pid, process in list(self._processes.items()):
                code = process.poll()
                if code is not None:
                    del self._processes[pid]
                    with self._lock:
                        self._watched[pid] = code
                        self._lock.notify_all()
                    count += 1
            return count
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return count
            if pid == 0:
                return count
            count += 1
            self._record(pid, status)

    def _record(self, pid: int, status: int) -> None:
        with self._lock:
            if pid in self._watched:
                self._watched[pid] = os.waitstatus_to_exitcode(status)
                self._lock.notify_all()
            else:
                self.reaped += 1

    def _reap_blocking(self) -> bool:
        """Wait for the next child to exit and record it; False when there is no child."""
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return False
        self._record(pid, status)
        return True

    def start(self) -> threading.Thread:
        """Reap in a daemon thread from now on."""

        def loop() -> None:
            while not self._stopped.is_set():
                try:
                    if self.blocking and self._reap_blocking():
                        continue
                    self.reap_once()
                except Exception as exc:  # never die: zombies would pile up
                    sys.stderr.write("sandbox-replay runtime: reaper: {!r}\n".format(exc))
                self._stopped.wait(REAP_INTERVAL_S)

        thread = threading.Thread(target=loop, name="sandbox-replay-reaper", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop reaping (tests: the reaper would take other children's statuses).

        A blocking reaper stops after the next child's exit (not for tests, see the class).
        """
        self._stopped.set()

    def wait(self, pid: int, timeout_s: Optional[float] = None) -> Optional[int]:
        """The exit code of watched ``pid`` (negative: killed by that signal), or None.

        None when it has not exited within ``timeout_s`` (None: wait for ever).
        """
        end = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while self._watched.get(pid) is None:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._lock.wait(REAP_INTERVAL_S if left is None else min(left, REAP_INTERVAL_S))
            return self._watched[pid]
