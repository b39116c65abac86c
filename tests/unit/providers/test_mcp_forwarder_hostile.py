"""The host's MCP forwarder (runner/providers/mcphttp.py) against hostile sandboxes and servers
(review): what it posts, where, for how long, and what it never does (redirects, proxies).
The loopback server is the endpoint tests' (tests/unit/runtime/test_mcp_http_endpoint.py)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runner.providers.mcphttp import McpForwarder
from tests.unit.runtime.test_mcp_http_endpoint import McpServer


@pytest.fixture
def server() -> Any:
    found = McpServer()
    yield found
    found.close()


def test_the_forwarder_passes_on_no_undecided_call(server: McpServer) -> None:
    """The host's own check of the same rule: a call without an id, or with a null one, is
    never posted (the sandbox's endpoint refuses it first)."""
    forwarder = McpForwarder({"tools": [{"mcp": {"url": server.url}}]}, live=True)
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "wipe"}}
    try:
        for body in (call, dict(call, id=None)):
            answer = forwarder.reply(
                {"id": "m1", "server": "tools[0]", "session": "", **{"message": body}}
            )
            assert "error" in answer and "id" in answer["error"], answer
    finally:
        forwarder.close()
    assert server.log == []


class _Trickle(BaseHTTPRequestHandler):
    """A server whose answer is an event stream of keep-alive comments that never ends."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            while True:  # a comment every 0.2 s: no read ever times out
                self.wfile.write(b": ping\n\n")
                self.wfile.flush()
                threading.Event().wait(0.2)
        except OSError:
            return

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_that_never_ends_its_stream_is_cut_at_the_runs_deadline() -> None:
    """Review: the forwarder read an event stream until 16 MiB or 60 s of silence, inside the
    episode driver's pump, where the run's deadline is checked: a server sending keep-alives
    (as servers do during a long tool call) held ``record`` past its timeout, without end.
    Now the exchange ends at the run's remaining time (here 1 s) with an error answer."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    forwarder = McpForwarder({"tools": [{"mcp": {"url": url}}]}, live=True)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answers: list[dict[str, Any]] = []
    message = {"id": "m1", "server": "tools[0]", "session": "", "message": init}
    worker = threading.Thread(
        target=lambda: answers.append(forwarder.reply(message, remaining_s=1.0)), daemon=True
    )
    try:
        worker.start()
        worker.join(timeout=60)  # old code: still reading (this bound is the test's, not a timing)
        assert not worker.is_alive(), "the forwarder is still reading the endless stream"
        assert "run's time" in answers[0]["error"], answers
    finally:
        forwarder.close()
        httpd.shutdown()
        httpd.server_close()


def test_a_lone_surrogate_from_the_sandbox_does_not_break_the_host(server: McpServer) -> None:
    """Review: JSON may escape a lone surrogate (``"\\ud800"``), the strict decoder keeps it,
    and the forwarder encoded the message as UTF-8 text: `reply` raised UnicodeEncodeError
    in the episode driver's pump (a host failure the sandbox chose). It is sent escaped."""
    forwarder = McpForwarder({"tools": [{"mcp": {"url": server.url}}]}, live=True)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\ud800"}}
    try:
        answer = forwarder.reply({"id": "m1", "server": "tools[0]", "session": "", "message": ping})
    finally:
        forwarder.close()
    assert answer.get("response", {}).get("id") == 1, answer
    assert server.log[-1]["params"] == {"x": "\ud800"}  # the same JSON value arrived


def test_the_forwarder_follows_no_redirect_and_no_proxy(
    server: McpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review (held): a declared server answering 307 to another host does not get the
    message re-posted there, and the environment's proxy variables are not used."""
    other = McpServer()  # where the redirect points, and the proxy the environment names

    class Redirect(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(307)
            self.send_header("Location", other.url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    proxy = other.url.replace("/mcp", "")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    url = f"http://localhost:{httpd.server_address[1]}/mcp"  # a name: proxies apply to it
    forwarder = McpForwarder({"tools": [{"mcp": {"url": url}}]}, live=True)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    try:
        answer = forwarder.reply({"id": "m1", "server": "tools[0]", "session": "", "message": ping})
    finally:
        forwarder.close()
        httpd.shutdown()
        httpd.server_close()
        other.close()
    assert "HTTP 307" in answer.get("error", ""), answer
    assert other.log == []
