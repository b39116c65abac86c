"""One started Docker sandbox: its attached stdio, kill, wait and exit state.

The attach socket is opened *before* the container starts (nothing can be lost) and read by a
daemon thread that demultiplexes frames into a queue; `DockerSandbox.frames` polls that queue,
so a caller gets ``None`` every ``poll_s`` seconds and a container that exits at once ends the
iteration (the engine closes the stream). Nothing here depends on stdin EOF.

Invariants: ``killed_by_host`` is set only after a kill of ours succeeded; the exit state is
read from the engine (``State.ExitCode``, ``State.OOMKilled``) before the container is removed
by the backend. The queue holds at most about `QUEUE_MAX_BYTES` of payload: past that the
reader stops reading the socket until the caller consumes, so a sandbox that floods a host
busy elsewhere blocks on its own writes instead of growing the host's memory. A write gives up
at its ``timeout_s`` (`runner.backends.timed_write`), so a sandbox that stops reading its
stdin cannot hold the host past its deadline.
"""

from __future__ import annotations

import contextlib
import math
import queue
import re
import socket
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from runner.backends.base import ExitState, Sandbox
from runner.backends.docker.client import call, retrying, translate
from runner.backends.docker.frames import FrameDecoder, FrameError
from runner.backends.timed_write import writer_for
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

_EOF = object()
_RECV_BYTES = 64 * 1024
_AFTER_KILL_WAIT_S = 30.0
QUEUE_MAX_BYTES = 4 * 1024 * 1024  # payload bytes received and not yet consumed (plus a frame)


_NANOS = re.compile(r"(\.\d{6})\d+")


def engine_time(text: object) -> datetime | None:
    """An engine timestamp (RFC 3339 with nanoseconds, ``Z``) as a datetime; None if unset.

    The engine writes ``0001-01-01T00:00:00Z`` for a time that never happened.
    """
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    try:
        return datetime.fromisoformat(_NANOS.sub(r"\1", text).replace("Z", "+00:00"))
    except ValueError:
        return None


def ran_seconds(state: dict[str, Any]) -> float | None:
    """Seconds from ``State.StartedAt`` to ``State.FinishedAt``; None when either is unset."""
    started, finished = engine_time(state.get("StartedAt")), engine_time(state.get("FinishedAt"))
    if started is None or finished is None or finished < started:
        return None
    return (finished - started).total_seconds()


def _less(ran_s: float | None, idle_s: float) -> float | None:
    """``ran_s`` without the ``idle_s`` a pooled sandbox waited for its run (None stays)."""
    if ran_s is None or not idle_s:
        return ran_s
    return round(max(0.0, ran_s - idle_s), 3)


def _is_read_timeout(exc: BaseException) -> bool:
    """True when ``exc`` is the HTTP read timeout of a server-side wait (not a dead engine)."""
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return True
    stack: list[Any] = [exc]
    while stack:
        current = stack.pop()
        if isinstance(current, urllib3.exceptions.ReadTimeoutError | socket.timeout):
            return True
        if isinstance(current, BaseException):
            stack.extend(a for a in current.args if isinstance(a, BaseException))
    return False


class DockerSandbox(Sandbox):
    """A started container with stdin/stdout/stderr attached over one socket.

    Created by `runner.backends.docker.backend.DockerBackend.sandbox`; not for direct use.
    """

    def __init__(
        self, api: docker.APIClient, container_id: str, name: str, run_id: str, sock: Any
    ) -> None:
        self.run_id = run_id
        self.name = name
        self.container_id = container_id
        self._api = api
        self._sock = sock
        # docker-py hands back a SocketIO over the hijacked connection on unix sockets and
        # plain TCP; its ``_sock`` is the real socket. TLS and named pipes give the socket.
        self._raw = getattr(sock, "_sock", sock)
        if hasattr(self._raw, "settimeout"):
            self._raw.settimeout(None)  # the client's HTTP timeout must not end an idle read
        self._queue: queue.Queue[object] = queue.Queue()
        self._queued_bytes = 0
        self._room = threading.Condition()
        self._writer = writer_for(self._raw, self._raw.sendall, name)
        self._closing = False
        self._discarding = False  # set by kill(): a full queue drops frames, never blocks
        self._eof = False
        self._first_output = threading.Event()  # set at the first frame or the end of output
        self._reader = threading.Thread(target=self._read_loop, name=f"attach-{name}", daemon=True)
        self.killed_by_host = False
        self.exit_state: ExitState | None = None
        # seconds it waited in a warm pool before its run (`runner.backends.warmpool.pool`): not
        # part of the run's ``ran_s``
        self.idle_s = 0.0

    # -- output ------------------------------------------------------------------------------

    def start_reader(self) -> None:
        """Start the thread that reads the attach socket (before the container starts)."""
        self._reader.start()

    def _read_loop(self) -> None:
        decoder = FrameDecoder()
        try:
            while True:
                data = self._raw.recv(_RECV_BYTES)
                if not data:
                    break
                for frame in decoder.feed(data):
                    self._put(frame)
                    self._first_output.set()
        except (OSError, FrameError) as exc:
            if not self._closing:
                self._queue.put(exc)
        finally:
            self._queue.put(_EOF)
            self._first_output.set()

    def _put(self, frame: tuple[int, bytes]) -> None:
        """Queue ``frame``, first waiting while the queue is full (backpressure) unless closing.

        Once the host kills the sandbox, a full queue drops the frame instead: a reader blocked
        here would stop the engine from copying the container's output, and the engine then
        cannot finish the kill (measured: a flooding container's kill timed out after 60 s).
        """
        with self._room:
            while self._queued_bytes >= QUEUE_MAX_BYTES and not self._closing:
                if self._discarding:
                    return
                self._room.wait()
            self._queued_bytes += len(frame[1])
        self._queue.put(frame)

    def _take(self, block: bool, timeout_s: float | None = None) -> object:
        """Next item of the queue, making room for the reader when it is a frame.

        Raises:
            queue.Empty: nothing arrived (within ``timeout_s``).
        """
        item = self._queue.get(block, timeout_s)
        if isinstance(item, tuple):
            with self._room:
                self._queued_bytes -= len(item[1])
                self._room.notify()
        return item

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Yield ``(stream, payload)`` chunks, ``None`` after ``poll_s`` s of silence; end at EOF.

        Raises:
            InfrastructureError: the attach connection broke or carried malformed frames.
        """
        while not self._eof:
            try:
                item = self._take(True, poll_s)
            except queue.Empty:
                yield None
                continue
            if item is _EOF:
                self._eof = True
                return
            if isinstance(item, BaseException):
                self._eof = True
                raise InfrastructureError(
                    f"attach stream of {self.name} broke: {item}", run_id=self.run_id
                ) from item
            yield item  # type: ignore[misc]

    def wait_output(self, timeout_s: float) -> bool:
        """Wait until the container wrote something (or its output ended); False on timeout.

        The warm pool (`runner.backends.warmpool.pool`) counts a sandbox as warm once its runtime
        said ``hello``: started is not yet ready on a loaded machine.
        """
        return self._first_output.wait(timeout_s)

    def output_open(self) -> bool:
        """Whether the container's output is still open (False: it ended, e.g. it exited)."""
        return not self._eof and self._reader.is_alive()

    def drain(self) -> bytes:
        """Everything already received and not yet consumed, stdout and stderr interleaved."""
        chunks: list[bytes] = []
        while True:
            try:
                item = self._take(False)
            except queue.Empty:
                break
            if item is _EOF:
                self._queue.put(_EOF)
                break
            if isinstance(item, tuple):
                chunks.append(item[1])
        return b"".join(chunks)

    # -- input -------------------------------------------------------------------------------

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Send ``data`` to the sandbox's stdin within ``timeout_s`` seconds (``None``: no limit).

        Raises:
            InfrastructureError: the channel is broken (the sandbox may have exited), or the
                sandbox did not take ``data`` within ``timeout_s`` (later writes then fail too).
        """
        try:
            self._writer.write(data, timeout_s)
        except OSError as exc:  # TimeoutError included
            raise InfrastructureError(
                f"cannot write to the stdin of {self.name}: {exc}", run_id=self.run_id
            ) from exc

    # -- lifecycle ---------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL every process of the sandbox; remembers that the host did it.

        A container that already exited is left as it is (and not marked as killed by us).

        Raises:
            InfrastructureError: the engine failed.
        """
        with self._room:  # keep the attach stream flowing while the engine kills (`_put`)
            self._discarding = True
            self._room.notify_all()
        try:
            call(f"kill {self.name}", self._api.kill, self.container_id)
        except InfrastructureError as exc:
            if exc.fields.get("status") in (404, 409):  # gone or not running
                return
            raise
        self.killed_by_host = True
        log.debug("container_killed", container=self.name, run_id=self.run_id)

    def wait(self, timeout_s: float) -> ExitState:
        """Wait up to ``timeout_s`` s on the engine side; on expiry kill, then wait for the end.

        Returns:
            The exit state read from the engine (before removal).

        Raises:
            InfrastructureError: the engine failed while waiting.
        """
        if self.exit_state is not None:
            return self.exit_state
        if self._eof:
            # its output ended, so its PID 1 has exited: the engine says so at once as a rule
            # (15 of 15 measured), and one inspect replaces a wait and an inspect
            info = retrying(f"inspect {self.name}", self._api.inspect_container, self.container_id)
            if not (info.get("State") or {}).get("Running"):
                return self._record(info)
        try:
            # Sub-second deadlines are real: requests takes a float (the stub says int).
            self._api.wait(self.container_id, timeout=max(0.05, timeout_s))  # type: ignore[arg-type]
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            if not _is_read_timeout(exc):
                raise translate(exc, f"wait for {self.name}") from exc
            log.debug("container_timeout", container=self.name, timeout_s=timeout_s)
            self.kill()
            self._wait_after_kill()
        return self.read_exit_state()

    def _wait_after_kill(self) -> None:
        try:
            self._api.wait(self.container_id, timeout=int(_AFTER_KILL_WAIT_S))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            if not _is_read_timeout(exc):
                raise translate(exc, f"wait for {self.name} after kill") from exc
            raise InfrastructureError(
                f"{self.name} did not stop within {math.ceil(_AFTER_KILL_WAIT_S)} s of SIGKILL",
                run_id=self.run_id,
            ) from exc

    def read_exit_state(self) -> ExitState:
        """Inspect the container and record its `ExitState` (call before removal).

        Raises:
            InfrastructureError: the engine failed.
        """
        info = retrying(f"inspect {self.name}", self._api.inspect_container, self.container_id)
        return self._record(info)

    def _record(self, info: dict[str, Any]) -> ExitState:
        """Record the `ExitState` of an inspect of the exited container."""
        state = info.get("State") or {}
        self.exit_state = ExitState(
            exit_code=int(state.get("ExitCode") or 0),
            oom_killed=bool(state.get("OOMKilled")),
            killed_by_host=self.killed_by_host,
            error=str(state.get("Error") or ""),
            ran_s=_less(ran_seconds(state), self.idle_s),
        )
        log.debug(
            "container_exited",
            container=self.name,
            run_id=self.run_id,
            exit_code=self.exit_state.exit_code,
            oom_killed=self.exit_state.oom_killed,
            killed_by_host=self.killed_by_host,
        )
        return self.exit_state

    def is_running(self) -> bool:
        """Whether the engine reports the container as running."""
        info = retrying(f"inspect {self.name}", self._api.inspect_container, self.container_id)
        return bool((info.get("State") or {}).get("Running"))

    def close(self) -> None:
        """Close the attach connection (the reader thread then ends)."""
        with self._room:
            self._closing = True
            self._room.notify_all()
        for closer in (
            lambda: self._raw.shutdown(socket.SHUT_RDWR),
            self._raw.close,
            self._sock.close,
        ):
            with contextlib.suppress(OSError, AttributeError):
                closer()
        if self._reader.is_alive():
            self._reader.join(timeout=2.0)
