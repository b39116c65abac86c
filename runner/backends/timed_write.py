"""Writes to a sandbox's stdin that give up at a deadline (shared by every backend).

`SocketWriter` does the same for a plain socket without a thread: each send is non-blocking
(``MSG_DONTWAIT``, the socket's own blocking mode untouched) and waits for room with
``select`` (a helper thread per message was ~0.3 ms of host CPU and, on a loaded
machine, the new thread's first scheduling on the run's critical path). `writer_for` picks it
for a plain socket and `TimedWriter` for any other stream (TLS, named pipes).

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

import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any


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


def write_until(
    send: Callable[[memoryview], int],
    wait: Callable[[float | None], object],
    data: bytes,
    timeout_s: float | None,
) -> None:
    """Write all of ``data`` with a non-blocking ``send``, waiting with ``wait`` when full.

    Args:
        send: writes a prefix of its argument, returns how much; raises `BlockingIOError`
            when nothing fits now.
        wait: waits until there may be room again, at most its argument in seconds (None: no
            limit); it may do other work meanwhile (a pipe's writer reads the child's output).
        data: the bytes.
        timeout_s: the deadline in seconds (None: none).

    Raises:
        TimeoutError: not all taken within ``timeout_s`` (part may have been).
    """
    end = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
    view = memoryview(data)
    while view:
        try:
            view = view[send(view) :]
            continue
        except BlockingIOError:
            pass
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(
                f"{len(data)} bytes not taken within {max(0.0, timeout_s or 0):.1f} s "
                "(the reader stopped reading)"
            )
        wait(left)


class SocketWriter:
    """`TimedWriter`'s interface for a plain socket, in the caller's thread (module docstring).

    Args:
        sock: a connected ``socket.socket`` (not TLS) another thread may be reading.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._timed_out = False

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Write all of ``data``, waiting at most ``timeout_s`` seconds (``None``: no limit).

        Raises:
            TimeoutError: not all written within ``timeout_s`` s, or an earlier write timed out.
            OSError: the stream broke.
        """
        with self._lock:
            if self._timed_out:
                raise TimeoutError("an earlier write timed out; the stream is unusable")
            try:
                write_until(
                    lambda view: self._sock.send(view, socket.MSG_DONTWAIT),
                    lambda left: select.select([], [self._sock], [], left),
                    data,
                    timeout_s,
                )
            except TimeoutError:
                self._timed_out = True
                raise


def writer_for(stream: object, send: Callable[[bytes], object], name: str) -> Any:
    """A `SocketWriter` for a plain socket, else a `TimedWriter` over ``send``."""
    if type(stream) is socket.socket:  # not an SSLSocket (no MSG_DONTWAIT there), not a pipe
        return SocketWriter(stream)
    return TimedWriter(send, name)
