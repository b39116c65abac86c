"""``runner.sdk.record`` records the MCP stdio traffic of the workflow's servers (issue 27).

Real child processes and real pipes (runner/sdk/mcprecord.py, mcpstdio.py): the call lines are
the ones the sandbox's hub writes for the same exchange (tests/unit/runtime/test_mcp_standin.py's
stand-in, gateway and hub), the hub serves them back in ``reproduce`` without starting the
server, and the agent reads and the server receives the same bytes as without a recorder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.sdk import mcpcalls, mcprecord, mcpstdio
from tests.unit.runtime import test_mcp_standin as standin
from tests.unit.runtime.test_mcp_standin import episode  # noqa: F401  (a fixture: the hub)

# A stdio server that logs the bytes it receives, answers deterministically, and sends what a
# relay must pass on untouched: a notification, a request of its own, a stray print, a line
# with a bare "\r" inside, a line over the bound (when the test lowers it).
SERVER = r"""
import json, os, sys
log = open(os.environ["SERVER_LOG"], "ab")
out = sys.stdout.buffer
def send(text):
    out.write(text.encode() + b"\n"); out.flush()
TOOLS = [
    {"name": "lookup", "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "wipe", "inputSchema": {"type": "object"}},
]
for raw in sys.stdin.buffer:
    log.write(raw); log.flush()
    message = json.loads(raw)
    if "id" not in message or "method" not in message:
        continue
    method, ident = message["method"], message["id"]
    if method == "initialize":
        send("not json: a stray print")
        result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "t"}}
    elif method == "tools/list":
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "listing"}}))
        send(json.dumps({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}))
        result = {"tools": TOOLS}
    elif method == "tools/call" and message["params"]["name"] == "lookup":
        key = message["params"]["arguments"]["key"]
        send('{"jsonrpc": "2.0",\r"method": "notifications/progress", "params": {}}')
        send(json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"pad": "p" * 3000}}))
        result = {"content": [{"type": "text", "text": "value of " + key + " \u00e9"}]}
    elif method == "exit/now":
        sys.exit(3)
    elif method == "never/answered":
        continue
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": ident,
                         "error": {"code": -32601, "message": "no " + method}}))
        continue
    send(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}))
"""

REQUESTS = [
    *standin.REQUESTS,
    {"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {}},
]


def _workflow(folder: Path, command: list[str]) -> Path:
    path = folder / "wf.yaml"
    flow = json.dumps(command)
    path.write_text(
        "name: w\nversion: '1'\ntools:\n"
        "  - {module: tools.py}\n"
        f"  - mcp: {{command: {flow}, prefix: kv}}\n"
        "steps:\n  - id: agent\n    program: a:run\n    tools: [kv.lookup]\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    (tmp_path / "server.py").chmod(0o755)
    return tmp_path


def _client(
    folder: Path, requests: list[dict[str, Any]], command: list[str] | None = None, **popen: Any
) -> tuple[bytes, subprocess.Popen[bytes]]:
    """Start the server as an MCP client does, send ``requests``, close; what it read."""
    process = subprocess.Popen(
        command or [sys.executable, "server.py"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=folder,
        env={"SERVER_LOG": str(folder / "log"), "PATH": "/usr/bin:/bin"},
        **popen,
    )
    assert process.stdin is not None and process.stdout is not None
    for request in requests:
        process.stdin.write(json.dumps(request).encode() + b"\n")
    process.stdin.flush()
    process.stdin.close()
    out = process.stdout.read()
    process.stdout.close()
    process.wait(timeout=30)
    return out, process


def _recorded(folder: Path, requests: list[dict[str, Any]], **record: Any) -> Any:
    trace = folder / "t.jsonl"
    with sdk.record(
        trace,
        task_id="t1",
        workflow=str(_workflow(folder, [sys.executable, "server.py"])),
        **record,
    ):
        out, _ = _client(folder, requests)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    return out, lines


def _calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == "call"]


def test_the_calls_are_the_ones_the_sandbox_hub_records_for_the_same_exchange(
    folder: Path,
    episode: Any,  # noqa: F811
) -> None:
    _out, lines = _recorded(folder, REQUESTS)
    ours = _calls(lines)
    host, gateway, _ = episode("record")
    standin._talk(gateway, folder, REQUESTS)
    theirs = host.calls()
    # the sandbox's workflow puts the server at tools[0]; this one at tools[1]
    for call in theirs:
        text = json.dumps(call).replace('"tools[0]"', '"tools[1]"')
        call.clear()
        call.update(json.loads(text))
    varying = ("clock", "duration_s", "step_id", "schema_hash", "v", "type")
    assert [{k: v for k, v in c.items() if k not in varying} for c in ours] == [
        {k: v for k, v in c.items() if k not in varying} for c in theirs
    ]
    assert [c["tool"] for c in ours] == [
        "mcp.initialize",
        "mcp.tools.list",
        "kv.lookup",
        "mcp.resources.list",
    ]
    assert [c["index"] for c in ours] == [0, 1, 2, 3]
    lookup = ours[2]
    # the effect and schema hash the host's registry gives the listed tool
    assert lookup["effect"] == "read"
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    assert lookup["schema_hash"] == sdk.schema_hash(schema)
    assert lines[0]["environment"]["tools"] == {"kv.lookup": sdk.schema_hash(schema)}
    assert json.loads(lookup["body"])["content"][0]["text"] == "value of k1 \u00e9"
    assert ours[3]["error"] == {
        "class": "McpError",
        "message": '{"code":-32601,"message":"no resources/list"}',
    }
    assert ours[1]["args"] == {"server": "tools[1]", "params": {}}  # _meta left out


def test_reproduce_serves_what_the_recorder_wrote_and_never_starts_the_server(
    folder: Path,
    episode: Any,  # noqa: F811
) -> None:
    seen, lines = _recorded(folder, REQUESTS)
    recorded = [
        json.loads(json.dumps(c).replace('"tools[1]"', '"tools[0]"')) for c in _calls(lines)
    ]
    (folder / "log").unlink()
    host, gateway, _ = episode("reproduce", recorded)
    replayed = standin._talk(gateway, folder, REQUESTS)
    answers = [mcpstdio.decode(line) or {} for line in seen.split(b"\n")]
    assert [m for m in replayed if m.get("id") in (1, 2, 3, 4)] == [
        m for m in answers if m.get("id") in (1, 2, 3, 4) and "method" not in m
    ]
    assert not (folder / "log").exists()
    assert {c["source"] for c in host.calls()} == {"trace"}
    assert not [f for k, f in host.messages if k == "divergence"]


def test_the_agent_and_the_server_see_the_same_bytes_as_without_a_recorder(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is re-encoded, filtered or held back: a stray print, a bare "\\r", the server's
    own request and a line over the (lowered) bound all pass; only requests are recorded."""
    monkeypatch.setattr(mcpstdio, "MAX_LINE_BYTES", 2000)
    plain, _ = _client(folder, REQUESTS)
    plain_log = (folder / "log").read_bytes()
    (folder / "log").unlink()
    with pytest.warns(RuntimeWarning, match="1 MCP message"):
        seen, lines = _recorded(folder, REQUESTS)
    assert seen == plain and b"\r" in seen and b"not json" in seen and b"p" * 3000 in seen
    assert (folder / "log").read_bytes() == plain_log
    assert len(_calls(lines)) == 4


def test_a_request_line_is_recorded_even_when_it_arrives_in_pieces(folder: Path) -> None:
    lines = mcpstdio.Lines()
    text = b"".join(json.dumps(r).encode() + b"\n" for r in REQUESTS)
    got = [line for i in range(0, len(text), 7) for line in lines.feed(text[i : i + 7])]
    assert [json.loads(line) for line in got] == REQUESTS
    assert lines.dropped == 0 and not lines.partial


def test_a_line_over_the_bound_is_dropped_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcpstdio, "MAX_LINE_BYTES", 10)
    lines = mcpstdio.Lines()
    assert lines.feed(b"0123456789") == []
    assert lines.feed(b"X\nshort\n0123") == [b"short"]
    assert lines.dropped == 1 and lines.partial == b"0123"
    assert lines.feed(b"456789ABC") == [] and not lines.partial  # bounded while it grows
    assert lines.feed(b"\n\n") == [b""] and lines.dropped == 2


def test_a_server_that_ends_without_answering_is_recorded_as_the_stand_in_records_it(
    folder: Path,
) -> None:
    ends = {"jsonrpc": "2.0", "id": 9, "method": "exit/now", "params": {}}
    _out, lines = _recorded(folder, [REQUESTS[0], ends])
    last = _calls(lines)[-1]
    assert last["tool"] == "mcp.exit.now" and last["error"]["class"] == "McpError"
    error = json.loads(last["error"]["message"])
    assert error["code"] == -32603 and error["message"].startswith("the MCP server ended")


def test_a_request_unanswered_when_the_recorder_ends_is_an_error_not_a_hole(
    folder: Path,
) -> None:
    trace = folder / "t.jsonl"
    workflow = _workflow(folder, [sys.executable, "server.py"])
    with sdk.record(trace, task_id="t1", workflow=str(workflow)):
        process = subprocess.Popen(
            [sys.executable, "server.py"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=folder,
            env={"SERVER_LOG": str(folder / "log")},
        )
        assert process.stdin is not None and process.stdout is not None
        for request in (REQUESTS[0], {"jsonrpc": "2.0", "id": 2, "method": "never/answered"}):
            process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        process.stdout.readline()  # the stray print
        process.stdout.readline()  # the answer to initialize
        deadline = time.monotonic() + 10
        while b"never" not in (folder / "log").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
    # the server still runs, and is still the agent's to talk to after the recording
    process.stdin.write(json.dumps(REQUESTS[2]).encode() + b"\n")
    process.stdin.close()
    assert b'"lookup"' in process.stdout.read()
    process.stdout.close()
    process.wait(timeout=30)
    last = _calls([json.loads(line) for line in trace.read_text().splitlines()])[-1]
    assert last["tool"] == "mcp.never.answered"
    assert json.loads(last["error"]["message"])["message"] == mcprecord.UNANSWERED


def test_other_children_and_servers_started_inside_a_tool_are_left_alone(folder: Path) -> None:
    @sdk.tool("kv.fetch", effect=sdk.Effect.READ)
    def fetch() -> str:
        out, _ = _client(folder, REQUESTS[:1])
        return out.decode()

    trace = folder / "t.jsonl"
    workflow = _workflow(folder, [sys.executable, "server.py"])
    with sdk.record(trace, task_id="t1", workflow=str(workflow)):
        other = subprocess.Popen(
            [sys.executable, "-c", "print(1)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert other.communicate(timeout=30)[0].strip() == b"1"
        assert "value" not in fetch()
        # a shell command line and text-mode pipes are not taken off
        shell = subprocess.run(
            f"{sys.executable} server.py",
            shell=True,
            input=json.dumps(REQUESTS[0]).encode() + b"\n",
            capture_output=True,
            cwd=folder,
            env={"SERVER_LOG": str(folder / "log")},
            check=True,
        )
        assert b"protocolVersion" in shell.stdout
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [c["tool"] for c in _calls(lines)] == ["kv.fetch"]


def test_text_mode_pipes_are_passed_through_with_a_warning(folder: Path) -> None:
    trace = folder / "t.jsonl"
    workflow = _workflow(folder, [sys.executable, "server.py"])
    with (
        pytest.warns(RuntimeWarning, match="text-mode pipes"),
        sdk.record(trace, task_id="t1", workflow=str(workflow)),
    ):
        out = subprocess.run(
            [sys.executable, "server.py"],
            input=json.dumps(REQUESTS[0]) + "\n",
            capture_output=True,
            text=True,
            cwd=folder,
            env={"SERVER_LOG": str(folder / "log")},
            check=True,
        ).stdout
    assert "protocolVersion" in out
    assert _calls([json.loads(line) for line in trace.read_text().splitlines()]) == []


def test_a_recorder_fault_never_reaches_the_agent(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, _ = _client(folder, REQUESTS)

    def broken(*args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(mcprecord.McpRecording, "response", broken)
    with pytest.warns(RuntimeWarning, match="could not record an MCP message: RuntimeError"):
        seen, lines = _recorded(folder, REQUESTS)
    assert seen == plain
    # the calls were taken; with no response recorded they end as unanswered errors
    assert [c["error"]["class"] for c in _calls(lines)] == ["McpError"] * 4


def test_a_workflow_the_recorder_cannot_read_warns_and_records_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = _workflow(tmp_path, ["python3", "s.py"])
    real = mcprecord.importlib.import_module

    def no_yaml(name: str) -> Any:
        if name == "yaml":
            raise ImportError(name)
        return real(name)

    monkeypatch.setattr(mcprecord.importlib, "import_module", no_yaml)
    with (
        pytest.warns(RuntimeWarning, match="needs PyYAML"),
        sdk.record(tmp_path / "t.jsonl", task_id="t1", workflow=str(workflow)),
    ):
        pass
    monkeypatch.undo()
    workflow.write_text(
        workflow.read_text().replace('command: ["python3", "s.py"]', "tools_list: a.json")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a saved tools/list: nothing the agent starts
        with sdk.record(tmp_path / "u.jsonl", task_id="t1", workflow=str(workflow)) as rec:
            pass
    assert rec._mcp is None


def test_workflow_servers_reads_the_entries_in_their_places() -> None:
    text = (
        "tools:\n  - {module: t.py}\n  - mcp:\n      command: [node, s.js]\n"
        "  - mcp: {tools_list: a.json}\n  - mcp: {command: [python3, x.py], prefix: p}\n"
    )
    servers, problem = mcprecord.workflow_servers(text)
    assert problem is None
    assert servers == [
        {"label": "tools[1]", "command": ["node", "s.js"], "prefix": ""},
        {"label": "tools[3]", "command": ["python3", "x.py"], "prefix": "p"},
    ]
    assert mcprecord.workflow_servers("tools: [{mcp: {command: [a]}}]: :")[1] is not None
    assert mcpcalls.matching(["/usr/bin/node", "s.js"], servers) == "tools[1]"
    assert mcpcalls.matching("node s.js", servers) is None


# --- the official clients, unchanged -----------------------------------------------------------

# An MCP server on the official `mcp` package (its quickstart's shape), deterministic.
MCP_SERVER = """
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("kv")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup(key: str) -> dict:
    \"\"\"Look a key up.\"\"\"
    return {"key": key, "value": key.upper()}


if __name__ == "__main__":
    server.run("stdio")
"""


async def _with_mcp_client(folder: Path) -> list[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["kv.py"], cwd=str(folder))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        listed = await session.list_tools()
        called = await session.call_tool("lookup", {"key": "k1"})
    return [started, listed, called]


async def _with_agents_sdk(folder: Path) -> list[Any]:
    from agents.mcp import MCPServerStdio

    params = {"command": sys.executable, "args": ["kv.py"], "cwd": str(folder)}
    async with MCPServerStdio(name="kv", params=params) as server:
        listed = await server.list_tools()
        called = await server.call_tool("lookup", {"key": "k2"})
    return [listed, called]


@pytest.mark.parametrize("client", [_with_mcp_client, _with_agents_sdk])
def test_the_official_clients_get_the_same_results_recorded_or_not(
    tmp_path: Path, client: Any
) -> None:
    """The ``mcp`` package's ``stdio_client`` and the Agents SDK's ``MCPServerStdio``, with a
    real ``MCPServer``: the pydantic results the agent gets are equal, type and value, with
    and without a recorder, and the recorder wrote every request the client sent."""
    import asyncio

    (tmp_path / "kv.py").write_text(MCP_SERVER, encoding="utf-8")
    plain = asyncio.run(client(tmp_path))
    workflow = _workflow(tmp_path, [sys.executable, "kv.py"])
    trace = tmp_path / "t.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with sdk.record(trace, task_id="t1", workflow=str(workflow)):
            seen = asyncio.run(client(tmp_path))
    assert [type(v) for v in seen] == [type(v) for v in plain]
    assert [v.model_dump() if hasattr(v, "model_dump") else v for v in seen] == [
        v.model_dump() if hasattr(v, "model_dump") else v for v in plain
    ]
    calls = _calls([json.loads(line) for line in trace.read_text().splitlines()])
    tools = [c["tool"] for c in calls]
    assert tools[-2:] == ["mcp.tools.list", "kv.lookup"], tools
    assert tools[0] in ("mcp.server.discover", "mcp.initialize"), tools  # mcp 2.x discovers
    assert all("error" not in c and c["body"] for c in calls), calls
    assert calls[-1]["effect"] == "read" and calls[-1]["schema_hash"]
    text = json.loads(calls[-1]["body"])["content"][0]["text"]
    assert json.loads(text)["value"] in ("K1", "K2")


def test_a_server_started_on_pipes_of_the_clients_own_is_named_in_a_warning(
    folder: Path,
) -> None:
    """anyio's trio backend makes its own pipes: nothing to take off, said rather than silent."""
    import os

    trace = folder / "t.jsonl"
    workflow = _workflow(folder, [sys.executable, "server.py"])
    with (
        pytest.warns(RuntimeWarning, match=r"MCP server tools\[1\] started without Popen's pipes"),
        sdk.record(trace, task_id="t1", workflow=str(workflow)),
    ):
        read_end, write_end = os.pipe()
        os.write(write_end, json.dumps(REQUESTS[0]).encode() + b"\n")
        os.close(write_end)
        done = subprocess.run(
            [sys.executable, "server.py"],
            stdin=read_end,
            capture_output=True,
            cwd=folder,
            env={"SERVER_LOG": str(folder / "log")},
            check=True,
        )
        os.close(read_end)
    assert b"protocolVersion" in done.stdout


def test_a_tool_called_before_any_listing_is_unsafe_without_a_schema_hash(folder: Path) -> None:
    """Fail closed: with no annotations seen, the call is ``unsafe``; no hash is guessed."""
    _out, lines = _recorded(folder, [REQUESTS[0], REQUESTS[3]])
    call = _calls(lines)[-1]
    assert call["tool"] == "kv.lookup" and call["body"]
    assert call["effect"] == "unsafe" and call["schema_hash"] is None
    assert lines[0]["environment"]["tools"] == {}


def test_a_recorder_that_cannot_enter_leaves_the_process_as_it_was(tmp_path: Path) -> None:
    """Review: under warnings-as-errors (``-W error``, pytest's ``filterwarnings = error``) the
    warning that a workflow's MCP servers cannot be read is raised from ``record``'s entry,
    after the recorder had made itself current and turned the Agents SDK's tracing off: both
    stayed so for the rest of the process. The warning is raised before anything is set."""
    import os
    import warnings

    from runner.sdk import current

    workflow = tmp_path / "bad.yaml"
    workflow.write_text('name: x\ntools:\n  - mcp: {url: "http://127.0.0.1:9/mcp", prefix: [\n')
    before = os.environ.get("OPENAI_AGENTS_DISABLE_TRACING")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with (
            pytest.raises(RuntimeWarning, match="not YAML"),
            sdk.record(tmp_path / "t.jsonl", task_id="q1", task_input={}, workflow=workflow),
        ):
            pass
    assert current.RECORDER.get() is None
    assert os.environ.get("OPENAI_AGENTS_DISABLE_TRACING") == before


def test_a_tool_called_then_listed_is_described_by_that_listing(folder: Path) -> None:
    """The mcp client (2.x) calls a tool and lists the tools afterwards: the server's listing
    later in the recording gives the call its effect and schema hash (was: ``unsafe`` without
    a hash, and reproduce named the tool as an environment difference)."""
    _out, lines = _recorded(folder, [REQUESTS[0], REQUESTS[3], REQUESTS[2]])
    call = next(c for c in _calls(lines) if c["tool"] == "kv.lookup")
    assert call["effect"] == "read" and call["schema_hash"]
    assert lines[0]["environment"]["tools"] == {"kv.lookup": call["schema_hash"]}
