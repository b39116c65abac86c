"""``runner.sdk.record``'s view of MCP over Streamable HTTP: the exchanges with server URLs.

Standard library only, Python 3.9+ (``httpx2`` / ``httpx`` are imported by name, only when a
recording names a server URL and only if installed: `runner.sdk.httpxrecord`'s rule). In a
user's own process the agent's MCP client (the ``mcp`` package's Streamable HTTP client, the
OpenAI Agents SDK's ``MCPServerStreamableHttp``) posts JSON-RPC messages to the URLs a
workflow names (``tools: [{mcp: {url: ..., prefix: ...}}]``, `runner.sdk.mcphttp.url_servers`).
`attach` patches the default transports of those libraries (once per process, chained after
what is there: the recorder's own guard included) so that, while a recording is attached, each
``POST`` to such a URL is seen on its way:

- the request's body, one JSON-RPC message, is handed to the recording when it is a request
  (``method`` and ``id``; notifications are not calls): ``sink.request(label, message)``
  returns the call's index;
- the server's answer goes to the agent **unchanged** (the same bytes, as they arrive): a JSON
  answer is read first (the client reads it whole anyway), an event stream is passed on chunk
  by chunk while a copy is read (`runner.sdk.mcphttp.SseReader`) until the response with the
  request's id, which is handed over with ``sink.response(index, label, response)``.

The sink turns an exchange into a call line by the rule the sandbox's hub follows
(`runner.runtime.mcphub`, docs/trace-format.md "MCP traffic"): the stdio recording's
`runner.sdk.mcprecord.McpRecording`, which `attach_recorder` gives a recorder (one rule for
both transports). Nothing here raises into the agent: a fault of the capture is passed to
``sink.failed(exc)`` and the exchange goes on as if nobody watched.

Which URLs are MCP servers: the workflow file given to the recorder (``workflow=``), the one
``reproduce`` runs the trace with (its ``tools[i]`` labels and prefixes are what the served
calls are matched by). A workflow file is YAML, which the standard library cannot read:
PyYAML (a dependency of sandbox-replay) is imported by name, only when the file's text names
an MCP ``url``; where it is missing, entering the recorder warns that the traffic is not
recorded (`NO_YAML`).
"""

import importlib
import importlib.util
import json
import re
import threading
import warnings
from typing import Any, Dict, List, Optional, Tuple

from runner.sdk import mcprecord
from runner.sdk.mcphttp import SseReader, answers, server_of, url_servers

__all__ = [
    "LIBRARIES",
    "attach",
    "attach_recorder",
    "detach",
    "detach_recorder",
    "workflow_url_servers",
]

LIBRARIES = ("httpx2", "httpx")
MAX_REQUEST_BYTES = 4 << 20  # a message larger than this is passed on, not recorded

NO_YAML = (
    "runner.sdk.record does not record MCP traffic here: the workflow names an MCP server "
    "URL, and reading the workflow file needs PyYAML, which this process cannot import"
)
# a `mcp:` mapping holding a `url:` (flow or block style), read as text before any YAML
_MCP_URL = re.compile(r"\bmcp\s*:\s*(\{[^}]*\burl\s*:|\n\s+url\s*:)")

_ACTIVE: List[Tuple[Any, List[Dict[str, Any]]]] = []  # (sink, servers), innermost last
_LOCK = threading.Lock()
_PATCHED: Dict[str, bool] = {}


def attach(sink: Any, servers: List[Dict[str, Any]]) -> Optional[Tuple[Any, Any]]:
    """Record the exchanges with ``servers``' URLs in ``sink`` until `detach`.

    Args:
        sink: has ``request(label, message) -> index or None``, ``response(index, label,
            response)`` and ``failed(exc)``.
        servers: `runner.sdk.mcphttp.url_servers` of the recorder's workflow.

    Returns:
        The token for `detach`, or None: no server URL, or no HTTP library to watch.
    """
    servers = [s for s in servers if isinstance(s, dict) and s.get("url")]
    if not servers:
        return None
    patched = _install()
    if not patched:
        return None
    token = (sink, servers)
    with _LOCK:
        _ACTIVE.append(token)
    return token


def workflow_url_servers(content: str) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The MCP server URLs a workflow file's text names, and why none could be read.

    `runner.sdk.mcprecord.workflow_servers` for ``url`` entries.
    """
    return mcprecord.workflow_servers(content, _MCP_URL, url_servers, NO_YAML)


def attach_recorder(recorder: Any) -> Optional[Tuple[Any, Any]]:
    """Record ``recorder``'s exchanges with its workflow's MCP server URLs.

    The call lines are made by `runner.sdk.mcprecord.McpRecording`, the stdio recording's
    (one rule for both transports, the sandbox hub's).

    Returns:
        The token for `detach_recorder`, or None: its workflow names no URL (or one that
        cannot be read, or no HTTP library is installed: a `RuntimeWarning` says which).
    """
    servers, problem = workflow_url_servers(str(recorder.workflow.get("content") or ""))
    if problem is not None:
        warnings.warn(problem, RuntimeWarning, stacklevel=3)
    if not servers:
        return None
    return attach(mcprecord.McpRecording(recorder, servers), servers)


def detach_recorder(token: Optional[Tuple[Any, Any]]) -> None:
    """`detach`, then finish the token's recording (an `attach_recorder` token, or None).

    Its unanswered calls are recorded as errors and what was not recorded is said once
    (`runner.sdk.mcprecord.detach`).
    """
    detach(token)
    if token is not None:
        mcprecord.detach(token[0])


def detach(token: Optional[Tuple[Any, Any]]) -> None:
    """Stop recording for ``token`` (an `attach` result; None does nothing)."""
    if token is None:
        return
    with _LOCK:
        if token in _ACTIVE:
            _ACTIVE.remove(token)


def _watching(url: str) -> Optional[Tuple[Any, str]]:
    with _LOCK:
        active = list(_ACTIVE)
    for sink, servers in reversed(active):
        server = server_of(url, servers)
        if server is not None:
            return sink, str(server["label"])
    return None


def _install() -> List[str]:
    patched = []
    with _LOCK:
        for name in LIBRARIES:
            if not _PATCHED.get(name):
                try:
                    if importlib.util.find_spec(name) is None:
                        continue
                    _patch(importlib.import_module(name))
                except (ImportError, AttributeError):
                    continue
                _PATCHED[name] = True
            patched.append(name)
    return patched


class _Exchange:
    """One request on its way: what was recorded of it, what its answer must still give."""

    def __init__(self, sink: Any, label: str, index: int, ident: Any) -> None:
        self.sink, self.label, self.index, self.ident = sink, label, index, ident
        self.done = False
        self.reader = SseReader()

    def answer(self, message: Any) -> None:
        if self.done or not answers(message, self.ident):
            return
        self.done = True
        self.sink.response(self.index, self.label, message)

    def chunk(self, data: bytes) -> None:
        if self.done:
            return
        try:
            for message in self.reader.feed(data):
                self.answer(message)
        except Exception as exc:  # never into the agent
            self.done = True
            self.sink.failed(exc)


def _watched(request: Any) -> Optional[Tuple[Any, str]]:
    """``(sink, label)`` when ``request`` is a POST to a watched server URL, else None.

    Only such a request has its body read before it is sent: any other request of the
    process goes out as the agent made it (a streamed upload read ahead whole was held in
    memory, found in review).
    """
    return _watching(str(request.url)) if _ACTIVE and request.method == "POST" else None


def _begin(request: Any, found: Optional[Tuple[Any, str]]) -> Optional[_Exchange]:
    """The exchange to watch for ``request`` (its body read), or None: not an MCP request."""
    if found is None:
        return None
    sink, label = found
    try:
        content = request.content
        if len(content) > MAX_REQUEST_BYTES:
            return None
        message = json.loads(content.decode("utf-8"))
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return None  # a notification (or a response of the agent's): no call
        index = sink.request(label, message)
        if index is None:
            return None
        return _Exchange(sink, label, index, message["id"])
    except Exception as exc:  # a body that is no message, a fault of the sink's
        sink.failed(exc)
        return None


def _is_stream(response: Any) -> bool:
    kind = str(response.headers.get("content-type", "")).split(";")[0].strip().lower()
    return kind == "text/event-stream"


def _finish_json(exchange: _Exchange, content: bytes) -> None:
    try:
        exchange.answer(json.loads(content.decode("utf-8")))
    except Exception as exc:
        exchange.sink.failed(exc)


def _patch(lib: Any) -> None:
    sync_original = lib.HTTPTransport.handle_request
    async_original = lib.AsyncHTTPTransport.handle_async_request

    class _Stream(lib.SyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, exchange: _Exchange) -> None:
            self._inner, self._exchange = inner, exchange

        def __iter__(self) -> Any:
            for chunk in self._inner:
                self._exchange.chunk(chunk)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    class _AsyncStream(lib.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, exchange: _Exchange) -> None:
            self._inner, self._exchange = inner, exchange

        async def __aiter__(self) -> Any:
            async for chunk in self._inner:
                self._exchange.chunk(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    def _passed(response: Any, exchange: _Exchange, stream_class: type) -> Any:
        return lib.Response(
            response.status_code,
            headers=response.headers,
            stream=stream_class(response.stream, exchange),
            extensions=response.extensions,
        )

    def handle_request(self: Any, request: Any) -> Any:
        found = _watched(request)
        if found is not None:
            request.read()
        exchange = _begin(request, found)
        response = sync_original(self, request)
        if exchange is None:
            return response
        if _is_stream(response):
            return _passed(response, exchange, _Stream)
        content = response.read()
        _finish_json(exchange, content)
        return response

    async def handle_async_request(self: Any, request: Any) -> Any:
        found = _watched(request)
        if found is not None:
            await request.aread()
        exchange = _begin(request, found)
        response = await async_original(self, request)
        if exchange is None:
            return response
        if _is_stream(response):
            return _passed(response, exchange, _AsyncStream)
        content = await response.aread()
        _finish_json(exchange, content)
        return response

    handle_request.__wrapped__ = sync_original  # type: ignore[attr-defined]
    handle_async_request.__wrapped__ = async_original  # type: ignore[attr-defined]
    lib.HTTPTransport.handle_request = handle_request
    lib.AsyncHTTPTransport.handle_async_request = handle_async_request
