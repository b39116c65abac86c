"""The host's side of a workflow's MCP server URLs: ``record`` forwards their messages.

A workflow's ``tools: [{mcp: {url: ...}}]`` entry names a Streamable HTTP MCP server. In the
sandbox, the agent's client reaches the runtime's endpoint (`runner.runtime.mcphttp`), where
the hub decides each request; in ``record`` (live by design, every tool runs for real) what it
does not deny comes here as an ``mcp_request`` ``{id, server, session, message | close}``,
and `McpForwarder` posts it to the URL that **the host's copy of the workflow** declares for
``server`` (``tools[i]``): the one destination the workflow allows, whatever the sandbox says.
The only request headers the sandbox chooses are the transport's own routing headers
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``: visible ASCII, checked); an empty
``session`` is a message of the stateless era (MCP 2026-07-28, no ``initialize``).
Nothing else is contacted: no redirect is followed (a redirect could lead anywhere), the
environment's proxy variables are ignored (as for the model providers,
`runner.providers.httpcall`). In every other mode nothing is forwarded: the answer says so
(``reproduce`` serves the trace; a shadow run contacts no server).

The Streamable HTTP transport as a client speaks it (MCP specification 2025-06-18,
"Transports"): ``POST`` one JSON-RPC message with ``Accept: application/json,
text/event-stream``; the answer to a request is either one JSON object or an event stream
whose ``data`` events are JSON-RPC messages, read until the response with the request's id
(notifications and requests of the server's before it are dropped: they are not recorded and
cannot be answered from here); ``202`` accepts a notification. The server's ``Mcp-Session-Id``
(from the ``initialize`` answer) and the negotiated ``MCP-Protocol-Version`` are kept here under
the sandbox endpoint's own session id and sent with every later message of that session: the
sandbox never sees the server's session id. ``close`` ends the session with ``DELETE``; so does
`McpForwarder.close` for every session still open when the episode ends.

Everything the server answers is hostile too: at most `MAX_RESPONSE_BYTES`, strict JSON; a
failure (unreachable, an HTTP error, no response with the id) is an ``error`` the endpoint
turns into a JSON-RPC error, which the hub records as the call's error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

import httpx

from runner.hostlog import get_logger
from runner.sdk.mcphttp import StreamTooLarge, answers, sse_messages, url_servers
from runner.trace.strictjson import loads as strict_loads

__all__ = ["MAX_RESPONSE_BYTES", "McpForwarder"]

log = get_logger(__name__)

MAX_RESPONSE_BYTES = 16 << 20
"""Bytes of one answer of a server (the runtime's bound for an MCP message it is handed)."""
TIMEOUT_S = 60.0
"""Seconds to connect, and between two reads of an answer (a tool may work a while)."""
MAX_SESSIONS = 1000
CLOSE_S = 10.0
"""Seconds `McpForwarder.close` spends ending the sessions still open, all together."""
_SESSION = re.compile(r"[\x21-\x7e]{1,128}\Z")
_LABEL = re.compile(r"tools\[(0|[1-9][0-9]{0,4})\]\Z")
_ACCEPT = "application/json, text/event-stream"


_PASSED = {
    "mcp-protocol-version": "MCP-Protocol-Version",
    "mcp-method": "Mcp-Method",
    "mcp-name": "Mcp-Name",
}


def _passed(headers: Any) -> dict[str, str]:
    """The request headers the sandbox's endpoint passes on, checked.

    The 2026-07-28 transport's routing headers and the protocol version: no other name,
    visible ASCII only.
    """
    if headers is None:
        return {}
    if not isinstance(headers, dict) or len(headers) > len(_PASSED):
        raise _Refused("headers must be an object of the MCP routing headers")
    found = {}
    for name, value in headers.items():
        if name not in _PASSED or not isinstance(value, str) or not _SESSION.match(value):
            raise _Refused(f"header {str(name)[:40]!r} is not passed on")
        found[_PASSED[name]] = value
    return found


class _Refused(Exception):
    """Not forwarded, or no usable answer: the text goes back to the sandbox."""


class McpForwarder:
    """Forwards one episode's MCP messages to the workflow's server URLs (``record`` only).

    Args:
        workflow: the normalised workflow the run was given (the host's copy).
        live: the run is ``record``'s: forward; else refuse every message.
        transport: an httpx transport (tests); None: the network.
    """

    def __init__(
        self,
        workflow: Mapping[str, Any],
        *,
        live: bool,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.urls = {str(s["label"]): str(s["url"]) for s in url_servers(dict(workflow))}
        self.live = live
        self._transport = transport
        self._client: httpx.Client | None = None
        self._deadline: float | None = None  # monotonic end of the current `reply`
        # (server, sandbox session) -> {"id": server's session id or None, "version": ...}
        self.sessions: dict[tuple[str, str], dict[str, str | None]] = {}

    def reply(self, message: Mapping[str, Any], remaining_s: float | None = None) -> dict[str, Any]:
        """The ``mcp_response`` to one ``mcp_request`` (never raises for the server's failure).

        Args:
            message: the sandbox's ``mcp_request``.
            remaining_s: seconds the run has left (None: `TIMEOUT_S` between reads only). The
                exchange ends then, an error answer: the episode driver calls this where it
                checks the run's deadline, and a server that keeps an event stream open with
                keep-alives would otherwise hold the run past it (found in review).
        """
        limit = TIMEOUT_S if remaining_s is None else max(0.0, remaining_s)
        self._deadline = time.monotonic() + limit if remaining_s is not None else None
        ident = message.get("id")
        answer: dict[str, Any] = {
            "type": "mcp_response",
            "id": ident if isinstance(ident, str) and len(ident) <= 64 else "",
        }
        try:
            answer.update(self._forward(message))
        except _Refused as exc:
            answer["error"] = str(exc)[:2000]
        return answer

    def _forward(self, message: Mapping[str, Any]) -> dict[str, Any]:
        server, session = message.get("server"), message.get("session")
        if not isinstance(server, str) or not _LABEL.match(server) or server not in self.urls:
            raise _Refused("no MCP server URL of the workflow is that server")
        if not isinstance(session, str) or (session and not _SESSION.match(session)):
            raise _Refused("session must be empty or 1-128 visible ASCII characters")
        passed = _passed(message.get("headers"))
        if not self.live:
            raise _Refused("an MCP server's URL is contacted only by record")
        key = (server, session)
        if message.get("close") is True:
            self._delete(key)
            return {}
        body = message.get("message")
        if not isinstance(body, dict) or not isinstance(body.get("method"), str):
            raise _Refused("message must be a JSON-RPC request or notification")
        ident = body.get("id", "")
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            raise _Refused("a request's id is a string or an integer")
        if "id" not in body and not body["method"].startswith("notifications/"):
            raise _Refused("a message without an id is a notifications/... method")
        initialize = body["method"] == "initialize" and "id" in body
        if not session:  # the stateless era (2026-07-28): no session to keep
            return self._post(key, body, False, passed)
        if initialize:
            if len(self.sessions) >= MAX_SESSIONS:
                raise _Refused(f"more than {MAX_SESSIONS} MCP sessions")
            self.sessions[key] = {"id": None, "version": None}
        elif key not in self.sessions:
            raise _Refused("no such session (initialize first)")
        return self._post(key, body, initialize, passed)

    # --- HTTP ---------------------------------------------------------------------------------

    def client(self) -> httpx.Client:
        """The episode's HTTP client (made on first use)."""
        if self._client is None:
            self._client = httpx.Client(
                timeout=httpx.Timeout(TIMEOUT_S),
                follow_redirects=False,
                trust_env=False,
                transport=self._transport,
            )
        return self._client

    def _headers(self, key: tuple[str, str], passed: dict[str, str]) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": _ACCEPT, **passed}
        state = self.sessions.get(key) or {}
        if state.get("id"):
            headers["Mcp-Session-Id"] = str(state["id"])
        if state.get("version"):
            headers["MCP-Protocol-Version"] = str(state["version"])
        return headers

    def _post(
        self, key: tuple[str, str], body: dict[str, Any], initialize: bool, passed: dict[str, str]
    ) -> dict[str, Any]:
        url = self.urls[key[0]]
        # ASCII: a lone surrogate the sandbox escaped stays escaped (UTF-8 text cannot hold it)
        data = json.dumps(body, separators=(",", ":")).encode("ascii")
        try:
            with self.client().stream(
                "POST",
                url,
                content=data,
                headers=self._headers(key, passed),
                timeout=self._timeout(),
            ) as response:
                if "id" not in body:  # a notification: accepted (202) or not, nothing to record
                    return {}
                if response.status_code >= 300:
                    raise _Refused(f"the MCP server answered HTTP {response.status_code}")
                found = self._response(response, body["id"])
                if initialize:
                    self._opened(key, response, found)
        except httpx.HTTPError as exc:
            log.info("mcp_forward_failed", server=key[0], problem=type(exc).__name__)
            raise _Refused(f"the MCP server did not answer: {type(exc).__name__}") from None
        return {"response": found}

    def _timeout(self) -> httpx.Timeout:
        """`TIMEOUT_S` between reads, or less: what is left of the current `reply`."""
        if self._deadline is None:
            return httpx.Timeout(TIMEOUT_S)
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _Refused("the run's time is up: not sent to the MCP server")
        return httpx.Timeout(min(TIMEOUT_S, left))

    def _chunks(self, response: httpx.Response) -> Any:
        """The answer's bytes as they arrive, until the current `reply`'s deadline."""
        for chunk in response.iter_bytes():
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise _Refused("the MCP server did not answer within the run's time")
            yield chunk

    def _opened(
        self, key: tuple[str, str], response: httpx.Response, found: dict[str, Any]
    ) -> None:
        session = response.headers.get("mcp-session-id")
        result = found.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.sessions[key] = {
            "id": session if isinstance(session, str) and _SESSION.match(session) else None,
            "version": version if isinstance(version, str) and len(version) <= 64 else None,
        }

    def _response(self, response: httpx.Response, ident: Any) -> dict[str, Any]:
        """The JSON-RPC response with id ``ident`` in a JSON or event-stream answer."""
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            try:
                for message in sse_messages(self._chunks(response), MAX_RESPONSE_BYTES):
                    if answers(message, ident):
                        return message  # type: ignore[no-any-return]
            except StreamTooLarge as exc:
                raise _Refused(f"the MCP server's answer: {exc}") from None
            raise _Refused("the MCP server's event stream ended without the response")
        raw = bytearray()
        for chunk in self._chunks(response):
            raw += chunk
            if len(raw) > MAX_RESPONSE_BYTES:
                raise _Refused(f"the MCP server's answer is over {MAX_RESPONSE_BYTES} bytes")
        try:
            message = strict_loads(bytes(raw))
        except (ValueError, UnicodeDecodeError):
            raise _Refused("the MCP server's answer is not JSON") from None
        if not answers(message, ident):
            raise _Refused("the MCP server's answer is not the JSON-RPC response to the request")
        return message  # type: ignore[no-any-return]

    def _delete(self, key: tuple[str, str]) -> None:
        state = self.sessions.pop(key, None)
        if not state or not state.get("id"):
            return
        try:
            self.client().delete(
                self.urls[key[0]], headers=self._headers_of(state), timeout=self._timeout()
            )
        except (httpx.HTTPError, _Refused) as exc:  # a courtesy: never an error
            log.info("mcp_session_close_failed", server=key[0], problem=type(exc).__name__)

    @staticmethod
    def _headers_of(state: dict[str, str | None]) -> dict[str, str]:
        headers = {"Mcp-Session-Id": str(state["id"])}
        if state.get("version"):
            headers["MCP-Protocol-Version"] = str(state["version"])
        return headers

    def close(self) -> None:
        """End the sessions still open (``DELETE``, within `CLOSE_S` in all) and the client.

        Bounded: the sandbox opens up to `MAX_SESSIONS`, and a server slow to answer each
        ``DELETE`` would hold the episode's end for as many times `TIMEOUT_S` (review).
        """
        self._deadline = time.monotonic() + CLOSE_S
        for key in list(self.sessions):
            self._delete(key)
        if self._client is not None:
            self._client.close()
            self._client = None
