"""The MCP servers of a program step: their JSON-RPC requests as calls of the episode.

Standard library only, Python 3.9+. An agent's MCP client (the ``mcp`` package's
``stdio_client``, the OpenAI Agents SDK's ``MCPServerStdio``, anything spawning the command a
workflow's ``tools: [{mcp: {command: [...]}}]`` entry names) talks to the stand-in
`runner.runtime.mcpproxy` instead of the server (`runner.runtime.mcpspawn` puts it there).
The stand-in asks this hub, over the model gateway's loopback port (`MCP_PATH`), what to do
with each request the client sends:

- ``tools/call`` is a tool call like any other: tool id ``PREFIX.NAME`` (the entry's
  ``prefix``), ``args`` the call's ``arguments``, effect class and disposition from the
  capability-filtered registry (the tool's MCP annotations or the policy's ``map:``,
  `runner.tools.mcp`). Not in the registry (denied, unknown) or not declared by the program
  step: recorded with `CapabilityDenied`, answered with a JSON-RPC error, the episode ends
  ``denied``; the server never sees it. Served (``reproduce``; ``read`` tools in shadow runs,
  from the task's observations): the answer comes from the recording, strict. Executed
  (``record``, every tool executes there): the stand-in forwards it to the server and hands
  the server's response back here to be recorded.
- every other request (``initialize``, ``tools/list``, ``ping``, ``resources/list``...) is a
  protocol call: tool id ``mcp.`` + the method with ``/`` as ``.`` (`protocol_tool_id`),
  effect ``read``, ``args`` ``{"server": "tools[i]", "params": ...}``, and ``meta.mcp``
  ``{server, method}`` (docs/trace-format.md, "MCP traffic"). Served from the trace in
  ``reproduce``, forwarded in every other mode (the server is the run's own code there).

Params are normalised before they are recorded or matched: the ``_meta`` member (progress
tokens, request ids a client numbers itself) is left out, everything else is compared as
canonical JSON (`runner.runtime.replay.recordings.TraceStore`: by position, same tool, same
arguments; a miss is an ``unrecorded_call`` divergence, answered with a JSON-RPC error, never
sent anywhere live). A body is the response's ``result`` as compact JSON; a JSON-RPC error is
recorded as error class ``McpError`` whose message is the error object as JSON, and served
back as that error object.

What a request and its response are recorded as is `runner.sdk.mcpcalls`'s rule, which
``runner.sdk.record`` follows too (`runner.sdk.mcprecord`): a trace recorded in production is
served here like one ``record`` wrote.

Requests arrive from inside the sandbox (the agent's own process tree): they are hostile input
(strict JSON, bounded by the gateway) and decide nothing the policy decides.
"""

import json
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.errors import CapabilityDenied, ToolNotResolvable
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.calls import Caller
from runner.sdk.mcpcalls import (
    ERROR_CLASS,
    INTERNAL_ERROR,
    normalised_params,
    protocol_tool_id,
    request_call,
    response_outcome,
    servers_of,
)
from runner.trace.format import encode_body
from runner.trace.strictjson import loads as strict_loads
from runner.wire import argrules
from runner.wire.errors import RecordedError

__all__ = [
    "ENV_SERVERS",
    "ENV_STANDIN",
    "ERROR_CLASS",
    "INTERNAL_ERROR",
    "MCP_PATH",
    "McpHub",
    "normalised_params",
    "protocol_tool_id",
    "servers_of",
    "text_result",
]

ENV_SERVERS = "SANDBOX_REPLAY_MCP_SERVERS"
"""The workflow's MCP stdio servers, `servers_of` as JSON: set by the runtime for the worker."""
ENV_STANDIN = "SANDBOX_REPLAY_MCP_STANDIN"
"""A stand-in's settings, ``{"gateway": "host:port", "server": label}`` as JSON."""
MCP_PATH = "/_sandbox-replay/mcp"
"""The gateway route the stand-in posts to (never an API path an SDK uses)."""
# JSON-RPC 2.0 error codes (specification, "Error object")
INVALID_REQUEST = -32600


def _response(ident: Any, result: Any = None, error: Optional[Dict[str, Any]] = None) -> Any:
    message: Dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    return message


def _error(code: int, text: str) -> Dict[str, Any]:
    return {"code": code, "message": text[:2048]}


def _recorded_error(exc: RecordedError) -> Dict[str, Any]:
    """The JSON-RPC error object a recorded ``McpError`` carries, else an internal error."""
    if exc.recorded_class == ERROR_CLASS:
        try:
            value = strict_loads(exc.message)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("code"), int):
            return value
    return _error(INTERNAL_ERROR, "{}: {}".format(exc.recorded_class, exc.message))


class McpHub:
    """Answers the stand-ins of one episode (see the module docstring).

    Args:
        caller: the episode's caller (every request becomes one of its calls).
        registry: the capability-filtered runtime registry.
        mode: ``shadow``, ``reproduce`` or ``record``.
        servers: `servers_of` the workflow.
        programs: the running program steps by step id (`runner.runtime.worker.client.
            Worker.programs`): their declared tools and their ``denied`` list.
    """

    def __init__(
        self,
        caller: Caller,
        registry: RuntimeRegistry,
        mode: str,
        servers: List[Dict[str, Any]],
        programs: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.caller = caller
        self.registry = registry
        self.mode = mode
        self.servers = {str(s["label"]): s for s in servers}
        self.programs = programs if programs is not None else {}
        self._lock = threading.Lock()

    def answer(self, step_id: str, exchange: Any) -> Dict[str, Any]:
        """What the stand-in does with one client request.

        Args:
            step_id: the program step running.
            exchange: the stand-in's post: ``{"server": label, "message": request}`` and,
                once forwarded, ``"response"``: the server's JSON-RPC response.

        Returns:
            ``{"answer": response}`` (write it to the client) or ``{"forward": true}`` (send
            the request to the server, then post again with its ``response``).
        """
        if not isinstance(exchange, dict) or not isinstance(exchange.get("message"), dict):
            return {"answer": _response(None, error=_error(INVALID_REQUEST, "not an exchange"))}
        message = exchange["message"]
        ident = message.get("id")
        server = self.servers.get(str(exchange.get("server")))
        method = message.get("method")
        if server is None or not isinstance(method, str) or ident is None:
            why = "no such MCP server in the workflow" if server is None else "not a request"
            return {"answer": _response(ident, error=_error(INVALID_REQUEST, why))}
        try:
            tool, args = self._tool(step_id, server, method, message.get("params"))
        except CapabilityDenied as exc:
            return {"answer": _response(ident, error=_error(INTERNAL_ERROR, exc.message))}
        except ValueError as exc:
            return {"answer": _response(ident, error=_error(INVALID_REQUEST, str(exc)))}
        forwarded = "response" in exchange
        if tool.disposition == "execute" and not forwarded:
            try:  # the policy's argument rules decide before the server sees the call
                argrules.guard(tool.rules, tool.id, args, {})
            except CapabilityDenied:
                pass  # call_tool below raises it again and records it
            else:
                return {"forward": True}
        return {"answer": self._call(step_id, tool, args, method, server, ident, exchange)}

    def _tool(
        self, step_id: str, server: Dict[str, Any], method: str, params: Any
    ) -> Tuple[RuntimeTool, Dict[str, Any]]:
        tool_id, args = request_call(server, method, params)
        if method != "tools/call":
            disposition = "recorded" if self.mode == "reproduce" else "execute"
            return RuntimeTool({"id": tool_id, "effect": "read"}, disposition, None), args
        program = self.programs.get(step_id)
        declared = getattr(program, "declared", None)
        try:
            tool = self.registry.resolve(tool_id)
            if isinstance(declared, list) and tool_id not in declared:
                raise ToolNotResolvable(
                    "tool {!r} is not in the declared toolset of program step {!r}".format(
                        tool_id, step_id
                    )
                )
        except ToolNotResolvable as exc:
            denied = CapabilityDenied(
                "MCP tool {!r} of {}: {}; nothing was sent to the server".format(
                    tool_id, server["label"], exc.message
                ),
                tool_id=tool_id,
                step=step_id,
            )
            if program is not None and isinstance(getattr(program, "denied", None), list):
                program.denied.append(denied)
            self.caller.record_failed(step_id, tool_id, args, denied)
            raise denied from None
        if self.mode == "record" and tool.disposition != "execute":
            # record runs every tool live; an MCP tool has no code here, the server runs it
            entry: Dict[str, Any] = {
                "id": tool.id,
                "effect": tool.effect,
                "schema_hash": tool.schema_hash,
                "description": tool.description,
                "schema": tool.schema,
            }
            tool = RuntimeTool(entry, "execute", None, tool.rules)
        return tool, args

    def _call(
        self,
        step_id: str,
        tool: RuntimeTool,
        args: Dict[str, Any],
        method: str,
        server: Dict[str, Any],
        ident: Any,
        exchange: Dict[str, Any],
    ) -> Any:
        execute: Optional[Callable[..., Any]] = None
        if "response" in exchange:
            execute = _forwarded(exchange.get("response"))
        meta = {"mcp": {"server": server["label"], "method": method}}
        try:
            with self._lock:  # one MCP request at a time: the trace keeps their order
                value = self.caller.call_tool(step_id, tool, args, execute=execute, meta=meta)
        except RecordedError as exc:
            return _response(ident, error=_recorded_error(exc))
        except Exception as exc:  # a miss (a divergence already noted), a denial, a bad answer
            text = getattr(exc, "message", None) or str(exc)
            return _response(
                ident, error=_error(INTERNAL_ERROR, "{}: {}".format(type(exc).__name__, text))
            )
        if isinstance(value, dict):
            return _response(ident, result=value)
        if method == "tools/call":  # an observation written as the tool's text: its result
            return _response(ident, result=text_result(value))
        return _response(  # never a non-object result: a client drops it and waits forever
            ident,
            error=_error(
                INTERNAL_ERROR,
                "the served answer to {} is not a JSON object ({})".format(
                    method, type(value).__name__
                ),
            ),
        )


def text_result(value: Any) -> Dict[str, Any]:
    """A ``tools/call`` result (MCP ``CallToolResult``) holding ``value`` as its one text.

    A task's observation for an MCP tool may be written as the tool's text (``"observed"``)
    rather than the result object the server sends; the ``mcp`` client drops a result that is
    not an object and then waits for the answer until the run's timeout (measured: 300 s).
    A string is the text itself; any other JSON value its compact JSON.
    """
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _forwarded(response: Any) -> Callable[..., Any]:
    """The executor of a call the stand-in forwarded: the server's response, recorded."""

    def execute(
        tool: RuntimeTool, args: Dict[str, Any], record: Dict[str, Any], served: Any
    ) -> Any:
        text, error = response_outcome(response)
        if error is not None:
            raise RecordedError(ERROR_CLASS, error)
        assert text is not None and isinstance(response, dict)  # response_outcome checked it
        record.update(encode_body(text))
        return response["result"]

    return execute
