"""The run's injected clock: one reading per call, published as the process's wall clock.

Standard library only, Python 3.9+. Call *i* reads ``start + (i + 1) * step_s`` in shadow; in
reproduce the recorded reading of call *i* (falling back to the previous reading plus
``step_s``); in record the machine's time when the call starts (never earlier than the
previous reading).
"""

from typing import Callable, Optional

from runner.runtime.replay.recordings import TraceStore
from runner.sdk import wallclock

__all__ = ["Clock"]


class Clock:
    """The run's injected clock (installed with `runner.sdk.set_clock`).

    Args:
        start: the reading before the first call, epoch seconds.
        step_s: seconds between two calls' readings (shadow), or the fallback step of a
            reproduce whose trace lacks a reading.
        trace: the trace's call records (reproduce: readings served from it).
        live: record mode: each call reads the machine's clock when it starts.
        publish: called with every new reading (the runtime freezes the process's wall clock
            there, `runner.sdk.wallclock.set_reading`).
    """

    def __init__(
        self,
        start: float,
        step_s: float,
        trace: Optional[TraceStore] = None,
        *,
        live: bool = False,
        publish: Callable[[float], None] = lambda _: None,
    ) -> None:
        self.value = float(start)
        self.step_s = float(step_s)
        self._trace = trace
        self._live = live
        self._publish = publish
        publish(self.value)

    def advance(self, index: int) -> float:
        """Move to the reading of call ``index`` and return it."""
        recorded = self._trace.clock_at(index) if self._trace is not None else None
        if recorded is not None:
            self.value = recorded
        elif self._live:
            self.value = max(self.value, round(wallclock.real_time(), 6))
        else:
            self.value = self.value + self.step_s
        self._publish(self.value)
        return self.value

    def __call__(self) -> float:
        """The current reading, epoch seconds."""
        return self.value
