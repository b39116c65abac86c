"""The runtime's end of the NDJSON channel, kept out of tool code's reach.

Standard library only, Python 3.9+.

`isolate_stdio` runs first thing in the runtime process: it duplicates fds 0 and 1 to private,
non-inheritable descriptors, points fd 0 at ``/dev/null`` and fd 1 at fd 2, and rebinds
``sys.stdin``/``sys.stdout`` to them. From then on a ``print()`` in tool code goes to stderr and
a read of stdin sees end-of-file, so nothing a tool prints or reads can forge or steal protocol
messages. Forked children close the private descriptors at once (`close_in_child`), and
``exec`` closes them (close-on-exec). Code running inside the runtime's own process could still
write to the private fd on purpose; the sandbox, not the channel, contains that.

`Channel` writes whole lines under a lock (one ``os.write`` loop per message) and reads host
messages on a daemon thread: ``shutdown`` or end-of-file on stdin ends the process at once
(``os._exit``), whatever the main thread is doing; an answer to a `Channel.request` (a host
message with the awaited type and ``id``) goes to the thread waiting for it, so several threads
may wait at once (a program's concurrent gateway requests); every other message is queued for
`Channel.wait_for`.
"""

import contextlib
import io
import os
import queue
import sys
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from runner.wire import protocol

# A host line longer than this is discarded (and reported on stderr) rather than buffered.
MAX_INBOUND_BYTES = protocol.MAX_START_BYTES


def isolate_stdio() -> Tuple[int, int]:
    """Move the channel to private fds; tool code gets /dev/null as stdin, stderr as stdout.

    Returns:
        ``(read_fd, write_fd)``: the private, non-inheritable copies of the original stdin and
        stdout.

    Raises:
        OSError: a descriptor operation failed (the runtime cannot start).
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    read_fd = os.dup(0)  # os.dup returns non-inheritable descriptors
    write_fd = os.dup(1)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(2, 1)
    sys.stdin = io.TextIOWrapper(
        io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace"
    )
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )

    close_in_child(read_fd, write_fd)
    return read_fd, write_fd


def close_in_child(*fds: int) -> None:
    """Close ``fds`` in a child this process forks, and in no fork of that child.

    The handler (``os.register_at_fork``) runs in every fork, the child's own forks included;
    there the numbers are the child's to reuse (the forked worker's first files get the
    channel's), so it closes them once, in the child of the process that called this.
    """
    held = [True]  # this process's copy stays True; each child's turns False at its fork

    def _close() -> None:
        if held[0]:
            held[0] = False
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    os.register_at_fork(after_in_child=_close)


class Channel:
    """Send and receive protocol messages over the private descriptors.

    Args:
        read_fd: descriptor the host's messages arrive on.
        write_fd: descriptor the runtime's messages leave on.
        before_send: called (without the lock) before each message is written; the runtime
            uses it to flush pending outbound-destination records first, so that they precede
            the call record they belong to.
        exit: how to end the process on ``shutdown``/EOF (``os._exit`` by default; tests of
            the class itself may pass something else). The worker pipe
            (`runner.runtime.worker`) passes what to do when the other end is gone.
        on_message: where messages that answer no `request` go (default: the queue of
            `wait_for`); the worker pipe handles requests from the other side there.
        max_bytes: the largest line sent or accepted (the host channel's:
            `protocol.MAX_MESSAGE_BYTES`).
        max_inbound: an inbound line longer than this is discarded unparsed, never buffered.
        on_invalid: told (a reason) of every line discarded: unparseable or over-long.
    """

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        before_send: Optional[Callable[[], None]] = None,
        exit: Callable[[int], Any] = os._exit,
        on_message: Optional[Callable[[Dict[str, Any]], None]] = None,
        max_bytes: int = protocol.MAX_MESSAGE_BYTES,
        max_inbound: int = MAX_INBOUND_BYTES,
        on_invalid: Optional[Callable[[str], None]] = None,
    ) -> None:
        self._on_invalid = on_invalid
        self._on_message = on_message
        self.max_bytes = max_bytes
        self.max_inbound = max_inbound
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._lock = threading.Lock()
        self._inbox: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self._exit = exit
        self.before_send = before_send
        self._reader: Optional[threading.Thread] = None
        self._waiters: Dict[Tuple[str, str], "queue.Queue[Dict[str, Any]]"] = {}
        self._waiters_lock = threading.Lock()
        self.closed = False  # set on end-of-file (what `exit` is then called for)

    # --- sending --------------------------------------------------------------------------

    def send(self, type_: str, **fields: Any) -> None:
        """Write one message ``{"type": type_, **fields}`` as a single line.

        Raises:
            ValueError: the message cannot be encoded or exceeds `protocol.MAX_MESSAGE_BYTES`.
        """
        hook = self.before_send
        if hook is not None:
            hook()
        self.send_raw(dict(fields, type=type_))

    def send_raw(self, message: Dict[str, Any]) -> None:
        """Write an already built message (no ``before_send`` hook).

        Raises:
            ValueError: the message cannot be encoded or exceeds `protocol.MAX_MESSAGE_BYTES`.
        """
        data = protocol.encode(message)
        if len(data) > self.max_bytes:
            raise ValueError(
                "protocol message {!r} of {} bytes exceeds the {} byte limit".format(
                    message.get("type"), len(data), self.max_bytes
                )
            )
        view = memoryview(data)
        with self._lock:
            while view:
                try:
                    written = os.write(self._write_fd, view)
                except BrokenPipeError:
                    self._exit(0)  # the host is gone: nobody is left to tell
                    return
                view = view[written:]

    # --- receiving ------------------------------------------------------------------------

    def start_reader(self) -> None:
        """Start the daemon thread that reads host messages."""
        self._reader = threading.Thread(
            target=self._read_loop, name="sandbox-replay-channel", daemon=True
        )
        self._reader.start()

    def _read_loop(self) -> None:
        buffer = bytearray()
        discarding = False
        while True:
            try:
                chunk = os.read(self._read_fd, 65536)
            except InterruptedError:  # pragma: no cover - retried by Python since 3.5
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                self._exit(0)  # end-of-file on stdin ends the runtime, like shutdown
                return
            buffer.extend(chunk)
            while True:
                newline = buffer.find(b"\n")
                if newline < 0:
                    if len(buffer) > self.max_inbound:
                        self._invalid("a line over {} bytes discarded".format(self.max_inbound))
                        buffer.clear()
                        discarding = True
                    break
                line = bytes(buffer[:newline])
                del buffer[: newline + 1]
                if discarding:
                    discarding = False
                    continue
                if len(line) > self.max_inbound:  # its end came in the chunk that passed the cap
                    self._invalid("a line over {} bytes discarded".format(self.max_inbound))
                    continue
                if line.strip():
                    self._dispatch(line)

    def _dispatch(self, line: bytes) -> None:
        try:
            message = protocol.decode(line)
        except ValueError as exc:
            self._invalid("an unparseable line ignored: {}".format(exc))
            return
        if message["type"] == "shutdown":
            self._exit(0)
            return
        message_id = message.get("id")
        waiter = None
        if isinstance(message_id, str):
            with self._waiters_lock:
                waiter = self._waiters.get((message["type"], message_id))
        if waiter is not None:
            with contextlib.suppress(queue.Full):  # answered already (the other end is gone)
                waiter.put_nowait(message)
            return
        if self._on_message is not None:
            self._on_message(message)
            return
        self._inbox.put(message)

    def _invalid(self, reason: str) -> None:
        _warn(reason)
        if self._on_invalid is not None:
            self._on_invalid(reason)

    def fail_waiters(self, answer: Dict[str, Any]) -> None:
        """Give every waiting `request` ``answer`` (with its own id): the other end is gone."""
        with self._waiters_lock:
            waiting = list(self._waiters.items())
        for (reply_type, message_id), waiter in waiting:
            with contextlib.suppress(queue.Full):
                waiter.put_nowait(dict(answer, type=reply_type, id=message_id))

    def request(
        self, type_: str, reply_type: str, message_id: str, **fields: Any
    ) -> Dict[str, Any]:
        """Send ``{type_, id: message_id, **fields}`` and block until the host's answer.

        The answer is the host message of ``reply_type`` with the same ``id``; other threads
        may have requests of their own in flight meanwhile.

        Raises:
            ValueError: the message cannot be encoded or is too large (nothing was sent).
        """
        waiter: "queue.Queue[Dict[str, Any]]" = queue.Queue(maxsize=1)
        key = (reply_type, message_id)
        with self._waiters_lock:
            self._waiters[key] = waiter
        try:
            self.send(type_, id=message_id, **fields)
            if self.closed:  # the other end went away before the answer could come
                return {"type": reply_type, "id": message_id, "gone": True}
            return waiter.get()
        finally:
            with self._waiters_lock:
                self._waiters.pop(key, None)

    def wait_for(
        self, type_: str, match: Optional[Callable[[Dict[str, Any]], bool]] = None
    ) -> Dict[str, Any]:
        """Block until a host message of ``type_`` (and accepted by ``match``) arrives.

        Messages of other types that arrive meanwhile are reported on stderr and dropped.
        """
        while True:
            message = self._inbox.get()
            if message["type"] == type_ and (match is None or match(message)):
                return message
            _warn("unexpected host message {!r} ignored".format(message.get("type")))


def _warn(text: str) -> None:
    try:
        sys.stderr.write("sandbox-replay runtime: " + text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
