"""A namespace sandbox's stdio, driven from the caller's thread: no reader or writer threads.

The sandbox is a local child whose stdin, stdout and stderr are pipes this process holds the
other ends of. `PipeIO.frames` waits on both output pipes with ``select`` and reads what is
there; `PipeIO.write` writes the input pipe (non-blocking) and, while the child is not
reading, keeps reading its output into a buffer, so that a child that writes before it reads
cannot deadlock with a host that writes before it reads (what the reader threads of
`runner.backends.pipes.PipedOutput` gave). Each message then costs one wake-up of the host's
thread instead of a reader thread's and a writer thread's (thread starts and
hand-offs were ~1-3 ms of latency per message on a loaded machine).

Bounds: at most `BUFFER_BYTES` of output is buffered while a write waits; past that the
output pipes are no longer read until the buffer is consumed (the child blocks on its own
writes, as with the bounded queue before). A write that is not taken within its ``timeout_s``
raises `TimeoutError`, and the input is unusable afterwards (a part of the message may have
been taken). One thread drives `frames` and `write` (the episode's); `wait_output` is the warm
pool's, before the sandbox is handed to a run.
"""

from __future__ import annotations

import collections
import os
import select
import threading
import time
from collections.abc import Iterator
from typing import IO

from runner.backends.base import STDERR, STDOUT
from runner.backends.timed_write import write_until

__all__ = ["BUFFER_BYTES", "READ_BYTES", "PipeIO"]

READ_BYTES = 64 * 1024
BUFFER_BYTES = 4 * 1024 * 1024
_WRITE_CHUNK = 64 * 1024


class PipeIO:
    """The host's ends of a child's stdin, stdout and stderr.

    Args:
        stdin: the write end of the child's stdin pipe (made non-blocking here).
        stdout: the read end of its stdout pipe.
        stderr: the read end of its stderr pipe.
    """

    def __init__(self, stdin: IO[bytes] | None, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self._in = stdin.fileno() if stdin is not None else None
        self._streams = {stdout.fileno(): STDOUT, stderr.fileno(): STDERR}
        self._open = set(self._streams)
        for fd in (*self._streams, *([] if self._in is None else [self._in])):
            os.set_blocking(fd, False)
        self._buffer: collections.deque[tuple[int, bytes]] = collections.deque()
        self._buffered = 0
        self._broken = False
        self.first_output = threading.Event()  # its first stdout bytes, or stdout's end
        self._lock = threading.Lock()  # `wait_output` (a pool's thread) against the driver

    @property
    def stdout_open(self) -> bool:
        """Whether its stdout has not ended."""
        return any(self._streams[fd] == STDOUT for fd in self._open)

    def _read(self, fd: int) -> None:
        """Read what ``fd`` holds into the buffer (its end: the stream closes)."""
        try:
            chunk = os.read(fd, READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        stream = self._streams[fd]
        if not chunk:
            self._open.discard(fd)
            if stream == STDOUT:
                self.first_output.set()
            return
        self._buffer.append((stream, chunk))
        self._buffered += len(chunk)
        if stream == STDOUT:
            self.first_output.set()

    def _readable(self) -> list[int]:
        return list(self._open) if self._buffered < BUFFER_BYTES else []

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Yield ``(stream, payload)``, ``None`` after ``poll_s`` s of silence; end at EOF."""
        while True:
            with self._lock:
                if self._buffer:
                    stream, chunk = self._buffer.popleft()
                    self._buffered -= len(chunk)
                    item: tuple[int, bytes] | None = (stream, chunk)
                elif not self._open:
                    return
                else:
                    item = None
            if item is not None:
                yield item
                continue
            ready, _, _ = select.select(list(self._open), [], [], poll_s)
            if not ready:
                yield None
                continue
            with self._lock:
                for fd in ready:
                    self._read(fd)

    def drain(self) -> bytes:
        """Everything buffered or readable now, stdout and stderr interleaved (not waiting)."""
        with self._lock:
            for fd in list(self._open):
                self._read(fd)
            data = b"".join(chunk for _, chunk in self._buffer)
            self._buffer.clear()
            self._buffered = 0
        return data

    def wait_output(self, timeout_s: float) -> bool:
        """Wait until its first stdout bytes arrived (or stdout ended); False on timeout."""
        end = time.monotonic() + timeout_s
        while not self.first_output.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            with self._lock:
                stdout = [fd for fd in self._open if self._streams[fd] == STDOUT]
                if not stdout:
                    return True
                ready, _, _ = select.select(stdout, [], [], min(left, 0.5))
                for fd in ready:
                    self._read(fd)
        return True

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Write all of ``data`` within ``timeout_s`` s (``None``: no limit).

        Raises:
            TimeoutError: not all taken in time, or an earlier write timed out.
            BrokenPipeError: the child closed its stdin (it ended).
        """
        if self._broken:
            raise TimeoutError("an earlier write timed out; the input is unusable")
        if self._in is None:
            raise BrokenPipeError("the sandbox has no stdin pipe")
        stdin = self._in

        def wait(left: float | None) -> None:  # reading meanwhile: the child may be writing
            readable, _, _ = select.select(self._readable(), [stdin], [], left)
            if readable:
                with self._lock:
                    for fd in readable:
                        self._read(fd)

        try:
            write_until(lambda view: os.write(stdin, view[:_WRITE_CHUNK]), wait, data, timeout_s)
        except TimeoutError:
            self._broken = True
            raise
