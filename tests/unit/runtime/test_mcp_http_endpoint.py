"""MCP over Streamable HTTP (runner/runtime/mcphttp.py, mcproute.py; runner/providers/mcphttp.py)
with the ``mcp`` package's own client, a real gateway and a loopback MCP server that logs what
reached it.

The client posts to the server's URL; the route sends it to the gateway's endpoint, the hub
decides, and in record the host's forwarder (called in-process here: the channel is the
episode driver's) posts it to the server. Reproduce serves the recording with the server's
log unchanged; a denied tool never reaches the server; hostile requests get clear errors.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runner.providers.mcphttp import McpForwarder
from runner.runtime import mcproute
from runner.runtime.mcphttp import MAX_BODY_BYTES, McpHttpEndpoint, route_of
from runner.runtime.mcphub import McpHub
from runner.runtime.registry import RuntimeRegistry
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.gateway import Gateway
from runner.sdk.mcphttp import url_servers

mcp_client = pytest.importorskip("mcp.client.streamable_http")
ClientSession = pytest.importorskip("mcp").ClientSession
McpClientError = pytest.importorskip("mcp.shared.exceptions").MCPError

TOOLS = [
    {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "wipe", "inputSchema": {"type": "object"}},
]
MANIFEST = {
    "policy": {"name": "t"},
    "tools": [
        {"id": "kv.lookup", "effect": "read", "schema_hash": "h1", "disposition": "recorded"},
        {"id": "kv.wipe", "effect": "unsafe", "schema_hash": "h2", "disposition": "recorded"},
    ],
}


class McpServer:
    """A Streamable HTTP MCP server on loopback: JSON for most answers, an event stream for
    ``tools/call`` (both shapes the transport allows), its session id, a log of every POST."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.log.append(
                    {
                        "session": self.headers.get("Mcp-Session-Id"),
                        "version": self.headers.get("MCP-Protocol-Version"),
                        "routed": self.headers.get("Mcp-Method"),
                        **body,
                    }
                )
                if "id" not in body:
                    return self._send(202, "application/json", b"", {})
                method = body["method"]
                if method == "initialize":
                    result: Any = {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "kv", "version": "1"},
                    }
                elif method == "tools/list":
                    result = {"tools": TOOLS}
                elif method == "tools/call":
                    key = body["params"]["arguments"]["key"]
                    answer = {
                        "jsonrpc": "2.0",
                        "id": body["id"],
                        "result": {"content": [{"type": "text", "text": "value of " + key}]},
                    }
                    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
                    events = "".join(
                        f"event: message\ndata: {json.dumps(m)}\n\n" for m in (note, answer)
                    )
                    return self._send(200, "text/event-stream", events.encode(), {})
                else:
                    result = {}
                data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
                self._send(200, "application/json", data.encode(), {"Mcp-Session-Id": "real-s1"})

            def do_DELETE(self) -> None:
                server.log.append({"deleted": self.headers.get("Mcp-Session-Id")})
                self._send(200, "application/json", b"", {})

            def do_GET(self) -> None:
                self._send(405, "application/json", b"", {})

            def _send(self, status: int, kind: str, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mcp"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def calls(self) -> list[str]:
        return [m["params"]["name"] for m in self.log if m.get("method") == "tools/call"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Host:
    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def send(self, type_: str, **fields: Any) -> None:
        self.messages.append((type_, fields))

    def calls(self) -> list[dict[str, Any]]:
        return [f["record"] for k, f in self.messages if k == "call"]


class Program:
    def __init__(self) -> None:
        self.declared = ["kv.lookup"]
        self.denied: list[Any] = []


@pytest.fixture
def server() -> Iterator[McpServer]:
    found = McpServer()
    yield found
    found.close()


@pytest.fixture
def episode(server: McpServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``make(mode, recorded=None) -> (host, gateway, forwarder)``, the URL routed to it.

    Only the client's library (httpx2) is routed: the host's forwarder (httpx) shares this
    process here, unlike in an episode, where it is the host's and the route the sandbox's.
    """
    monkeypatch.setattr(mcproute, "LIBRARIES", ("httpx2",))
    made: list[tuple[Gateway, McpForwarder]] = []
    workflow = {
        "tools": [{"mcp": {"url": server.url, "prefix": "kv"}}],
        "steps": [{"id": "agent", "program": "a:run", "tools": ["kv.lookup"]}],
    }

    def make(mode: str, recorded: list[dict[str, Any]] | None = None) -> tuple[Host, Any, Any]:
        host = Host()
        caller = Caller(
            host.send,
            lambda fields: {},
            mode,
            ObservationStore(None),
            TraceStore(recorded),
            Clock(1767225600.0, 1.0),
        )
        gateway = Gateway(caller, lambda kind, **f: host.send("gateway_note", kind=kind, **f))
        gateway.start()
        gateway.activate("agent")
        registry = RuntimeRegistry.from_manifest(MANIFEST, mode, code=frozenset())
        servers = url_servers(workflow)
        gateway.mcp = McpHub(caller, registry, mode, servers, {"agent": Program()})
        forwarder = McpForwarder(workflow, live=mode == "record")
        gateway.mcp_http = McpHttpEndpoint(gateway.mcp, mode, forwarder.reply)
        mcproute.install(servers, f"{gateway.host}:{gateway.port}")
        made.append((gateway, forwarder))
        return host, gateway, forwarder

    yield make
    mcproute.install([], "")  # nothing routed any more (the patch stays, passing through)
    for gateway, forwarder in made:
        forwarder.close()
        gateway.close()


def _session(url: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """What the ``mcp`` package's client sees of ``url``: tools listed, each call's text."""

    async def talk() -> dict[str, Any]:
        async with (
            mcp_client.streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            texts = []
            for name, arguments in calls:
                try:  # a JSON-RPC error answer is the client's exception
                    result = await session.call_tool(name, arguments)
                except McpClientError as exc:
                    texts.append((True, str(exc)))
                else:
                    texts.append((result.is_error, result.content[0].text))
            return {"tools": [t.name for t in listed.tools], "calls": texts}

    return asyncio.run(talk())


def test_record_forwards_through_the_host_and_records_each_request(
    server: McpServer, episode: Any
) -> None:
    host, _, _ = episode("record")
    seen = _session(server.url, ("lookup", {"key": "k1"}))
    assert seen == {"tools": ["lookup", "wipe"], "calls": [(False, "value of k1")]}
    records = host.calls()
    assert [r["tool"] for r in records] == ["mcp.initialize", "mcp.tools.list", "kv.lookup"]
    assert all(r["meta"]["mcp"]["server"] == "tools[0]" for r in records)
    assert json.loads(records[2]["body"])["content"][0]["text"] == "value of k1"  # from SSE
    assert server.calls() == ["lookup"]
    # the server's own session id travels on the host only, with every later message
    later = [m for m in server.log if m.get("method") not in (None, "initialize")]
    assert later and {m["session"] for m in later} == {"real-s1"}
    assert {"deleted": "real-s1"} in server.log  # the client's DELETE ended it


def test_reproduce_serves_the_recording_and_never_contacts_the_server(
    server: McpServer, episode: Any
) -> None:
    host, _, _ = episode("record")
    recorded_view = _session(server.url, ("lookup", {"key": "k1"}))
    recorded = host.calls()
    before = list(server.log)
    replay, _, _ = episode("reproduce", recorded)
    assert _session(server.url, ("lookup", {"key": "k1"})) == recorded_view
    assert server.log == before  # nothing reached the server
    assert {r["source"] for r in replay.calls()} == {"trace"}


def test_a_request_the_trace_does_not_hold_is_a_divergence_not_a_live_call(
    server: McpServer, episode: Any
) -> None:
    host, _, _ = episode("record")
    _session(server.url, ("lookup", {"key": "k1"}))
    before = list(server.log)
    replay, _, _ = episode("reproduce", host.calls())
    seen = _session(server.url, ("lookup", {"key": "k2"}))
    assert seen["calls"][0][0] is True and "UnrecordedCall" in seen["calls"][0][1]
    assert [k for k, f in replay.messages if k == "divergence"]
    assert server.log == before


def test_an_undeclared_unsafe_tool_is_denied_before_the_server_sees_it(
    server: McpServer, episode: Any
) -> None:
    host, _, _ = episode("record")
    seen = _session(server.url, ("wipe", {"key": "k1"}))
    assert seen["calls"][0][0] is True and "nothing was sent" in seen["calls"][0][1]
    assert "wipe" not in server.calls()  # the server's own log
    (denied,) = [r for r in host.calls() if r["tool"] == "kv.wipe"]
    assert denied["error"]["class"] == "runner.errors.CapabilityDenied"


def test_a_shadow_run_answers_the_protocol_from_the_workflow(
    server: McpServer, episode: Any
) -> None:
    host, _, _ = episode("shadow")
    seen = _session(server.url)
    assert seen == {"tools": ["lookup", "wipe"], "calls": []}  # the registry's, not a server's
    assert server.log == []
    listed = json.loads(host.calls()[1]["body"])["tools"]
    assert listed[0]["annotations"] == {"readOnlyHint": True}


# --- hostile requests, straight at the endpoint ---------------------------------------------


def _post(
    gateway: Gateway, body: bytes, headers: dict[str, str], method: str = "POST", index: int = 0
) -> tuple[int, dict[str, str], Any]:
    connection = http.client.HTTPConnection(gateway.host, gateway.port, timeout=120)
    try:
        connection.request(method, route_of(index), body, headers)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    found = {k.lower(): v for k, v in response.getheaders()}
    return response.status, found, json.loads(data) if data else None


JSON = {"Content-Type": "application/json"}
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
LIST = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [
        (b"x" * (MAX_BODY_BYTES + 1), JSON, 413, "over"),
        (b'{"jsonrpc": "2.0", "id": 1,', JSON, 400, "not JSON"),
        (b'{"a": 1, "a": 2}', JSON, 400, "not JSON"),
        (b"[" + INIT + b"]", JSON, 400, "no JSON-RPC batches"),
        (b'{"id": 1, "method": "ping"}', JSON, 400, "not a JSON-RPC 2.0 message"),
        (INIT, {"Content-Type": "text/plain"}, 415, "application/json"),
        (LIST, JSON, 400, "no Mcp-Session-Id"),
        (LIST, dict(JSON, **{"Mcp-Session-Id": "a b"}), 400, "visible ASCII"),
        (LIST, dict(JSON, **{"Mcp-Session-Id": "x" * 129}), 400, "visible ASCII"),
        (LIST, dict(JSON, **{"Mcp-Session-Id": "sandbox-replay-0-9"}), 404, "no such session"),
        (LIST, dict(JSON, **{"MCP-Protocol-Version": "a b"}), 400, "visible ASCII"),
    ],
)
def test_hostile_requests_get_clear_errors(
    episode: Any, body: bytes, headers: dict[str, str], status: int, words: str
) -> None:
    host, gateway, _ = episode("record")
    got, _, answer = _post(gateway, body, headers)
    assert got == status and words in answer["error"]["message"], answer
    assert host.calls() == []  # nothing was recorded, nothing forwarded


def test_sessions_get_and_delete(server: McpServer, episode: Any) -> None:
    _, gateway, _ = episode("record")
    status, headers, answer = _post(gateway, INIT, JSON)
    assert status == 200 and answer["result"]["serverInfo"]["name"] == "kv"
    session = headers["mcp-session-id"]
    assert session == "sandbox-replay-0-1"  # the endpoint's own: never the server's real-s1
    with_session = dict(JSON, **{"Mcp-Session-Id": session})
    assert _post(gateway, b"", with_session, "GET")[0] == 405
    assert _post(gateway, b"", with_session, "PUT")[0] == 405
    assert _post(gateway, INIT, JSON, index=7)[0] == 404  # no such entry
    note = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'
    assert _post(gateway, note, with_session)[0] == 202
    assert _post(gateway, b"", with_session, "DELETE")[0] == 204
    assert {"deleted": "real-s1"} in server.log
    assert _post(gateway, LIST, with_session)[0] == 404  # ended


def test_the_stateless_era_needs_no_session(server: McpServer, episode: Any) -> None:
    """MCP 2026-07-28 has no initialize and no session: its probe and every request stamped
    with that version are decided and forwarded, the routing headers passed on."""
    host, gateway, _ = episode("record")
    probe = b'{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}'
    status, headers, answer = _post(gateway, probe, JSON)
    assert status == 200 and "result" in answer and "mcp-session-id" not in headers
    modern = dict(JSON, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    status, _, answer = _post(gateway, LIST, modern)
    assert status == 200 and [t["name"] for t in answer["result"]["tools"]] == ["lookup", "wipe"]
    assert server.log[-1]["session"] is None and server.log[-1]["version"] == "2026-07-28"
    assert server.log[-1]["routed"] == "tools/list"
    assert [r["tool"] for r in host.calls()] == ["mcp.server.discover", "mcp.tools.list"]


def test_outside_a_program_step_nothing_is_answered(episode: Any) -> None:
    _, gateway, _ = episode("record")
    gateway.deactivate("agent")
    status, _, answer = _post(gateway, INIT, JSON)
    assert status == 503 and "no program step" in answer["error"]["message"]


# --- the host's forwarder ------------------------------------------------------------------


def test_the_forwarder_posts_only_to_the_url_its_own_workflow_declares(server: McpServer) -> None:
    workflow = {"tools": [{"mcp": {"url": server.url}}]}
    forwarder = McpForwarder(workflow, live=True)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    try:
        # a message naming another destination: there is no field for one; an undeclared
        # entry, a bad session, no session: refused, nothing sent
        for message, words in [
            ({"id": "h1", "server": "tools[1]", "session": "s", "message": init}, "no MCP"),
            ({"id": "h2", "server": "tools[0]", "session": "a b", "message": init}, "session"),
            (
                {"id": "h3", "server": "tools[0]", "session": "s", "message": {"id": 2}},
                "JSON-RPC",
            ),
            (
                {
                    "id": "h6",
                    "server": "tools[0]",
                    "session": "",
                    "message": init,
                    "headers": {"authorization": "Bearer x"},
                },
                "not passed on",
            ),
            (
                {
                    "id": "h4",
                    "server": "tools[0]",
                    "session": "s",
                    "message": dict(init, id=5, method="x"),
                },
                "initialize first",
            ),
        ]:
            answer = forwarder.reply(message)
            assert words in answer["error"] and "response" not in answer, answer
        assert server.log == []
        answer = forwarder.reply(
            {"id": "h5", "server": "tools[0]", "session": "s", "message": init}
        )
        assert answer["id"] == "h5" and answer["response"]["result"]["serverInfo"]["name"] == "kv"
    finally:
        forwarder.close()
    assert server.log[-1] == {"deleted": "real-s1"}  # the episode's end closes its sessions


def test_the_forwarder_forwards_nothing_outside_record(server: McpServer) -> None:
    forwarder = McpForwarder({"tools": [{"mcp": {"url": server.url}}]}, live=False)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answer = forwarder.reply({"id": "h1", "server": "tools[0]", "session": "s", "message": init})
    assert "only by record" in answer["error"]
    assert server.log == []


def test_an_unreachable_server_is_an_error_answer(server: McpServer) -> None:
    url = server.url
    server.close()
    forwarder = McpForwarder({"tools": [{"mcp": {"url": url}}]}, live=True)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answer = forwarder.reply({"id": "h1", "server": "tools[0]", "session": "s", "message": init})
    assert "did not answer: ConnectError" in answer["error"]
    server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # for close()
    threading.Thread(target=server.httpd.serve_forever, daemon=True).start()


# --- the route -----------------------------------------------------------------------------


def test_only_the_declared_url_is_routed() -> None:
    routes = mcproute.routes_of(
        [{"label": "tools[2]", "url": "https://MCP.example.com/mcp/"}, {"label": "tools[0]"}],
        "127.0.0.1:9",
    )
    to = "http://127.0.0.1:9/_sandbox-replay/mcp-http/2"
    assert mcproute.target("https://mcp.example.com/mcp", routes) == to
    assert mcproute.target("https://mcp.example.com:443/mcp/", routes) == to
    assert mcproute.target("https://mcp.example.com/mcp?x=1", routes) == to + "?x=1"
    for other in (
        "http://mcp.example.com/mcp",  # another scheme
        "https://mcp.example.com:8443/mcp",  # another port
        "https://mcp.example.com/mcp/other",  # another path
        "https://evil.example.com/mcp",
        "not a url",
    ):
        assert mcproute.target(other, routes) is None, other


@pytest.mark.parametrize(
    ("ident", "words"),
    [
        ({}, "notifications/"),  # no id: a notification, which the hub never decided
        ({"id": None}, "string or an integer"),  # id null: the server may run it as a request
        ({"id": True}, "string or an integer"),
    ],
)
def test_a_denied_call_cannot_be_smuggled_as_a_notification(
    server: McpServer, episode: Any, ident: dict[str, Any], words: str
) -> None:
    """Review: a ``tools/call`` without an id (or with ``id: null``) was passed on to the
    server as a notification in record, never decided by the hub; a server that treats a null
    id as a request (this one does, as a JSON-RPC 1.0 server would) ran the denied ``wipe``."""
    _, gateway, _ = episode("record")
    _, headers, _ = _post(gateway, INIT, JSON)
    with_session = dict(JSON, **{"Mcp-Session-Id": headers["mcp-session-id"]})
    call = {"name": "wipe", "arguments": {"key": "k1"}}
    body = json.dumps({"jsonrpc": "2.0", **ident, "method": "tools/call", "params": call})
    got, _, answer = _post(gateway, body.encode(), with_session)
    assert "wipe" not in server.calls()  # the server's own log
    assert got == 400 and words in answer["error"]["message"], answer
    # an ordinary notification still reaches the server
    note = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'
    assert _post(gateway, note, with_session)[0] == 202
    assert server.log[-1]["method"] == "notifications/initialized"
