"""The MCP stand-in and hub (runner/runtime/mcpproxy.py, mcphub.py, mcpspawn.py) with a real
stand-in process, a real gateway and a standard-library stdio server that logs what reached it.

Record forwards and records; reproduce serves from those records and never starts the server
(its start log stays empty); a request the trace does not hold is an error answer plus an
``unrecorded_call`` divergence; a tool the registry does not hold is denied before the server
sees it; hostile server output ends the stand-in, bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.runtime import mcpspawn
from runner.runtime.mcphub import ENV_STANDIN, McpHub, protocol_tool_id, servers_of
from runner.runtime.mcpproxy import MAX_LINE_BYTES, StandInError, decode
from runner.runtime.registry import RuntimeRegistry
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.gateway import Gateway
from tests.support.paths import REPO

SERVER = r"""
import json, os, sys
log = open(os.environ["SERVER_LOG"], "a")
log.write("started\n"); log.flush()
TOOLS = [
    {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "wipe", "inputSchema": {"type": "object"}},
]
for line in sys.stdin:
    message = json.loads(line)
    log.write(line); log.flush()
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "t"}}
    elif method == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": "listing"}}), flush=True)
        result = {"tools": TOOLS}
    elif method == "tools/call" and message["params"]["name"] == "lookup":
        key = message["params"]["arguments"]["key"]
        result = {"content": [{"type": "text", "text": "value of " + key}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "no " + method}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""

WORKFLOW = {
    "tools": [{"mcp": {"command": ["python3", "server.py"], "prefix": "kv"}}],
    "steps": [{"id": "agent", "program": "a:run", "tools": ["kv.lookup"]}],
}
MANIFEST = {
    "policy": {"name": "t"},
    "tools": [
        {"id": "kv.lookup", "effect": "read", "schema_hash": "h1", "disposition": "recorded"},
    ],
}
REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "x"}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {"progressToken": 7}}},
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "lookup", "arguments": {"key": "k1"}},
    },
]


class Host:
    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def send(self, type_: str, **fields: Any) -> None:
        with self.lock:
            self.messages.append((type_, fields))

    def calls(self) -> list[dict[str, Any]]:
        return [f["record"] for k, f in self.messages if k == "call"]


class Program:
    def __init__(self) -> None:
        self.declared = ["kv.lookup"]
        self.denied: list[Any] = []


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    return tmp_path


@pytest.fixture
def episode(folder: Path) -> Iterator[Any]:
    gateways: list[Gateway] = []

    def make(
        mode: str,
        recorded: list[dict[str, Any]] | None = None,
        observations: list[dict[str, Any]] | None = None,
    ) -> tuple[Host, Any, Any]:
        host = Host()
        caller = Caller(
            host.send,
            lambda fields: {},
            mode,
            ObservationStore(observations),
            TraceStore(recorded),
            Clock(1767225600.0, 1.0),
        )
        gateway = Gateway(caller, lambda kind, **f: host.send("gateway_note", kind=kind, **f))
        gateway.start()
        gateway.activate("agent")
        gateways.append(gateway)
        registry = RuntimeRegistry.from_manifest(MANIFEST, mode, code=frozenset())
        program = Program()
        gateway.mcp = McpHub(caller, registry, mode, servers_of(WORKFLOW), {"agent": program})
        return host, gateway, program

    yield make
    for gateway in gateways:
        gateway.close()


def _standin(
    gateway: Gateway, folder: Path, text: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a stand-in of ``server.py`` in ``folder`` with ``text`` on its input."""
    env = mcpspawn.standin_environment(env or {}, "tools[0]")
    address = f"{gateway.host}:{gateway.port}"
    env[ENV_STANDIN] = json.dumps({"gateway": address, "server": "tools[0]"})
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        mcpspawn.standin_argv([sys.executable, "server.py"]),
        input=text.encode(),
        capture_output=True,
        cwd=folder,
        env=env,
        timeout=60,
        check=False,
    )


def _talk(gateway: Gateway, folder: Path, requests: list[dict[str, Any]]) -> list[Any]:
    """The stand-in's output for ``requests`` (it must end well)."""
    text = "".join(json.dumps(r) + "\n" for r in requests)
    done = _standin(gateway, folder, text, {"SERVER_LOG": str(folder / "log")})
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def _served(record_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(c, v=1, type="call") for c in record_calls]


def test_record_forwards_every_request_and_records_it(episode: Any, folder: Path) -> None:
    host, gateway, _ = episode("record")
    out = _talk(gateway, folder, REQUESTS)
    answers = [m for m in out if "id" in m]
    assert [m["id"] for m in answers] == [1, 2, 3]
    assert answers[2]["result"]["content"][0]["text"] == "value of k1"
    assert any(m.get("method") == "notifications/message" for m in out)  # passed on
    log = (folder / "log").read_text()
    assert log.startswith("started\n") and "notifications/initialized" in log
    calls = host.calls()
    assert [c["tool"] for c in calls] == ["mcp.initialize", "mcp.tools.list", "kv.lookup"]
    assert [c["meta"]["mcp"]["method"] for c in calls] == ["initialize", "tools/list", "tools/call"]
    assert calls[1]["args"] == {"server": "tools[0]", "params": {}}  # _meta left out
    assert calls[2]["args"] == {"key": "k1"} and calls[2]["effect"] == "read"
    assert calls[2]["schema_hash"] == "h1" and calls[2]["source"] == "executed"
    assert json.loads(calls[1]["body"])["tools"][0]["name"] == "lookup"


def test_reproduce_serves_from_the_trace_and_never_starts_the_server(
    episode: Any, folder: Path
) -> None:
    recorder, gateway, _ = episode("record")
    recorded = _talk(gateway, folder, REQUESTS)
    (folder / "log").unlink()
    host, gateway, _ = episode("reproduce", _served(recorder.calls()))
    replayed = _talk(gateway, folder, REQUESTS)
    assert [m for m in replayed if "id" in m] == [m for m in recorded if "id" in m]
    assert not (folder / "log").exists()  # the server never started
    assert {c["source"] for c in host.calls()} == {"trace"}


def test_a_request_the_trace_does_not_hold_is_a_divergence_never_sent(
    episode: Any, folder: Path
) -> None:
    recorder, gateway, _ = episode("record")
    _talk(gateway, folder, REQUESTS)
    (folder / "log").unlink()
    host, gateway, _ = episode("reproduce", _served(recorder.calls()))
    asked = [*REQUESTS[:3], json.loads(json.dumps(REQUESTS[3]))]
    asked[3]["params"]["arguments"] = {"key": "other"}
    out = _talk(gateway, folder, asked)
    miss = next(m for m in out if m.get("id") == 3)
    assert "unrecorded call #2" in miss["error"]["message"], miss
    assert not (folder / "log").exists()
    notes = [f for k, f in host.messages if k == "divergence"]
    assert notes and notes[0]["kind"] == "unrecorded_call" and notes[0]["tool"] == "kv.lookup"


def test_a_tool_outside_the_registry_is_denied_before_the_server_sees_it(
    episode: Any, folder: Path
) -> None:
    """``wipe`` has no annotations (unsafe): the shadow policy left it out of the registry."""
    host, gateway, program = episode("shadow")
    wipe = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "wipe"}}
    out = _talk(gateway, folder, [*REQUESTS[:3], wipe])
    denied = next(m for m in out if m.get("id") == 9)
    assert "CapabilityDenied" not in denied["error"]["message"]
    assert "nothing was sent to the server" in denied["error"]["message"]
    assert '"wipe"' not in (folder / "log").read_text()  # the server ran (shadow), not this
    (record,) = [c for c in host.calls() if c["tool"] == "kv.wipe"]
    assert record["error"]["class"] == "runner.errors.CapabilityDenied"
    assert program.denied  # the episode ends denied


def test_a_recorded_server_error_is_served_back_as_that_error(episode: Any, folder: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 5, "method": "resources/list", "params": {}}
    recorder, gateway, _ = episode("record")
    recorded = _talk(gateway, folder, [*REQUESTS[:2], ping])
    assert recorder.calls()[-1]["error"]["class"] == "McpError"
    _host, gateway, _ = episode("reproduce", _served(recorder.calls()))
    replayed = _talk(gateway, folder, [*REQUESTS[:2], ping])
    assert (
        replayed[-1]
        == recorded[-1]
        == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32601, "message": "no resources/list"},
        }
    )


def test_a_server_line_over_the_limit_ends_the_stand_in(episode: Any, folder: Path) -> None:
    (folder / "server.py").write_text(
        f"import sys\nsys.stdout.write('x' * ({MAX_LINE_BYTES} + 10))\nsys.stdout.flush()\n"
        "import time\ntime.sleep(30)\n",
        encoding="utf-8",
    )
    _, gateway, _ = episode("record")
    done = _standin(gateway, folder, json.dumps(REQUESTS[0]) + "\n")
    assert done.returncode == 1 and b"a message over" in done.stderr, done.stderr


def test_decode_is_strict_and_bounded() -> None:
    assert decode(b'{"a": 1}\n') == {"a": 1}
    assert decode(b'{"a": 1, "a": 2}\n') is None  # duplicate key: not a message
    assert decode(b"[1]\n") is None and decode(b"NaN\n") is None
    with pytest.raises(StandInError):
        decode(b"x" * (MAX_LINE_BYTES + 1))


def test_protocol_tool_ids() -> None:
    assert protocol_tool_id("tools/list") == "mcp.tools.list"
    assert protocol_tool_id("server/discover") == "mcp.server.discover"
    for bad in ("", "a//b", "a b", "../x", "x" * 200):
        with pytest.raises(ValueError):
            protocol_tool_id(bad)


@pytest.mark.parametrize(
    ("argv", "label"),
    [
        (["python3", "server.py"], "tools[0]"),
        (["/usr/bin/python3", "server.py"], "tools[0]"),
        # an interpreter by another of its names (sys.executable, a venv's python): a new
        # user's agent recorded nothing with it (failed on the old rule)
        (["/home/u/proj/.venv/bin/python", "server.py"], "tools[0]"),
        (["python3.11", "server.py"], "tools[0]"),
        (["node", "server.py"], None),
        (["python3", "other.py"], None),
        (["python3", "server.py", "--x"], None),
        ("python3 server.py", None),
    ],
)
def test_only_the_declared_command_is_replaced(argv: Any, label: str | None) -> None:
    assert mcpspawn.matching(argv, servers_of(WORKFLOW)) == label


def test_the_lethal_server_of_the_replay_tests_kills_a_stand_in_that_starts_it(
    episode: Any, folder: Path
) -> None:
    """The positive control of tests/integration/test_mcp_record_reproduce.py: there the
    server is replaced by this one, so a replay that started it could not succeed."""
    from tests.integration.test_mcp_record_reproduce import LETHAL_SERVER

    (folder / "server.py").write_text(LETHAL_SERVER, encoding="utf-8")
    _, gateway, _ = episode("record")
    done = _standin(gateway, folder, json.dumps(REQUESTS[0]) + "\n")
    assert done.returncode == -9 and done.stdout == b"", (done.returncode, done.stderr)


def test_a_line_the_server_splits_otherwise_smuggles_no_tool_call(
    episode: Any, folder: Path
) -> None:
    """Security review: the stand-in decided on one line and wrote it to the server raw; a
    server reading text with universal newlines (the ``mcp`` package's stdio server, Python's
    ``for line in sys.stdin``) splits it at a bare ``\\r`` (JSON whitespace), so a notification
    ``{..., "params": {"x": \\r{tools/call wipe}\\r}}`` ran ``wipe`` with no call recorded,
    though the shadow registry denies it. The server must see what the hub saw."""
    tolerant = SERVER.replace(  # reads stdin as mcp.server.stdio.stdio_server does (2.3.0)
        "for line in sys.stdin:\n    message = json.loads(line)\n",
        "import io\n"
        "for line in io.TextIOWrapper(sys.stdin.buffer, encoding='utf-8', errors='replace'):\n"
        "    try:\n        message = json.loads(line)\n    except ValueError:\n        continue\n",
    )
    assert tolerant != SERVER
    (folder / "server.py").write_text(tolerant, encoding="utf-8")
    host, gateway, _ = episode("shadow")
    wipe = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "wipe"}}
    smuggled = (
        '{"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"x":'
        + "\r"
        + json.dumps(wipe)
        + "\r"
        + "}}\n"
    )
    text = json.dumps(REQUESTS[0]) + "\n" + smuggled
    done = _standin(gateway, folder, text, {"SERVER_LOG": str(folder / "log")})
    assert done.returncode == 0, done.stderr.decode()
    reached = [json.loads(x) for x in (folder / "log").read_text().splitlines()[1:]]
    assert [m["method"] for m in reached] == ["initialize", "notifications/initialized"]
    assert [c["tool"] for c in host.calls()] == ["mcp.initialize"]


@pytest.mark.parametrize(
    ("body", "text"), [('"observed"', "observed"), ("[1, 2]", "[1,2]"), ("7", "7")]
)
def test_an_observation_written_as_text_is_served_as_a_tool_result(
    episode: Any, folder: Path, body: str, text: str
) -> None:
    """Was: the bare value went out as the JSON-RPC result; the mcp client dropped it and the
    run waited for its answer until the 300 s timeout."""
    observed = [{"tool": "kv.lookup", "args": {"key": "k1"}, "body": body}]
    host, gateway, _ = episode("shadow", observations=observed)
    out = _talk(gateway, folder, [REQUESTS[3]])
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"content": [{"type": "text", "text": text}], "isError": False},
        }
    ]
    assert [c["source"] for c in host.calls()] == ["observation"]


def test_a_denied_call_without_an_id_never_reaches_the_server(episode: Any, folder: Path) -> None:
    """Review: the stand-in passed every client message without a usable id on to the server
    as a notification, undecided: a ``tools/call`` of ``wipe`` with no id, or with
    ``id: null`` (a request to a server that takes null ids), reached the server."""
    _, gateway, _ = episode("shadow")
    wipe = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "wipe"}}
    _talk(gateway, folder, [*REQUESTS[:3], wipe, dict(wipe, id=None)])
    assert '"wipe"' not in (folder / "log").read_text()
    reached = [json.loads(x)["method"] for x in (folder / "log").read_text().splitlines()[1:]]
    assert reached == ["initialize", "notifications/initialized", "tools/list"]
