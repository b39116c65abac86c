"""The Streamable HTTP side of the MCP hub: the workflow's MCP server URLs, served in a sandbox.

Standard library only, Python 3.9+. A workflow's ``tools: [{mcp: {url: ...}}]`` entry names a
remote MCP server. In a sandbox nothing leaves the machine: the agent's MCP client (the ``mcp``
package's Streamable HTTP client, the OpenAI Agents SDK's ``MCPServerStreamableHttp``, any
client on httpx2 or httpx) is routed to the model gateway's loopback port instead
(`runner.runtime.mcproute`), at ``MCP_HTTP_PATH`` + the entry's index. `McpHttpEndpoint` is
the server there. It speaks the Streamable HTTP transport (MCP specification 2025-06-18,
"Transports"; 2025-03-26 too) as far as a client needs:

- ``POST`` of one JSON-RPC message (a JSON object: batches, which 2025-06-18 removed, are
  refused). A request is decided by the same hub as a stdio server's (`runner.runtime.mcphub`:
  ``tools/call`` is a tool call with its effect class and policy, a denied one never leaves
  the sandbox; other methods are protocol calls ``mcp.*``; all recorded with ``meta.mcp``) and
  answered ``200`` with the JSON-RPC response as ``application/json`` (the specification lets
  the server choose JSON or an event stream; one JSON answer is the same in every mode).
  A notification or a response is accepted with ``202`` and no body.
- ``Mcp-Session-Id`` (the handshake era, 2025-11-25 and before): a successful ``initialize``
  opens a session whose id (``sandbox-replay-I-N``, numbered: the same in a record and its
  replay) comes back in that header; every
  later message must carry it: none is ``400``, one this endpoint never gave or ended is
  ``404`` (the client then starts a new session, as the specification says), one that is not
  1-128 visible ASCII characters is ``400``. The stateless era (2026-07-28, which the ``mcp``
  package's client probes first with ``server/discover``) has no session: a request stamped
  ``MCP-Protocol-Version`` with a version that has no handshake, or that probe, needs none;
  its routing headers (`MODERN_HEADERS`) are passed on to the server in ``record``.
- ``GET`` (a server-to-client stream) is ``405``, which the specification allows; ``DELETE``
  ends the session (``204``); any other method is ``405``.

Where a forwarded request goes (the hub answers "forward" only in ``record``, for every
request it does not deny): to the host, over the channel (``mcp_request``; the host posts it to
the URL its own copy of the workflow declares, `runner.providers.mcphttp`), and the response
comes back to be recorded. A notification is passed on the same way in ``record`` (the server
needs ``notifications/initialized``), never recorded. In ``reproduce`` every answer comes from
the trace; a request it does not hold is an ``unrecorded_call`` divergence answered with a
JSON-RPC error, never sent anywhere. In a shadow run (``run``, ``submit``) a URL is contacted
by nobody (a shadow run reaches nothing live; its ``read`` tools are served from the task's
observations): `stand_in` answers the protocol requests from what the workflow declares
(``initialize``, ``ping``, and ``tools/list`` with the entry's tools that the policy lets
through: those ``check`` read from its ``tools_list``), anything else with a JSON-RPC
"method not found"; those answers are recorded like a server's.

Everything here comes from the agent's process tree: hostile. A body is at most
`MAX_BODY_BYTES` (``413``), strict JSON (``400`` with a JSON-RPC parse error), a JSON object
with ``jsonrpc: "2.0"``; requests are handled one at a time (their order in the trace is the
order they came in, as for a stdio server's stand-in).
"""

import json
import re
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from runner.runtime.mcphub import INTERNAL_ERROR, INVALID_REQUEST, McpHub
from runner.trace.strictjson import MAX_VALUE_DEPTH
from runner.trace.strictjson import loads as strict_loads

__all__ = ["MAX_BODY_BYTES", "MCP_HTTP_PATH", "McpHttpEndpoint", "route_of", "stand_in"]

MCP_HTTP_PATH = "/_sandbox-replay/mcp-http/"
"""The gateway route of the workflow's ``tools[I]`` URL server: this + ``I``."""
MAX_BODY_BYTES = 4 << 20
"""A message's bytes (a stdio server's line has the same bound, `runner.runtime.mcpproxy`)."""
SESSION_HEADER = "mcp-session-id"
MAX_SESSIONS = 1000  # sessions one episode opens (each initialize opens one)
PARSE_ERROR = -32700  # JSON-RPC 2.0, "Error object"
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,128}\Z")  # 2025-06-18: visible ASCII only
_INDEX = re.compile(r"(0|[1-9][0-9]{0,4})\Z")

HttpAnswer = Tuple[int, str, bytes, Dict[str, str]]  # status, content type, body, headers
Forward = Callable[[Dict[str, Any]], Dict[str, Any]]


def route_of(index: int) -> str:
    """The gateway path of the workflow's ``tools[index]`` URL server."""
    return "{}{}".format(MCP_HTTP_PATH, index)


def _json(status: int, value: Any, headers: Optional[Dict[str, str]] = None) -> HttpAnswer:
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return status, "application/json", body, dict(headers or {})


def _rpc_error(status: int, code: int, text: str, ident: Any = None) -> HttpAnswer:
    error = {"code": code, "message": text[:2048]}
    return _json(status, {"jsonrpc": "2.0", "id": ident, "error": error})


def _empty(status: int, headers: Optional[Dict[str, str]] = None) -> HttpAnswer:
    return status, "application/json", b"", dict(headers or {})


HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Protocol versions with the ``initialize`` handshake (MCP's published revisions)."""
FALLBACK_VERSION = "2025-06-18"
METHOD_NOT_FOUND = -32601


def stand_in(hub: McpHub, label: str, message: Dict[str, Any]) -> Dict[str, Any]:
    """A shadow run's answer to a protocol request of the URL server ``label`` (no server).

    ``initialize``: the client's protocol version when it is one of `HANDSHAKE_VERSIONS` (else
    `FALLBACK_VERSION`), capabilities ``tools`` only; ``ping``: ``{}``; ``tools/list``: the
    registry's tools of the entry (ids ``PREFIX.NAME``; an entry without a prefix: the ids
    without a dot that have no code here), annotated ``readOnlyHint`` from their effect
    class; anything else: "method not found".

    Returns:
        A JSON-RPC response to ``message``.
    """
    method, ident = message.get("method"), message.get("id")
    given = message.get("params")
    params: Dict[str, Any] = given if isinstance(given, dict) else {}
    server = hub.servers.get(label) or {}
    result: Any
    if method == "initialize":
        asked = params.get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else FALLBACK_VERSION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {
                "name": "sandbox-replay ({} of the workflow)".format(label),
                "version": "1",
            },
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": _listed(hub, str(server.get("prefix") or ""))}
    else:
        text = (
            "{}: a shadow run answers initialize, ping and tools/list of an MCP server URL".format(
                str(method)[:120]
            )
        )
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": METHOD_NOT_FOUND, "message": text}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _listed(hub: McpHub, prefix: str) -> Any:
    tools = []
    for tool_id in hub.registry.ids:
        if prefix and not tool_id.startswith(prefix + "."):
            continue
        tool = hub.registry.resolve(tool_id)
        if not prefix and ("." in tool_id or tool.func is not None):
            continue
        tools.append(
            {
                "name": tool_id[len(prefix) + 1 :] if prefix else tool_id,
                "description": tool.description,
                "inputSchema": tool.schema,
                "annotations": {"readOnlyHint": tool.effect in ("read", "pure")},
            }
        )
    return tools


MODERN_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
"""Request headers the host passes on to the server (the 2026-07-28 transport routes by them;
``MCP-Protocol-Version`` is sent in every era after the handshake)."""


def _modern_headers(headers: Dict[str, str]) -> Any:
    """The `MODERN_HEADERS` a request carries (checked), or the HTTP answer refusing one."""
    passed = {}
    for name in MODERN_HEADERS:
        value = headers.get(name)
        if value is None:
            continue
        if not _SESSION_ID.match(value):
            return _rpc_error(
                400, INVALID_REQUEST, "{} is 1-128 visible ASCII characters".format(name)
            )
        passed[name] = value
    return passed


def _unroutable(message: Dict[str, Any]) -> Optional[str]:
    """Why a client's message is neither a request the hub decides nor a notification, or None.

    A request's ``id`` is a string or an integer (MCP 2025-06-18, "Requests": not null); a
    message without one is passed on undecided, so its method must be a notification's
    (``notifications/...``). Else a ``tools/call`` with no id, or ``id: null`` (which a server
    may run as a request), reached the server past the hub (found in review).
    """
    method = message.get("method")
    if "id" in message:
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            return "a request's id is a string or an integer"
    elif isinstance(method, str) and not method.startswith("notifications/"):
        return "a message without an id is a notification: its method is notifications/..."
    return None


def _sessionless(method: Any, passed: Dict[str, str]) -> bool:
    """True for a request of the stateless era (MCP 2026-07-28: no ``initialize``, no session).

    That is its ``server/discover`` probe, or a message stamped with a version that has no
    handshake.
    """
    version = passed.get("mcp-protocol-version")
    return method == "server/discover" or (
        version is not None and version not in HANDSHAKE_VERSIONS
    )


class McpHttpEndpoint:
    """The episode's Streamable HTTP MCP endpoint (see the module docstring).

    Args:
        hub: the episode's hub (it knows the workflow's servers, their ``url`` among them).
        mode: ``shadow``, ``reproduce`` or ``record``.
        forward: ``(fields) -> answer``: sends ``mcp_request`` ``{server, session, message}``
            (or ``{server, session, close: true}``) to the host and returns its ``mcp_response``
            (``{response}`` or ``{error}``); None: nothing can be forwarded. ``session`` is
            this endpoint's id (an ``initialize`` carries the one it would open): the host
            keeps the server's own session id under it, and the sandbox never sees that one.
    """

    def __init__(self, hub: McpHub, mode: str, forward: Optional[Forward]) -> None:
        self.hub = hub
        self.mode = mode
        self.forward = forward
        self.sessions: Dict[str, str] = {}  # open session id -> server label
        self.opened = 0
        self._lock = threading.Lock()

    def answer(
        self, step_id: Optional[str], method: str, route: str, headers: Dict[str, str], raw: bytes
    ) -> HttpAnswer:
        """The HTTP answer to one request at ``route`` (under `MCP_HTTP_PATH`).

        Args:
            step_id: the program step running, or None (the request is refused, ``503``).
            method: the HTTP method.
            route: the path without its query.
            headers: the request's headers, lower-case names.
            raw: the body.
        """
        index = route[len(MCP_HTTP_PATH) :]
        server = self.hub.servers.get("tools[{}]".format(index)) if _INDEX.match(index) else None
        if server is None or not server.get("url"):
            return _rpc_error(404, INVALID_REQUEST, "no MCP server URL of the workflow is here")
        label = str(server["label"])
        if method == "GET":
            return _rpc_error(405, INVALID_REQUEST, "no server-to-client stream: POST messages")
        if method not in ("POST", "DELETE"):
            return _rpc_error(405, INVALID_REQUEST, "{} is not supported".format(method[:16]))
        if step_id is None:
            return _rpc_error(503, INTERNAL_ERROR, "no program step is running: refused")
        with self._lock:  # one at a time: the trace keeps the order they came in
            if method == "DELETE":
                return self._delete(label, headers)
            return self._post(step_id, label, headers, raw)

    # --- sessions -----------------------------------------------------------------------------

    def _session(self, label: str, headers: Dict[str, str]) -> Tuple[Optional[str], Any]:
        """``(session id, None)`` of a message's header, or ``(None, the HTTP answer)``."""
        value = headers.get(SESSION_HEADER)
        if value is None:
            return None, _rpc_error(400, INVALID_REQUEST, "no Mcp-Session-Id header: initialize")
        if not _SESSION_ID.match(value):
            return None, _rpc_error(
                400, INVALID_REQUEST, "Mcp-Session-Id is 1-128 visible ASCII characters"
            )
        if self.sessions.get(value) != label:
            return None, _rpc_error(404, INVALID_REQUEST, "no such session: initialize again")
        return value, None

    def _reserve(self, label: str) -> Optional[str]:
        """The id of the session an ``initialize`` opens (when it succeeds), or None: too many."""
        if self.opened >= MAX_SESSIONS:
            return None
        self.opened += 1
        return "sandbox-replay-{}-{}".format(label[len("tools[") : -1], self.opened)

    def _delete(self, label: str, headers: Dict[str, str]) -> HttpAnswer:
        session, refused = self._session(label, headers)
        if session is None:
            return refused  # type: ignore[no-any-return]
        del self.sessions[session]
        if self.mode == "record" and self.forward is not None:
            self.forward({"server": label, "session": session, "close": True})
        return _empty(204)

    # --- messages -----------------------------------------------------------------------------

    def _post(self, step_id: str, label: str, headers: Dict[str, str], raw: bytes) -> HttpAnswer:
        if len(raw) > MAX_BODY_BYTES:
            return _rpc_error(
                413, INVALID_REQUEST, "a message over {} bytes".format(MAX_BODY_BYTES)
            )
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _rpc_error(415, INVALID_REQUEST, "a message is Content-Type application/json")
        try:
            message = strict_loads(raw, max_depth=MAX_VALUE_DEPTH)
        except (ValueError, UnicodeDecodeError) as exc:
            return _rpc_error(400, PARSE_ERROR, "not JSON: {}".format(exc))
        if isinstance(message, list):
            return _rpc_error(400, INVALID_REQUEST, "one message per POST (no JSON-RPC batches)")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _rpc_error(400, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method, ident = message.get("method"), message.get("id")
        refused = _unroutable(message)
        if refused is not None:
            return _rpc_error(400, INVALID_REQUEST, refused)
        initialize = method == "initialize" and ident is not None
        passed = _modern_headers(headers)
        if isinstance(passed, tuple):
            return passed
        if initialize:  # the id is taken now: the host names its own session by it
            session: Optional[str] = self._reserve(label)
            if session is None:
                return _rpc_error(
                    400, INVALID_REQUEST, "more than {} sessions".format(MAX_SESSIONS), ident
                )
        elif SESSION_HEADER not in headers and _sessionless(method, passed):
            session = ""  # the stateless era (2026-07-28): no session at all
        else:
            session, refused = self._session(label, headers)
            if session is None:
                return refused  # type: ignore[no-any-return]
        if not isinstance(method, str) or ident is None:  # a notification, a response
            if self.mode == "record" and self.forward is not None and isinstance(method, str):
                self.forward(
                    {"server": label, "session": session, "message": message, "headers": passed}
                )
            return _empty(202)
        assert session is not None
        answer = self._request(step_id, label, session, message, passed)
        extra: Dict[str, str] = {}
        if initialize and isinstance(answer, dict) and "result" in answer:
            self.sessions[session] = label
            extra["Mcp-Session-Id"] = session
        return _json(200, answer, extra)

    def _request(
        self,
        step_id: str,
        label: str,
        session: str,
        message: Dict[str, Any],
        passed: Dict[str, str],
    ) -> Any:
        """The JSON-RPC response to one request: the hub's, after a forward when it says so."""
        exchange: Dict[str, Any] = {"server": label, "message": message}
        decided = self.hub.answer(step_id, exchange)
        if decided.get("forward") is True:
            response = self._forwarded(label, session, message, passed)
            decided = self.hub.answer(step_id, dict(exchange, response=response))
        return decided.get("answer")

    def _forwarded(
        self, label: str, session: str, message: Dict[str, Any], passed: Dict[str, str]
    ) -> Any:
        """The server's response to ``message``: through the host (``record``), else `stand_in`."""
        if self.mode != "record" or self.forward is None:
            return stand_in(self.hub, label, message)
        fields = {"server": label, "session": session, "message": message, "headers": passed}
        answer = self.forward(fields)
        response = answer.get("response") if isinstance(answer, dict) else None
        if isinstance(response, dict):
            return response
        problem = answer.get("error") if isinstance(answer, dict) else None
        text = "the host did not forward it: {}".format(str(problem or "no answer")[:500])
        return {"error": {"code": INTERNAL_ERROR, "message": text}}
