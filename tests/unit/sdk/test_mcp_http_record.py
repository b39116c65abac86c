"""runner.sdk.mcphttprecord: a user's process talking to an MCP server URL is watched, not
changed. The ``mcp`` package's own client talks to a loopback server (JSON answers, and an
event stream for ``tools/call``); the sink gets each request and its response, in order; the
client sees exactly what it sees unwatched; notifications are no calls; other URLs and a
detached recording are left alone; a failing sink never reaches the agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.runtime import mcproute
from runner.sdk import mcphttprecord
from tests.unit.runtime.test_mcp_http_endpoint import McpServer, _session
from tests.unit.runtime.test_mcp_http_endpoint import episode as episode  # the fixture, shared

pytest.importorskip("mcp.client.streamable_http")


class Sink:
    def __init__(self, fail: bool = False) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.responses: list[tuple[int, str, dict[str, Any]]] = []
        self.failures: list[BaseException] = []
        self.fail = fail

    def request(self, label: str, message: dict[str, Any]) -> int | None:
        if self.fail:
            raise RuntimeError("the sink broke")
        self.requests.append((label, message))
        return len(self.requests) - 1

    def response(self, index: int, label: str, response: dict[str, Any]) -> None:
        self.responses.append((index, label, response))

    def failed(self, exc: BaseException) -> None:
        self.failures.append(exc)


@pytest.fixture
def server() -> Iterator[McpServer]:
    found = McpServer()
    yield found
    found.close()


def test_each_request_and_its_response_reach_the_sink(server: McpServer) -> None:
    unwatched = _session(server.url, ("lookup", {"key": "k1"}))
    sink = Sink()
    token = mcphttprecord.attach(sink, [{"label": "tools[3]", "prefix": "kv", "url": server.url}])
    try:
        watched = _session(server.url, ("lookup", {"key": "k1"}))
    finally:
        mcphttprecord.detach(token)
    assert watched == unwatched  # the agent sees the same answers
    methods = [m["method"] for _, m in sink.requests]
    assert methods == ["initialize", "tools/list", "tools/call"]  # no notification
    assert {label for label, _ in sink.requests} == {"tools[3]"}
    assert [i for i, _, _ in sink.responses] == [0, 1, 2]
    call = sink.responses[2][2]  # read off the event stream, past a notification
    assert call["result"]["content"][0]["text"] == "value of k1"
    assert sink.failures == []


def test_other_urls_and_a_detached_recording_are_left_alone(server: McpServer) -> None:
    sink = Sink()
    other = server.url.replace("/mcp", "/other")
    token = mcphttprecord.attach(sink, [{"label": "tools[0]", "prefix": "", "url": other}])
    try:
        _session(server.url)
    finally:
        mcphttprecord.detach(token)
    sink2 = Sink()
    token = mcphttprecord.attach(sink2, [{"label": "tools[0]", "prefix": "", "url": server.url}])
    mcphttprecord.detach(token)
    _session(server.url)
    assert sink.requests == [] and sink2.requests == []
    assert mcphttprecord.attach(Sink(), [{"label": "tools[0]", "prefix": ""}]) is None


def test_a_failing_sink_never_reaches_the_agent(server: McpServer) -> None:
    unwatched = _session(server.url, ("lookup", {"key": "k2"}))
    sink = Sink(fail=True)
    token = mcphttprecord.attach(sink, [{"label": "tools[0]", "prefix": "", "url": server.url}])
    try:
        assert _session(server.url, ("lookup", {"key": "k2"})) == unwatched
    finally:
        mcphttprecord.detach(token)
    assert sink.failures and all("the sink broke" in str(e) for e in sink.failures)


def test_runner_sdk_record_writes_the_lines_the_hub_writes(
    server: McpServer, episode: Any, tmp_path: Path
) -> None:
    """The same session recorded by the sandbox's hub (``record``) and by runner.sdk.record
    in this process: the same call lines but for what only a run has (index, clock...)."""
    host, _, _ = episode("record")
    _session(server.url, ("lookup", {"key": "k1"}))
    by_hub = host.calls()
    mcproute.install([], "")  # this process talks to the server itself now
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        f"name: w\nversion: '1'\ntools:\n  - mcp: {{url: '{server.url}', prefix: kv}}\n"
        "steps:\n  - id: agent\n    program: a:run\n    tools: [kv.lookup]\n",
        encoding="utf-8",
    )
    trace = tmp_path / "t.jsonl"
    with sdk.record(trace, workflow=str(workflow)):
        _session(server.url, ("lookup", {"key": "k1"}))
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    by_sdk = [line for line in lines if line["type"] == "call"]
    kept = ("tool", "effect", "args", "body", "body_encoding", "meta", "source", "error")
    assert [{k: c.get(k) for k in kept} for c in by_sdk] == [
        {k: c.get(k) for k in kept} for c in by_hub
    ]
    assert by_sdk[2]["schema_hash"]  # from the server's own listing
    assert lines[0]["environment"]["tools"] == {"kv.lookup": by_sdk[2]["schema_hash"]}


def test_a_request_to_another_url_is_not_read_ahead(server: McpServer) -> None:
    """Review: while a recording was attached, every request of the process had its body read
    whole before it was sent (``request.read()``), MCP or not: a streamed upload was held in
    memory (an endless one never left). Only a POST to a workflow's URL is read now."""
    import socket
    import threading

    httpx = pytest.importorskip("httpx")
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = threading.Event()

    def serve() -> None:
        connection, _ = listener.accept()
        accepted.set()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    seen: list[bool] = []

    def upload() -> Iterator[bytes]:
        seen.append(accepted.wait(10))  # the transport connects before it sends the body
        yield b"x" * 1024

    token = mcphttprecord.attach(Sink(), [{"label": "tools[0]", "prefix": "", "url": server.url}])
    try:
        with httpx.Client(trust_env=False) as client:
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/upload"
            client.post(url, content=upload())
    finally:
        mcphttprecord.detach(token)
        listener.close()
    assert seen == [True]
