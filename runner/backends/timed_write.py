"""Writes to a sandbox's stdin that give up at a deadline (shared by every backend).

A sandbox that stops reading its stdin (a stopped runtime, a full pipe) would block a plain
``sendall``/``write`` for ever, and the host would never reach its own deadline check. A
`TimedWriter` runs each write on a short-lived helper thread and waits for it at most
``timeout_s`` seconds. This works for every stream a backend may hold (a Unix or TCP socket, a
TLS socket, a Windows named pipe, a subprocess pipe) without touching its blocking mode, which
matters because another thread keeps reading the same socket.

Invariants: writes never overlap or reorder (one at a time, under a lock); after a write timed
out the writer is unusable, every later write fails at once (the bytes of the late write may
still arrive, so the stream is no longer a sequence of whole messages the caller knows about).
The helper thread still blocked ends when the caller kills the sandbox or closes the stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class TimedWriter:
    """Blocking writes with a time limit.

    Args:
        send: writes all of its argument or raises (``socket.sendall``, a pipe write + flush).
        name: names the helper threads (for thread dumps).
    """

    def __init__(self, send: Callable[[bytes], object], name: str) -> None:
        self._send = send
        self._name = name
        self._lock = threading.Lock()
        self._timed_out = False

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Write all of ``data``, waiting at most ``timeout_s`` seconds (``None``: no limit).

        Raises:
            TimeoutError: not all written within ``timeout_s`` s, or an earlier write timed out.
            Exception: whatever ``send`` raised (e.g. `OSError` for a broken stream).
        """
        with self._lock:
            if self._timed_out:
                raise TimeoutError("an earlier write timed out; the stream is unusable")
            if timeout_s is None:
                self._send(data)
                return
            failure: list[BaseException] = []

            def run() -> None:
                try:
                    self._send(data)
                except BaseException as exc:  # handed to the caller below
                    failure.append(exc)

            thread = threading.Thread(target=run, name=f"write-{self._name}", daemon=True)
            thread.start()
            thread.join(max(0.0, timeout_s))
            if thread.is_alive():
                self._timed_out = True
                raise TimeoutError(
                    f"{len(data)} bytes not taken within {max(0.0, timeout_s):.1f} s "
                    "(the reader stopped reading)"
                )
            if failure:
                raise failure[0]
