r"""An MCP stdio server's JSON-RPC traffic, taken off its pipes for ``runner.sdk.record``.

Standard library only, Python 3.9+, POSIX. Every agent's MCP stdio client starts its server
with ``subprocess.Popen`` (the ``mcp`` package's ``stdio_client`` and the OpenAI Agents SDK's
``MCPServerStdio`` through ``anyio.open_process`` → ``asyncio`` → ``Popen``), as the sandbox's
stand-in relies on too (`runner.runtime.mcpspawn`). `install` wraps ``Popen.__init__`` once:
while a recording is active (`runner.sdk.mcprecord`, which gives `install` its lookup), a
child whose argument list is the ``command`` of an MCP server of its workflow
(`runner.sdk.mcpcalls.matching`) and that was started with binary pipes for stdin and
stdout gets a relay between it and the agent, unchanged in both directions. The
real server is started first, exactly as asked (its process, pid, environment, stderr and
session are the agent's); then the ``Popen``'s ``stdin`` and ``stdout`` are swapped for the
agent's ends of two new pipes (same buffering), and two threads copy bytes across:

- agent → server: every chunk is written to the server as it came; each complete line (the
  transport's delimiter is ``\n``, specification 2025-06-18 "Transports") that is a
  JSON-RPC request is recorded before the chunk is passed on (so its index comes before
  anything the agent does after the answer);
- server → agent: the same; a response to a recorded request is recorded before the agent
  can read it (so the recorder never ends with a call the agent already saw unrecorded).

The recorder records only (issue 27: recording never changes the agent): nothing is denied,
re-encoded, delayed for a decision or held back; every byte reaches the other side in order,
and the end of either side is passed on (an agent closing its stdin closes the server's; a
server ending closes the agent's stdout; a side that cannot be written to any more makes the
relay close the other side's pipe, so the writer sees a broken pipe as it would have). A
failure while recording a line is counted, never raised; the bytes go on. What crosses the
pipe is hostile: a line is recorded only when it is at most `MAX_LINE_BYTES` (longer: passed
on, counted, not recorded) and decodes with the project's strict JSON decoder to an object;
a relay holds at most one partial line of that size per side. Not taken off: a child started
with text-mode pipes or without ``Popen``'s pipes (anyio on trio makes its own), or on Windows
(a `RuntimeWarning` says the traffic is not recorded); with positional ``Popen`` arguments or
``shell=True``; inside a recorded tool call (the tool is the call); a server started before
the recorder was entered.
"""

import contextlib
import io
import json
import os
import select
import subprocess
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.sdk.mcpcalls import MAX_LINE_BYTES, server_ended
from runner.trace.strictjson import loads as strict_loads

__all__ = ["CHUNK_BYTES", "UNSUPPORTED", "Lines", "Relay", "install", "interpose"]

CHUNK_BYTES = 1 << 16
"""Bytes read from a pipe at once (and passed on at once)."""
UNSUPPORTED = (
    "runner.sdk.record does not record MCP stdio traffic on this platform (POSIX pipes only): "
    "the workflow's MCP server calls will be missing from this trace"
)
TEXT_PIPES = (
    "runner.sdk.record does not record the MCP server {} started with text-mode pipes "
    "(the MCP clients use binary ones): its calls will be missing from this trace"
)

Find = Callable[[Any], Optional[Tuple[Any, str]]]
"""``args`` of a child → (the recording it belongs to, the server's label), or None."""
OWN_PIPES = (
    "runner.sdk.record does not record the MCP server {} started without Popen's pipes "
    "(pipes of the client's own, as anyio's trio backend makes): its calls will be missing "
    "from this trace"
)

_state: Dict[str, Any] = {"original": None, "find": None}


class Lines:
    """Complete lines of a byte stream fed in chunks, each at most `MAX_LINE_BYTES`.

    A longer line is left out and counted (``dropped``); at most one partial line is held.
    """

    def __init__(self) -> None:
        self.partial = bytearray()
        self.over = False
        self.dropped = 0

    def feed(self, chunk: bytes) -> List[bytes]:
        r"""The lines ``chunk`` completes (without their ``\n``), in order."""
        found: List[bytes] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self.over or len(self.partial) + len(piece) > MAX_LINE_BYTES:
                self.over = True
                self.partial.clear()
            else:
                self.partial += piece
            if end < 0:
                return found
            if self.over:
                self.dropped += 1
            else:
                found.append(bytes(self.partial))
            self.partial.clear()
            self.over = False
            start = end + 1


def decode(line: bytes) -> Optional[Dict[str, Any]]:
    """A JSON-RPC message of a line (a JSON object, strictly decoded), or None."""
    try:
        value = strict_loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _key(ident: Any) -> str:
    """A request id as a key that keeps its JSON type (``1``, ``"1"`` and ``true`` differ)."""
    return json.dumps(ident, sort_keys=True)


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to ``fd``; False when the other end is gone."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except OSError:
            return False
        view = view[written:]
    return True


def _close(stream: Any) -> None:
    try:
        if isinstance(stream, int):
            os.close(stream)
        else:
            stream.close()
    except (OSError, ValueError):
        pass


class Relay:
    """The two copying threads between an agent and one MCP server it started.

    Args:
        recording: the `runner.sdk.mcprecord.McpRecording` the calls go to.
        label: the server's workflow entry (``tools[i]``).
        popen: the server's ``Popen`` (only its ``returncode`` is read: never polled, so
            the agent's own wait keeps the exit status).
        server_in, server_out: the server's pipes as ``Popen`` made them.
        agent_r: the read end of the pipe the agent now writes to.
        agent_w: the write end of the pipe the agent now reads from.
    """

    def __init__(
        self,
        recording: Any,
        label: str,
        popen: Any,
        server_in: Any,
        server_out: Any,
        agent_r: int,
        agent_w: int,
    ) -> None:
        self.recording = recording
        self.label = label
        self.popen = popen
        self.server_in = server_in
        self.server_out = server_out
        self.agent_r = agent_r
        self.agent_w = agent_w
        self.awaiting: Dict[str, List[int]] = {}
        self._lock = threading.Lock()
        self._go = threading.Event()
        self._cancelled = False
        self._threads = [
            threading.Thread(target=self._requests, name="sandbox-replay-mcp-in", daemon=True),
            threading.Thread(target=self._responses, name="sandbox-replay-mcp-out", daemon=True),
        ]

    def start(self) -> None:
        """Start both threads; they copy nothing until `go` (or end at `cancel`)."""
        for thread in self._threads:
            thread.start()

    def go(self) -> None:
        """The agent's ends are in place: start copying."""
        self._go.set()

    def cancel(self) -> None:
        """The relay is not used: its threads end without touching the server's pipes."""
        self._cancelled = True
        self._go.set()

    # --- the two directions -----------------------------------------------------------------

    def _requests(self) -> None:
        self._go.wait()
        if self._cancelled:
            return
        try:
            self._copy(self.agent_r, self.server_in.fileno(), self._request_line)
        except (OSError, ValueError):
            pass
        finally:
            _close(self.server_in)  # the server sees the agent's end of input
            _close(self.agent_r)  # the agent sees a broken pipe if it writes again

    def _responses(self) -> None:
        self._go.wait()
        if self._cancelled:
            return
        try:
            self._copy(self.server_out.fileno(), self.agent_w, self._response_line)
        except (OSError, ValueError):
            pass
        finally:
            self._guard(self._ended)
            _close(self.agent_w)  # the agent reads the end of the server's output
            _close(self.server_out)

    def _copy(self, source: int, target: int, on_line: Callable[[bytes], None]) -> None:
        """Copy ``source`` to ``target`` until either ends; each line to ``on_line`` first."""
        lines = Lines()
        while True:
            chunk = os.read(source, CHUNK_BYTES)
            if not chunk:
                return
            for line in lines.feed(chunk):
                self._guard(on_line, line)
            if lines.dropped:  # said when the recording ends
                with self._lock:
                    self.recording.dropped += lines.dropped
                lines.dropped = 0
            if not _write_all(target, chunk):
                return

    # --- recording ---------------------------------------------------------------------------

    def _guard(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:  # recording never stops the bytes
            self.recording.failed(exc)

    def _request_line(self, line: bytes) -> None:
        message = decode(line)
        if message is None or not isinstance(message.get("method"), str):
            return
        if message.get("id") is None:
            return  # a notification: passed on, not recorded
        index = self.recording.request(self.label, message)
        if index is not None:
            with self._lock:
                self.awaiting.setdefault(_key(message["id"]), []).append(index)

    def _response_line(self, line: bytes) -> None:
        message = decode(line)
        if message is None or "method" in message or "id" not in message:
            return  # the server's notification or request: passed on, not recorded
        with self._lock:
            waiting = self.awaiting.get(_key(message["id"]))
            if not waiting:
                return
            index = waiting.pop(0)
            if not waiting:
                del self.awaiting[_key(message["id"])]
        self.recording.response(index, self.label, message)

    def _ended(self) -> None:
        with self._lock:
            left = sorted(i for indexes in self.awaiting.values() for i in indexes)
            self.awaiting.clear()
        for index in left:
            self.recording.response(index, self.label, server_ended(self.popen.returncode))


def interpose(popen: Any, args: Any, kwargs: Dict[str, Any], find: Find) -> Optional[Relay]:
    """Put a relay between the agent and ``popen`` when it is a recorded MCP server.

    ``popen`` is changed only once the relay runs; on any failure it is left as it was.

    Args:
        popen: the ``Popen`` just started.
        args: its argument list.
        kwargs: its keyword arguments (``bufsize`` is read).
        find: which recording (`runner.sdk.mcprecord.McpRecording`) and server it is.

    Returns:
        The relay, or None (not a server of an active recording, not binary pipes).
    """
    found = find(args)
    if found is None:
        return None
    recording, label = found
    if recording.in_tool():
        return None
    server_in, server_out = popen.stdin, popen.stdout
    if server_in is None or server_out is None:  # pipes of its own (anyio on trio)
        recording.note(OWN_PIPES.format(label))
        return None
    if getattr(popen, "text_mode", False) or isinstance(server_in, io.TextIOBase):
        recording.note(TEXT_PIPES.format(label))
        return None
    bufsize = kwargs.get("bufsize", -1)
    if not isinstance(bufsize, int) or bufsize == 1:  # Popen's own reading of bufsize
        bufsize = -1
    opened: List[Any] = []  # what to close if the relay cannot start: fds, then files
    relay: Optional[Relay] = None
    try:
        to_server = os.pipe()  # the agent writes to [1], the relay reads [0]
        opened.extend(to_server)
        to_agent = os.pipe()  # the relay writes to [1], the agent reads [0]
        opened.extend(to_agent)
        agent_in = io.open(to_server[1], "wb", bufsize)  # noqa: SIM115 (the agent's, kept)
        opened[1] = agent_in
        agent_out = io.open(to_agent[0], "rb", bufsize)  # noqa: SIM115 (the agent's, kept)
        opened[2] = agent_out
        relay = Relay(recording, label, popen, server_in, server_out, to_server[0], to_agent[1])
        relay.start()
    except BaseException:
        if relay is not None:
            relay.cancel()
        for item in opened:
            _close(item)
        raise
    popen.stdin, popen.stdout = agent_in, agent_out
    relay.go()
    return relay


def install(find: Find) -> bool:
    """Wrap ``subprocess.Popen.__init__`` once (POSIX); False where it cannot record.

    ``find`` (`interpose`) is asked about every child started with keyword arguments only.
    """
    if os.name != "posix":
        return False
    _state["find"] = find
    if _state["original"] is not None:
        return True
    original = subprocess.Popen.__init__
    _state["original"] = original

    def __init__(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        original(self, args, *rest, **kwargs)
        if rest or kwargs.get("shell"):
            return
        # a failure leaves the server as the agent started it, unrecorded
        with contextlib.suppress(Exception):
            interpose(self, args, kwargs, _state["find"])

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]
    return True
