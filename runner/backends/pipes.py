"""A child process's stdout and stderr as the `Sandbox` output: one bounded queue of chunks.

For the backends whose sandbox is a local process with piped stdio (the namespace backend's
bwrap, the unsandboxed process). Two daemon threads read stdout and stderr into one queue of
at most `QUEUE_CHUNKS` chunks of `READ_BYTES`: past that they stop reading until the caller
consumes, so a process that floods a busy host blocks on its own writes. Each stream's end is
a ``None`` item; `PipedOutput.frames` ends when both have ended.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from typing import IO

from runner.backends.base import STDERR, STDOUT

__all__ = ["QUEUE_CHUNKS", "READ_BYTES", "PipedOutput"]

READ_BYTES = 64 * 1024
QUEUE_CHUNKS = 64  # about 4 MiB of output received and not yet consumed


class PipedOutput:
    """Readers of ``process``'s stdout and stderr, started at once.

    Args:
        process: a started process with ``stdout=PIPE`` and ``stderr=PIPE``.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._queue: queue.Queue[tuple[int, bytes] | None] = queue.Queue(QUEUE_CHUNKS)
        self._open = 2
        self._closing = False
        self._readers = [
            threading.Thread(target=self._pump, args=(stream, handle), daemon=True)
            for stream, handle in ((STDOUT, process.stdout), (STDERR, process.stderr))
        ]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream: int, handle: IO[bytes] | None) -> None:
        try:
            while handle is not None:
                chunk = os.read(handle.fileno(), READ_BYTES)
                if not chunk:
                    break
                self._put((stream, chunk))
        except (OSError, ValueError):  # the pipe was closed under the reader
            pass
        self._put(None)

    def _put(self, item: tuple[int, bytes] | None) -> None:
        while not self._closing:
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Yield ``(stream, payload)``, ``None`` after ``poll_s`` s of silence; end at EOF."""
        while self._open:
            try:
                item = self._queue.get(timeout=poll_s)
            except queue.Empty:
                yield None
                continue
            if item is None:
                self._open -= 1
                continue
            yield item

    def drain(self) -> bytes:
        """Everything received and not yet consumed, stdout and stderr interleaved."""
        chunks: list[bytes] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return b"".join(chunks)
            if item is None:
                self._open -= 1
            else:
                chunks.append(item[1])

    def stop(self, join_s: float = 2.0) -> None:
        """Stop the readers (a full queue no longer holds them); join them for ``join_s`` s.

        Close the process's pipes first so that a reader blocked in ``read`` returns.
        """
        self._closing = True
        for reader in self._readers:
            reader.join(timeout=join_s)
