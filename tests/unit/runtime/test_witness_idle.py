"""The witness's thread sleeps until something happens (idle CPU of waiting sandboxes).

Its loop polled with a 200 ms timeout, so every sandbox waiting for its run (or its model)
woke five times a second for nothing (measured per thread: ~0.6 ms of CPU a second). Now
``poll`` has no timeout and `Witness.stop` wakes it through a pipe. No seccomp here: the
listener is a pipe that never becomes readable.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

import pytest

from runner.runtime.egress import witness as witness_module
from runner.runtime.egress.witness import Witness


class _NoResolver:
    sock = None

    def serve(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_witness_loop_waits_without_a_timeout_and_stop_still_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeouts: list[Any] = []
    real_poll = select.poll

    class Recording:
        def __init__(self) -> None:
            self.inner = real_poll()

        def register(self, fd: int, mask: int) -> None:
            self.inner.register(fd, mask)

        def poll(self, *args: Any) -> list[tuple[int, int]]:
            timeouts.append(args[0] if args else None)
            return self.inner.poll(*args)

    monkeypatch.setattr(witness_module.select, "poll", Recording)
    listener, writer = os.pipe()
    seen = Witness(listener, None, lambda _: None, resolver=_NoResolver()).start()  # type: ignore[arg-type]
    time.sleep(0.5)  # a 200 ms timeout would have polled three times by now
    assert timeouts == [None]
    started = time.monotonic()
    seen.stop(timeout_s=5)
    assert time.monotonic() - started < 2
    assert not seen._thread.is_alive()
    with pytest.raises(OSError):
        os.fstat(listener)  # the loop closed the listener
    os.close(writer)
