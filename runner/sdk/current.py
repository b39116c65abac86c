"""What is current in this process: the active recorder of `runner.sdk.record` and the run's clock.

Standard library only, Python 3.9+. Its own module so that the recorder (`runner.sdk.recorder`)
and the public surface (`runner.sdk`) share the state without importing each other: the package
imports the recorder when `record` is called, and the recorder imports only this module.
"""

import contextvars
import time
from typing import Any, Callable, Optional

__all__ = ["RECORDER", "now", "set_clock"]

RECORDER: "contextvars.ContextVar[Optional[Any]]" = contextvars.ContextVar(
    "sandbox_replay_recorder", default=None
)
"""The active recorder of `runner.sdk.record` (None: calls are not recorded by the SDK). The
in-sandbox runtime records calls itself and never sets it."""

_clock_source: Optional[Callable[[], float]] = None


def now() -> float:
    """Seconds since the epoch from the run's injected clock (SPEC.md: a stable time source).

    Inside a sandboxed or replayed run this is the recorded or fixed clock; elsewhere it is
    `time.time()`. Tool code should read time through this function.
    """
    source = _clock_source
    return source() if source is not None else time.time()


def set_clock(source: Optional[Callable[[], float]]) -> None:
    """Install (or with None remove) the run's clock. Used by the runtime and record mode."""
    global _clock_source
    _clock_source = source
