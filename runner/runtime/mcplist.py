"""Ask an MCP stdio server for its tools, inside the sandbox. Standard library only.

An MCP server named by a workflow (``tools: [{mcp: {command: [...]}}]``) is the challenger's
code: only a sandbox runs it. In mode ``manifest`` (`runner.runtime.manifest`) the runtime
starts each server with its command, in its folder's copy, and speaks the MCP stdio transport
(JSON-RPC 2.0, one message per line; specification 2025-06-18, "Transports", "Lifecycle",
"Tools"): ``initialize``, the ``notifications/initialized`` notification, then ``tools/list``
until no ``nextCursor`` is left. The server's tools are returned as they came (the host checks
every field, `runner.tools.mcp`); ``tools/call`` is never sent: MCP tools are served from
recordings.

Bounds: a line at most `MAX_LINE_BYTES`, all pages together at most `MAX_TOOLS` tools and
`MAX_PAGES` pages, the whole exchange `TIMEOUT_S`; the server is killed (its process group)
when done. Server log lines on stderr are discarded; other messages (notifications, requests
from the server) are skipped.
"""

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from typing import IO, Any, Dict, List, Optional

PROTOCOL_VERSION = "2025-06-18"
MAX_LINE_BYTES = 4 << 20
MAX_PAGES = 20
MAX_TOOLS = 1000
TIMEOUT_S = 30.0
MAX_SKIPPED = 1000  # messages that are not the answer awaited


class McpListError(Exception):
    """The server could not be asked: it did not start, answer, or answer well."""


def _reader(stream: "IO[bytes]", lines: "queue.Queue[Optional[bytes]]") -> None:
    try:
        while True:
            line = stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            lines.put(line)
    finally:
        lines.put(None)


class _Session:
    def __init__(self, process: "subprocess.Popen[bytes]", deadline: float) -> None:
        self.process = process
        self.deadline = deadline
        self.lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        assert process.stdout is not None
        threading.Thread(target=_reader, args=(process.stdout, self.lines), daemon=True).start()
        self.next_id = 1

    def send(self, message: Dict[str, Any]) -> None:
        assert self.process.stdin is not None
        data = json.dumps(dict(message, jsonrpc="2.0"), separators=(",", ":")) + "\n"
        try:
            self.process.stdin.write(data.encode("utf-8"))
            self.process.stdin.flush()
        except OSError as exc:
            try:  # a server that already ended reads nothing: say it ended, as a read would
                code = self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                raise McpListError("the server closed its input ({})".format(exc)) from None
            raise McpListError("the server ended (exit code {})".format(code)) from None

    def request(self, method: str, params: Dict[str, Any]) -> Any:
        ident = self.next_id
        self.next_id += 1
        self.send({"id": ident, "method": method, "params": params})
        for _ in range(MAX_SKIPPED):
            message = self._message()
            if not isinstance(message, dict) or message.get("id") != ident:
                continue  # a notification, a log, a request of the server's
            if "error" in message:
                error = message["error"]
                text = error.get("message") if isinstance(error, dict) else error
                raise McpListError("{} failed: {!s:.300}".format(method, text))
            return message.get("result")
        raise McpListError("no answer to {} among {} messages".format(method, MAX_SKIPPED))

    def _message(self) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise McpListError("no answer within {:g} s".format(TIMEOUT_S))
        try:
            line = self.lines.get(timeout=left)
        except queue.Empty:
            raise McpListError("no answer within {:g} s".format(TIMEOUT_S)) from None
        if line is None:
            raise McpListError("the server ended (exit code {})".format(self.process.poll()))
        if len(line) > MAX_LINE_BYTES:
            raise McpListError("a message over {} bytes".format(MAX_LINE_BYTES))
        try:
            return json.loads(line.decode("utf-8"))
        except ValueError:
            return None  # not a JSON-RPC line (a stray print): skipped


def _tools(session: _Session) -> List[Any]:
    session.request(
        "initialize",
        {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "sandbox-replay", "version": "1"},
        },
    )
    session.send({"method": "notifications/initialized"})
    tools: List[Any] = []
    cursor: Optional[str] = None
    for _ in range(MAX_PAGES):
        result = session.request("tools/list", {"cursor": cursor} if cursor else {})
        page = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(page, list):
            raise McpListError("tools/list answered without a 'tools' list")
        tools.extend(page)
        if len(tools) > MAX_TOOLS:
            raise McpListError("more than {} tools listed".format(MAX_TOOLS))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return tools
    raise McpListError("more than {} pages of tools".format(MAX_PAGES))


def list_tools(command: List[str], cwd: str) -> Dict[str, Any]:
    """Start the server ``command`` in ``cwd`` and ask for its tools.

    Returns:
        ``{"tools": [...]}`` (as the server sent them) or ``{"error": "..."}``; never raises
        for the server's failure.
    """
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        return {"error": "the server did not start: {}".format(exc)}
    try:
        return {"tools": _tools(_Session(process, time.monotonic() + TIMEOUT_S))}
    except McpListError as exc:
        return {"error": str(exc)}
    finally:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def answer(servers: Any) -> List[Dict[str, Any]]:
    """One `list_tools` answer per ``{"command": [...], "cwd": "..."}`` of ``servers``."""
    if not isinstance(servers, list):
        return []
    answers = []
    for server in servers:
        command = server.get("command") if isinstance(server, dict) else None
        cwd = server.get("cwd") if isinstance(server, dict) else None
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) for c in command)
            or not isinstance(cwd, str)
        ):
            answers.append({"error": "not a server (command and cwd)"})
            continue
        answers.append(list_tools(command, cwd))
    return answers
