"""Reproduce never starts an MCP server, not even to list its tools: they come from the
``tools/list`` calls the trace recorded (runner/reproduce/mcprecorded.py, the ``recorded_mcp``
of `runner.admission.describe.sandbox_registry`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from runner.admission.describe import sandbox_registry
from runner.domain.workflow import load_workflow
from runner.policy import load_policy
from runner.reproduce.mcprecorded import recorded_tools_lists
from runner.settings import Settings
from runner.tracetools.records import CallRecord

TOOLS = [
    {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "wipe", "inputSchema": {"type": "object"}},
]


def _call(index: int, tool: str, method: str, body: Any, server: str = "tools[1]") -> CallRecord:
    args = {"server": server, "params": {}} if method != "tools/call" else {"key": "k"}
    return CallRecord.model_validate(
        {
            "v": 1,
            "type": "call",
            "index": index,
            "tool": tool,
            "effect": "read",
            "args": args,
            "body": json.dumps(body),
            "body_encoding": "text",
            "meta": {"mcp": {"server": server, "method": method}},
        }
    )


def _workflow(tmp_path: Path) -> Any:
    path = tmp_path / "wf.yaml"
    path.write_text(
        "name: w\nversion: '1'\ntools:\n  - mcp: {tools_list: saved.json}\n"
        "  - mcp: {command: [python3, never.py], prefix: kv}\n"
        "steps:\n  - id: s\n    tool: kv.lookup\n",
        encoding="utf-8",
    )
    (tmp_path / "saved.json").write_text(json.dumps({"tools": []}), encoding="utf-8")
    return load_workflow(path)


def test_the_recorded_pages_are_the_servers_tools(tmp_path: Path) -> None:
    trace = SimpleNamespace(
        calls=[
            _call(0, "mcp.initialize", "initialize", {"capabilities": {}}),
            _call(1, "mcp.tools.list", "tools/list", {"tools": TOOLS[:1], "nextCursor": "2"}),
            _call(2, "mcp.tools.list", "tools/list", {"tools": TOOLS[1:]}),
            _call(3, "mcp.tools.list", "tools/list", {"tools": TOOLS}),  # listed again: once
            _call(4, "mcp.tools.list", "tools/list", {"tools": [{"name": "x"}]}, "tools[0]"),
            _call(5, "kv.lookup", "tools/call", {"content": []}),
        ]
    )
    assert trace.calls[1].is_mcp_protocol_call and not trace.calls[5].is_mcp_protocol_call
    lists = recorded_tools_lists(trace, _workflow(tmp_path))  # type: ignore[arg-type]
    assert lists == {1: {"tools": TOOLS}}  # tools[0] is a saved list, not a server
    # a trace that never listed the server: asked in a sandbox, as before
    unlisted = SimpleNamespace(calls=[trace.calls[5]])
    assert recorded_tools_lists(unlisted, _workflow(tmp_path)) == {}  # type: ignore[arg-type]


def test_a_registry_from_recorded_lists_starts_no_sandbox(tmp_path: Path) -> None:
    def no_backend() -> Any:
        raise AssertionError("a sandbox was asked for: the MCP server would have started")

    registry = sandbox_registry(
        _workflow(tmp_path),
        backend=no_backend,
        settings=Settings(state_dir=tmp_path / "state"),
        image="img",
        policy=load_policy("shadow"),
        recorded_mcp={1: {"tools": TOOLS}},
    )
    assert registry.ids() == ["kv.lookup", "kv.wipe"]
    assert registry.resolve("kv.lookup").effect.value == "read"
    assert registry.resolve("kv.wipe").effect.value == "unsafe"
