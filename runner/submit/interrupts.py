"""Ctrl-C and SIGTERM during ``submit``: stop the job, never lose its report or resume hint.

`handled_signals` installs one handler for the whole of a job (from the backend's creation
until ``report.json`` is written); `Interrupts` counts the signals and routes them to the
job's `runner.submit.scheduler.Scheduler`: the first stops dispatch and kills the running
sandboxes, any later one stops the wait for runs to wind down. A handled signal never raises.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.submit.scheduler import Scheduler

log = get_logger(__name__)

__all__ = ["Interrupts", "handled_signals"]


class Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM of a submission, counted and routed to its scheduler.

    The first signal stops the job (`Scheduler.interrupt`); any later one hurries it
    (`Scheduler.hurry`: no waiting for runs to wind down). No signal ever raises: the job
    always ends with its report and the resume hint. A signal that arrives before the scheduler
    exists is remembered and applied when it is attached.

    Attributes:
        count: signals received so far.
    """

    def __init__(self) -> None:
        self.count = 0
        self._scheduler: Scheduler | None = None

    def attach(self, scheduler: Scheduler) -> None:
        """Route signals to ``scheduler`` (and apply one that already came)."""
        self._scheduler = scheduler
        if self.count:
            scheduler.interrupt()
            if self.count > 1:
                scheduler.hurry()

    def __call__(self) -> None:
        """Take one signal."""
        self.count += 1
        if self._scheduler is None:
            return
        if self.count == 1:
            self._scheduler.interrupt()
        else:
            self._scheduler.hurry()


@contextmanager
def handled_signals(on_signal: Interrupts, *, enabled: bool = True) -> Iterator[None]:
    """Route SIGINT and SIGTERM to ``on_signal`` while the block runs.

    Only the main thread can install handlers; elsewhere, or when not ``enabled``, the block
    runs with the signals as they are.
    """
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        # Said once, in words; the log line is info (shown with --log-level info).
        if on_signal.count == 0:
            sys.stderr.write(f"\n{name}: stopping; running sandboxes are killed and removed\n")
        else:
            sys.stderr.write(f"\n{name} again: not waiting for runs; report and hint follow\n")
        log.info("submit_interrupted", signal=name, count=on_signal.count + 1)
        on_signal()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
