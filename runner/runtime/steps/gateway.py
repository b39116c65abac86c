"""The model gateway: the HTTP APIs of the official SDKs, served on the sandbox's loopback.

Standard library only, Python 3.9+. A workflow with program steps gets one `Gateway`: an
``http.server`` in a daemon thread on ``127.0.0.1`` and an ephemeral port, inside the
container's own network namespace (``network_mode`` stays ``none``: only ``lo`` exists). The
runtime points the SDKs at it (`Gateway.environment`: ``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL``, placeholder keys that are not keys, ``OPENAI_AGENTS_DISABLE_TRACING``)
and the outbound-destination log leaves it out (`runner.runtime.egress.audit.set_gateway`).

Routes (a query string is kept in the path recorded, ignored for routing):

| method, path                              | what                                         |
|-------------------------------------------|----------------------------------------------|
| POST ``/v1/chat/completions``             | OpenAI Chat Completions (``stream`` too)     |
| POST ``/v1/responses``                    | OpenAI Responses (``stream`` too)            |
| POST ``/v1/messages``                     | Anthropic Messages (``stream`` too)          |
| POST ``/v1/embeddings``                   | OpenAI Embeddings                            |
| POST ``/v1/moderations``                  | OpenAI Moderations                           |
| POST ``/v1/messages/count_tokens``        | Anthropic token counting                     |
| GET ``/v1/responses/{id}``                | a response this run received (the host keeps |
|                                           | them; request ``{"response_id"}``; no stream)|
| POST ``…/traces/ingest``                  | the Agents SDK's trace export: answered here |
| POST ``/_sandbox-replay/mcp``             | the MCP stand-in (`runner.runtime.mcphub`)   |
| ``/_sandbox-replay/mcp-http/I``           | the workflow's ``tools[I]`` MCP server URL   |
|                                           | (`runner.runtime.mcphttp`)                   |
| anything else                             | 404 in the API's error shape                 |

A model request must be a JSON object (the strict decoder: no NaN, no duplicate keys, nested
at most `MAX_REQUEST_DEPTH` levels; at most `MAX_REQUEST_BYTES`), else it is answered 400; it
is sent to the host over the channel (`runner.runtime.steps.apicall`), which checks it (the
gateway allow-list, `runner.providers.allowlist`, runs there, where the key is), meters,
forwards and records it; the host's answer is written back as it came: the raw body
(for a stream the raw event stream, ``text/event-stream``) and the HTTP status. An answer with
no body (a ceiling refused the call, the deadline passed, no model is configured) becomes the
API's own error shape (`error_body`: OpenAI ``{"error": {...}}``, Anthropic ``{"type": "error",
"error": {...}}``) with 429 for a ceiling. Every answer that is not a success carries
``x-should-retry: false``: the host has retried already, and a refusal will not change.
What the gateway answers itself (trace export, unknown paths, bad requests, requests outside a
program step) is reported as a ``gateway_note`` ``{kind, method, path, bytes, status}``.
"""

import contextlib
import json
import re
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple, Union

from runner.runtime.mcphttp import MCP_HTTP_PATH, HttpAnswer
from runner.runtime.mcphub import MCP_PATH
from runner.runtime.replay.calls import Caller
from runner.runtime.steps import apicall
from runner.trace.strictjson import MAX_VALUE_DEPTH
from runner.trace.strictjson import loads as strict_loads
from runner.wire.env import ENV_GATEWAY

MAX_REQUEST_BYTES = 8 * 1024 * 1024
# A request is a value the runtime records (inside a call line, a protocol message and, in
# reproduce, the start message's recorded calls): the depth every recorded value keeps to.
MAX_REQUEST_DEPTH = MAX_VALUE_DEPTH
PLACEHOLDER_KEY = "sandbox-replay-placeholder-not-a-key"
ROUTES = {
    "/v1/chat/completions": "chat_completions",
    "/chat/completions": "chat_completions",
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/messages": "messages",
    "/messages": "messages",
    "/v1/embeddings": "embeddings",
    "/embeddings": "embeddings",
    "/v1/moderations": "moderations",
    "/moderations": "moderations",
    "/v1/messages/count_tokens": "count_tokens",
    "/messages/count_tokens": "count_tokens",
}
# ``GET /v1/responses/{id}``: the id as OpenAI writes it (``resp_…``), nothing else in the path.
RETRIEVE = re.compile(r"(?:/v1)?/responses/([A-Za-z0-9_-]{1,256})\Z")
PASSED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
# The HTTP status of an answer without a body, by the error class the host named.
STATUS_OF = {
    "CeilingReached": 429,
    "ReplayDivergence": 400,
    "ReplayRefused": 400,
    "ProviderTimeout": 504,
    "ProviderUnavailable": 502,
}
_ERROR_TYPE = {
    400: ("invalid_request_error", "invalid_request_error"),
    404: ("not_found_error", "not_found_error"),
    405: ("invalid_request_error", "invalid_request_error"),
    411: ("invalid_request_error", "invalid_request_error"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("insufficient_quota", "rate_limit_error"),
    502: ("server_error", "api_error"),
    503: ("server_error", "overloaded_error"),
    504: ("server_error", "api_error"),
}

Answer = Tuple[int, str, bytes]  # status, content type, body


def error_body(api: Optional[str], status: int, message: str, param: Optional[str] = None) -> bytes:
    """An error body in the API's own shape (OpenAI unless ``api`` is an Anthropic one).

    ``param`` is the request field at fault (OpenAI's ``param``; Anthropic's shape has no
    such field, the message names it).
    """
    openai_type, anthropic_type = _ERROR_TYPE.get(status, ("server_error", "api_error"))
    if api in ("messages", "count_tokens"):
        value: Dict[str, Any] = {
            "type": "error",
            "error": {"type": anthropic_type, "message": message},
        }
    else:
        value = {"error": {"message": message, "type": openai_type, "param": param, "code": None}}
    return json.dumps(value).encode("utf-8")


def parse_request(raw: bytes) -> Dict[str, Any]:
    """A model request body: a JSON object, decoded by the project's strict decoder.

    Nesting is bounded by `MAX_REQUEST_DEPTH` (checked on the text before the parser runs):
    the request is recorded inside a call line and a ``gateway_request`` message, whose
    wrappers must stay within the host's limit for a whole line (`runner.trace.strictjson.
    MAX_DEPTH`); a request nested 99 deep used to pass here and make the run's own call line
    fail on the host (``crashed``), one 1,000 deep killed the handler thread.

    Raises:
        ValueError: not UTF-8, not JSON, nested deeper than `MAX_REQUEST_DEPTH`, NaN/Infinity,
            a duplicate key or not an object (a `runner.trace.strictjson.StrictJSONError`).
    """
    value = strict_loads(raw, max_depth=MAX_REQUEST_DEPTH)
    if not isinstance(value, dict):
        raise ValueError("the request body is not a JSON object")
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks socket.getfqdn (a reverse lookup): not needed here, and
        # it would be the runtime's own "egress" in the outbound-destination log
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])


class Gateway:
    """The gateway of one episode.

    Args:
        caller: the episode's caller (model requests become its calls).
        note: ``note(kind, **fields)``: reports what the gateway answered itself.
    """

    def __init__(self, caller: Caller, note: Callable[..., None]) -> None:
        self.caller = caller
        self.note = note
        self._step: Optional[str] = None
        self._lock = threading.Lock()
        self.mcp: Any = None  # the episode's `runner.runtime.mcphub.McpHub`, when it has one
        self.mcp_http: Any = None  # its `runner.runtime.mcphttp.McpHttpEndpoint`, when it has one
        self.server = _Server(("127.0.0.1", 0), _handler(self))
        self.host, self.port = "127.0.0.1", int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="sandbox-replay-gateway", daemon=True
        )

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread.start()

    def environment(self) -> Dict[str, str]:
        """Environment variables that point the official SDKs at this gateway."""
        address = "http://{}:{}".format(self.host, self.port)
        return {
            "OPENAI_BASE_URL": address + "/v1",
            "ANTHROPIC_BASE_URL": address,
            "OPENAI_API_KEY": PLACEHOLDER_KEY,
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            ENV_GATEWAY: "{}:{}".format(self.host, self.port),
        }

    def activate(self, step_id: str) -> None:
        """Model requests from now on belong to program step ``step_id``."""
        with self._lock:
            self._step = step_id

    def deactivate(self, step_id: str) -> None:
        """Program step ``step_id`` ended: later requests are refused."""
        with self._lock:
            if self._step == step_id:
                self._step = None

    def answer(
        self, method: str, path: str, headers: Dict[str, str], raw: bytes
    ) -> Union[Answer, HttpAnswer]:
        """The HTTP answer to one request (see the module docstring)."""
        route, _, query = path.partition("?")
        route = route.rstrip("/") or "/"
        api = ROUTES.get(route)
        if route.startswith(MCP_HTTP_PATH) and self.mcp_http is not None:
            with self._lock:
                step_id = self._step
            return self.mcp_http.answer(step_id, method, route, headers, raw)  # type: ignore[no-any-return]
        if route == MCP_PATH and self.mcp is not None and method == "POST":
            return self._mcp(raw)
        retrieved = RETRIEVE.match(route) if api is None else None
        if retrieved is not None:
            api = "responses_retrieve"
        if route.endswith("/traces/ingest"):
            self.note("tracing_ingest", method=method, path=path[:512], bytes=len(raw), status=204)
            return 204, "application/json", b""
        if api is None:
            self.note("unsupported", method=method, path=path[:512], bytes=len(raw), status=404)
            guess = "messages" if "/messages" in route else None
            return self._error(guess, 404, "the sandbox's model gateway has no {}".format(route))
        if method != ("GET" if retrieved is not None else "POST"):
            self.note("unsupported", method=method, path=path[:512], bytes=len(raw), status=405)
            return self._error(api, 405, "{} {} is not supported".format(method, route))
        with self._lock:
            step_id = self._step
        if step_id is None:
            self.note("outside_step", method=method, path=path[:512], bytes=len(raw), status=503)
            return self._error(api, 503, "no program step is running: the request is refused")
        if retrieved is not None:
            if "stream=true" in query.lower():
                self.note("unsupported", method=method, path=path[:512], bytes=0, status=400)
                return self._error(api, 400, "a retrieval is answered whole, not streamed")
            request: Dict[str, Any] = {"response_id": retrieved.group(1)}
        else:
            try:
                request = parse_request(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                self.note(
                    "invalid_request", method=method, path=path[:512], bytes=len(raw), status=400
                )
                return self._error(api, 400, "the request body is refused: {}".format(exc))
        passed = {k: v[:256] for k, v in headers.items() if k in PASSED_HEADERS}
        response = apicall.call_api(self.caller, step_id, api, path[:2048], request, passed)
        return self._answer(api, response)

    def _mcp(self, raw: bytes) -> Answer:
        """An MCP stand-in's exchange, answered by the hub (as JSON; 503 outside a step)."""
        with self._lock:
            step_id = self._step
        if step_id is None:
            self.note("outside_step", method="POST", path=MCP_PATH, bytes=len(raw), status=503)
            return 503, "application/json", b'{"error": "no program step is running"}'
        try:
            exchange = parse_request(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            self.note("invalid_request", method="POST", path=MCP_PATH, bytes=len(raw), status=400)
            return 400, "application/json", json.dumps({"error": str(exc)[:300]}).encode("utf-8")
        answer = self.mcp.answer(step_id, exchange)
        return 200, "application/json", json.dumps(answer, separators=(",", ":")).encode("utf-8")

    def _answer(self, api: str, response: Dict[str, Any]) -> Answer:
        from runner.runtime.replay.callrecords import raw_body

        error = response.get("error") if isinstance(response.get("error"), dict) else None
        status = response.get("status")
        body = raw_body(response)
        if body is None:
            cls = str((error or {}).get("class") or "ProviderError")
            if not isinstance(status, int) or status < 400:
                status = STATUS_OF.get(cls, 500)
            text = "{}: {}".format(cls, (error or {}).get("message", "no answer"))
            param = (error or {}).get("param")
            return (
                status,
                "application/json",
                error_body(api, status, text, param if isinstance(param, str) else None),
            )
        if not isinstance(status, int) or not 100 <= status <= 599:
            status = 200
        content_type = response.get("content_type")
        if not isinstance(content_type, str) or not content_type:
            content_type = "application/json"
        return status, content_type, body

    @staticmethod
    def _error(api: Optional[str], status: int, message: str) -> Answer:
        return status, "application/json", error_body(api, status, message)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def _handler(gateway: Gateway) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def _serve(self) -> None:
            try:
                self._serve_one()
            except Exception as exc:  # never a handler thread dying with no answer
                message = "the gateway failed: {}".format(type(exc).__name__)
                gateway.note("gateway_error", method=self.command, path=self.path[:512], status=500)
                with contextlib.suppress(OSError):  # the program closed the connection
                    self._write((500, "application/json", error_body(None, 500, message)), True)

        def _serve_one(self) -> None:
            try:
                raw = self._body()
            except ValueError as exc:
                status, length_error = (413, str(exc)) if "large" in str(exc) else (411, str(exc))
                self._write(
                    (status, "application/json", error_body(None, status, length_error)), True
                )
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._write(gateway.answer(self.command, self.path, headers, raw), False)

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return self._chunked()
            length_text = self.headers.get("Content-Length")
            if length_text is None:
                return b""
            length = int(length_text)
            if length < 0 or length > MAX_REQUEST_BYTES:
                raise ValueError("request too large: {} bytes".format(length))
            return self.rfile.read(length)

        def _chunked(self) -> bytes:
            data = bytearray()
            while True:
                size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline(64)
                    return bytes(data)
                if len(data) + size > MAX_REQUEST_BYTES:
                    raise ValueError("request too large: over {} bytes".format(MAX_REQUEST_BYTES))
                data += self.rfile.read(size)
                self.rfile.readline(64)

        def _write(self, answer: Union[Answer, HttpAnswer], close: bool) -> None:
            status, content_type, body = answer[:3]
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (answer[3] if len(answer) > 3 else {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            if status >= 400:
                self.send_header("x-should-retry", "false")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(body)

        do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the program's stderr is not the gateway's log

    return Handler
