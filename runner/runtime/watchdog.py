"""The runtime's own deadline: end the run when its time is up, host or no host.

Standard library only, Python 3.9+. The host kills a sandbox at the run's deadline
(``limits.timeout_s`` after start); when the host cannot (it died, or it is stalled), the
runtime ends the run itself: `arm` starts a daemon thread that, `GRACE_S` seconds after the
deadline (so a live host's kill always comes first), writes one line to stderr and exits the
process with `EXIT_DEADLINE` (124, the episode exit code of a timeout; the host classifies an
exit at or past the deadline that it did not cause as ``timeout``).

This is one of three layers (backends/base.py ``LifetimeCap``): end-of-file on stdin ends the
runtime when the host's end of the channel closes (runtime/channel.py); this watchdog applies the
run's deadline once the run spec is read; the sandbox's hard lifetime cap, fixed at creation and
enforced outside this process, ends everything else. The watchdog is a thread of the process
that runs tool code: a tool that holds the GIL (a C call that never returns) or that exits the
thread defeats it; the cap does not depend on it.
"""

import os
import sys
import threading
import time
from typing import Callable, Optional

EXIT_DEADLINE = 124
GRACE_S = 3.0


def arm(
    deadline_s: float,
    started: float,
    *,
    grace_s: float = GRACE_S,
    monotonic: Callable[[], float] = time.monotonic,
    exit: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """Start the watchdog: exit `EXIT_DEADLINE` at ``started + deadline_s + grace_s``.

    Args:
        deadline_s: the run's timeout, seconds after ``started``.
        started: when the run began, on ``monotonic``'s clock (the runtime's start).
        grace_s: how long past the deadline the host has to kill first.
        monotonic: the clock.
        exit: how to end the process (tests pass something else).

    Returns:
        The started daemon thread.
    """
    end = started + deadline_s + grace_s

    def watch() -> None:
        while True:
            left = end - monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 1.0))
        _say(
            "sandbox-replay runtime: the run passed its {:g} s deadline; ending it".format(
                deadline_s
            )
        )
        exit(EXIT_DEADLINE)

    thread = threading.Thread(target=watch, name="sandbox-replay-watchdog", daemon=True)
    thread.start()
    return thread


def deadline_of(value: object) -> Optional[float]:
    """``run.json``'s ``deadline_s`` as seconds, or None when absent (no watchdog).

    Raises:
        ValueError: present but not a positive finite number.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected seconds (a number)")
    seconds = float(value)
    if not (0 < seconds < float("inf")):
        raise ValueError("expected a positive finite number of seconds")
    return seconds


def _say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
