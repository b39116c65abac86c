"""``runner.sdk.record``'s MCP calls: a stdio server's requests and responses as call lines.

Standard library only, Python 3.9+ (PyYAML, when installed, reads the workflow file: below).
While a recorder is active, the JSON-RPC traffic of an MCP stdio server its workflow names
(``tools: [{mcp: {command: [...], prefix: ...}}]``) and the agent starts itself (the ``mcp``
package's ``stdio_client``, the OpenAI Agents SDK's ``MCPServerStdio``) is recorded in the
form ``sandbox-replay record`` writes (`runner.sdk.mcpcalls`, docs/trace-format.md "MCP
traffic"): each request the agent sends is a call line, its index and clock reading taken when
it is sent, among the model calls; its body or ``McpError`` comes from the server's response.
How the bytes are taken off the pipe without changing them is `runner.sdk.mcpstdio`'s.

Differences from the sandbox's hub, where a production process has less to go on:
- a ``tools/call``'s ``effect`` and ``schema_hash`` come from the server's own ``tools/list``
  answer in this recording (the annotations, `runner.sdk.mcpcalls.effect_of`; the hash of its
  ``inputSchema``), the rule the host's registry follows; the policy's ``map:`` is not known
  here. A tool called before it was listed is ``unsafe`` without a schema hash (``lint`` says
  the hash is missing);
- nothing is decided: every request reaches the server (production runs are not sandboxed), a
  tool the workflow does not declare included (``reproduce`` then denies it, as ``record``
  would have).

Which commands are MCP servers: the workflow file given to the recorder (``workflow=``), the
one ``reproduce`` runs the trace with. Its ``tools[i]`` entries are the servers the sandbox
puts its stand-in in place of, and the labels and prefixes the served calls are matched by, so
the recording takes them from the same place rather than from a second list (which could
disagree with the file and make every call a miss), or from recognising the MCP handshake on
any child's pipes (which would put a relay on every piped child and still not know the label
or prefix). A workflow file is YAML; the standard library has no YAML reader, so PyYAML (a
dependency of sandbox-replay) is imported by name here, only when the file's text names an MCP
command. Where it is missing, entering the recorder warns that the traffic is not recorded.
"""

import importlib
import json
import re
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.sdk import current, mcpcalls
from runner.sdk.toolschema import schema_hash
from runner.trace.format import TRACE_VERSION, encode_body

__all__ = ["McpRecording", "attach", "detach", "workflow_servers"]

MAX_PENDING = 10000
"""Requests awaiting their response at once in one recording (beyond: no body recorded)."""
MAX_LISTED = 1000  # tools remembered per server (`runner.tools.mcp.MAX_TOOLS`)
# a `mcp:` mapping holding a `command:` (flow or block style), read as text before any YAML
_MCP_COMMAND = re.compile(r"\bmcp\s*:\s*(\{[^}]*\bcommand\s*:|\n\s+command\s*:)")
NO_YAML = (
    "runner.sdk.record does not record MCP traffic here: the workflow names an MCP server "
    "command, and reading the workflow file needs PyYAML, which this process cannot import"
)
UNANSWERED = "no response before the recording ended"

_ACTIVE: List["McpRecording"] = []
_ACTIVE_LOCK = threading.Lock()


def workflow_servers(
    content: str,
    names: "re.Pattern[str]" = _MCP_COMMAND,
    servers_of: Callable[[Dict[str, Any]], List[Dict[str, Any]]] = mcpcalls.servers_of,
    no_yaml: str = NO_YAML,
) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The MCP servers a workflow file's text names, and why none could be read.

    Args:
        content: the workflow file's text.
        names: what in the text says it names a server of this kind (read before any YAML:
            a workflow without MCP never needs PyYAML); default: a stdio ``command``.
        servers_of: the servers of the parsed workflow (default `runner.sdk.mcpcalls.
            servers_of`, the stdio ones; `runner.sdk.mcphttp.url_servers` for URLs).
        no_yaml: the reason given when PyYAML cannot be imported.

    Returns:
        (``servers_of`` the file, None), or ([], the reason) when the text names an MCP
        server but could not be read (no PyYAML, not YAML).
    """
    if not names.search(content):
        return [], None
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        return [], no_yaml
    try:
        data = yaml.safe_load(content)
    except Exception as exc:  # yaml.YAMLError and what a hostile document raises
        return [], "the workflow file is not YAML ({}): its MCP traffic is not recorded".format(
            type(exc).__name__
        )
    return (servers_of(data) if isinstance(data, dict) else []), None


class McpRecording:
    """The MCP calls of one recorder (see the module docstring).

    Args:
        recorder: the `runner.sdk.recorder.Recorder` (its ``_next``, ``_lock``, ``calls``,
            ``tools``).
        servers: `runner.sdk.mcpcalls.servers_of` its workflow.
        in_tool: True while a recorded tool call runs in this context (a server it starts
            is part of the tool's call, not recorded apart).
    """

    def __init__(
        self,
        recorder: Any,
        servers: List[Dict[str, Any]],
        in_tool: Callable[[], bool] = lambda: False,
    ) -> None:
        self.recorder = recorder
        self.servers = list(servers)
        self.in_tool = in_tool
        self.open = True
        self.dropped = 0  # lines over the bound, seen by the relays of this recording
        self.notes: List[str] = []  # why something was not recorded, said at `detach`
        self.failures = 0
        self._by_label = {str(s["label"]): s for s in servers}
        self._listed: Dict[str, Dict[str, Any]] = {}
        self._pending: Dict[int, Tuple[Dict[str, Any], float]] = {}
        self._undescribed: List[Dict[str, Any]] = []  # tools/call stored before a listing
        self._lock = threading.Lock()

    def request(self, label: str, message: Dict[str, Any]) -> Optional[int]:
        """Record that the agent sent request ``message`` to server ``label``; its index.

        Returns:
            The call's index (hand it to `response`), or None: not recorded (the recording
            ended, or a request the hub would not record either: a ``tools/call`` without a
            tool name, a method that is no method name).
        """
        server = self._by_label.get(label)
        method = message.get("method")
        if not self.open or server is None or not isinstance(method, str):
            return None
        try:
            tool_id, args = mcpcalls.request_call(server, method, message.get("params"))
        except ValueError:
            return None
        with self._lock:
            if not self.open:
                return None
            index, reading = self.recorder._next()
            index = int(index)
            record: Dict[str, Any] = {
                "v": TRACE_VERSION,
                "type": "call",
                "index": index,
                "tool": tool_id,
                "effect": "read" if method != "tools/call" else "unsafe",
                "args": args,
                "schema_hash": None,
                "clock": reading,
                "source": "executed",
                "raw_io": False,
                "meta": {"mcp": {"server": label, "method": method}},
            }
            if len(self._pending) >= MAX_PENDING:
                record["meta"]["recorder_error"] = "over {} MCP requests awaiting an answer".format(
                    MAX_PENDING
                )
                self._store(index, record, 0.0)
                return None
            self._pending[index] = (record, time.monotonic())
        return index

    def response(self, index: int, label: str, response: Dict[str, Any]) -> None:
        """Record the server's ``response`` to the request recorded as call ``index``."""
        with self._lock:
            entry = self._pending.pop(index, None)
            if entry is None:
                return
            record, started = entry
            try:
                body, error = mcpcalls.response_outcome(response)
            except ValueError as exc:
                record["error"] = {"class": "ValueError", "message": str(exc)}
            else:
                if error is not None:
                    record["error"] = {"class": mcpcalls.ERROR_CLASS, "message": error}
                else:
                    assert body is not None
                    record.update(encode_body(body))
                    if record["meta"]["mcp"]["method"] == "tools/list":
                        self._remember(label, response["result"])
            self._store(index, record, started)

    def note(self, text: str) -> None:
        """Keep a reason something was not recorded (said once, at `detach`)."""
        if text not in self.notes and len(self.notes) < 20:
            self.notes.append(text)

    def failed(self, exc: BaseException) -> None:
        """Count a line that could not be recorded (a fault of the recorder's)."""
        self.failures += 1
        if self.failures == 1:
            self.note(
                "runner.sdk.record could not record an MCP message: {}: {}".format(
                    type(exc).__name__, str(exc)[:200]
                )
            )

    def _describe(self, record: Dict[str, Any]) -> None:
        """A tool call's effect class and schema hash, from the server's listing so far.

        Taken when the call ends, not when it is sent: a client that sends ``tools/call``
        before the ``tools/list`` answer arrived (pipelining) still gets the listed tool.
        """
        label = record["meta"]["mcp"]["server"]
        prefix = str(self._by_label[label]["prefix"])
        name = record["tool"][len(prefix) + 1 :] if prefix else record["tool"]
        listed = self._listed.get(label, {}).get(name)
        if listed is None:  # not listed yet: unsafe (fail closed), no schema hash, unless a
            if len(self._undescribed) < MAX_LISTED:  # listing later in this recording names it
                self._undescribed.append(record)
            return
        record["effect"] = mcpcalls.effect_of(listed.get("annotations"))[0]
        schema = mcpcalls.input_schema(listed)
        if isinstance(schema, dict):
            record["schema_hash"] = schema_hash(schema)
            self.recorder.tools[record["tool"]] = record["schema_hash"]

    def _remember(self, label: str, result: Any) -> None:
        """Keep a server's ``tools/list`` answer; describe the calls made before it.

        The ``mcp`` client (2.x) calls a tool first and lists the tools afterwards (to check
        the output's schema): the call was stored ``unsafe`` without a hash, and ``reproduce``
        then named its tool as an environment difference (``absent -> <hash>``; a new user's
        finding). The server's own listing, later in the same recording, describes it.
        """
        tools = result.get("tools") if isinstance(result, dict) else None
        known = self._listed.setdefault(label, {})
        for tool in tools if isinstance(tools, list) else []:
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(name, str) and (name in known or len(known) < MAX_LISTED):
                known[name] = tool
        waiting, self._undescribed = self._undescribed, []
        with self.recorder._lock:  # the records are the trace's already: change them in place
            for record in waiting:
                self._describe(record)

    def _store(self, index: int, record: Dict[str, Any], started: float) -> None:
        if record["meta"]["mcp"]["method"] == "tools/call":
            self._describe(record)
        record["duration_s"] = round(time.monotonic() - started, 6) if started else 0.0
        with self.recorder._lock:
            self.recorder.calls[index] = record

    def close(self) -> None:
        """End the recording: a request still unanswered is recorded as an ``McpError``."""
        with self._lock:
            self.open = False
            pending, self._pending = self._pending, {}
        error = json.dumps(
            {"code": mcpcalls.INTERNAL_ERROR, "message": UNANSWERED}, separators=(",", ":")
        )
        for index, (record, started) in sorted(pending.items()):
            record["error"] = {"class": mcpcalls.ERROR_CLASS, "message": error}
            self._store(index, record, started)


def active(args: Any) -> Optional[Tuple["McpRecording", str]]:
    """The recording (and the server's label) a child started with ``args`` belongs to.

    The recording of the starting context's recorder (`runner.sdk.current.RECORDER`) when
    it names the command, else the innermost active recording whose workflow names it.
    """
    if not _ACTIVE:
        return None
    recorder = current.RECORDER.get()
    with _ACTIVE_LOCK:
        candidates = list(reversed(_ACTIVE))
    mine = [r for r in candidates if r.recorder is recorder]
    for recording in mine or candidates:
        label = mcpcalls.matching(args, recording.servers)
        if label is not None and recording.open:
            return recording, label
    return None


def attach(
    recorder: Any, content: str, in_tool: Callable[[], bool] = lambda: False
) -> Optional[McpRecording]:
    """Start recording the MCP servers the workflow text ``content`` names; never raises.

    ``in_tool``: see `McpRecording`.

    Returns:
        The recording (give it to `detach`), or None when the workflow names no server (or
        they could not be read: a `RuntimeWarning` says why).
    """
    try:
        servers, problem = workflow_servers(content)
        if problem is not None:
            warnings.warn(problem, RuntimeWarning, stacklevel=3)
        if not servers:
            return None
        from runner.sdk import mcpstdio  # the relay: only for a workflow with MCP servers

        if not mcpstdio.install(active):
            warnings.warn(mcpstdio.UNSUPPORTED, RuntimeWarning, stacklevel=3)
            return None
        recording = McpRecording(recorder, servers, in_tool)
        with _ACTIVE_LOCK:
            _ACTIVE.append(recording)
        return recording
    except Exception as exc:  # the recorder never raises into the agent
        warnings.warn(
            "runner.sdk.record does not record MCP traffic: {}: {}".format(type(exc).__name__, exc),
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def detach(recording: Optional[McpRecording]) -> None:
    """Stop ``recording`` (`attach`'s) and finish its unanswered calls; never raises."""
    if recording is None:
        return
    try:
        with _ACTIVE_LOCK:
            if recording in _ACTIVE:
                _ACTIVE.remove(recording)
        recording.close()
        for text in recording.notes:
            warnings.warn(text, RuntimeWarning, stacklevel=3)
        if recording.dropped:
            warnings.warn(
                "runner.sdk.record: {} MCP message(s) over {} bytes were passed on but not "
                "recorded".format(recording.dropped, mcpcalls.MAX_LINE_BYTES),
                RuntimeWarning,
                stacklevel=3,
            )
    except Exception:  # noqa: S110 (never raises into the agent; what was recorded stays)
        pass
