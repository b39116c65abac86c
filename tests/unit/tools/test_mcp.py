"""MCP tool sources: annotations → effect classes, saved tools/list files, the
stdlib client the sandbox uses against the official `mcp` package's server, and ``check``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.domain.mcpentry import McpEntry
from runner.errors import InputError
from runner.runtime import mcplist
from runner.sdk import Effect
from runner.tools.mcp import effect_of, listed_tools
from tests.support.paths import REPO

FIXTURES = REPO / "tests" / "fixtures" / "mcp"


@pytest.mark.parametrize(
    ("annotations", "effect", "said"),
    [
        ({"readOnlyHint": True}, Effect.READ, "readOnlyHint: true"),
        ({"readOnlyHint": True, "openWorldHint": True}, Effect.READ, "readOnlyHint: true"),
        ({"readOnlyHint": True, "idempotentHint": True}, Effect.READ, "idempotentHint: true"),
        (  # hints that contradict themselves describe nothing: fail closed
            {"readOnlyHint": True, "destructiveHint": True},
            Effect.UNSAFE,
            "contradictory annotations: readOnlyHint: true with destructiveHint: true",
        ),
        ({"readOnlyHint": True, "destructiveHint": False}, Effect.READ, "readOnlyHint: true"),
        ({"destructiveHint": True}, Effect.UNSAFE, "destructiveHint: true"),
        ({"readOnlyHint": False}, Effect.UNSAFE, "destructiveHint: true (default)"),
        ({"destructiveHint": False}, Effect.UNSAFE, "openWorldHint: true (default)"),
        (
            {"destructiveHint": False, "openWorldHint": False},
            Effect.UNSAFE,
            "destructiveHint: false, openWorldHint: false",
        ),
        (None, Effect.UNSAFE, "no annotations"),
        ({}, Effect.UNSAFE, "no annotations"),
        ({"title": "Search"}, Effect.UNSAFE, "no annotations"),
        ({"readOnlyHint": "true"}, Effect.UNSAFE, "no annotations"),  # not a boolean: unread
        ([True], Effect.UNSAFE, "no annotations"),
    ],
)
def test_annotations_decide_the_class_failing_closed(
    annotations: Any, effect: Effect, said: str
) -> None:
    got, why = effect_of(annotations)
    assert got is effect
    assert said in why


def _listed(tools: list[Any]) -> dict[str, Effect]:
    return {t["id"]: t["effect"] for t in listed_tools({"tools": tools}, file="f.json")}


def test_a_jsonrpc_response_a_result_and_a_bare_list_are_all_accepted() -> None:
    tool = {"name": "lookup", "annotations": {"readOnlyHint": True}}
    for data in (
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}},
        {"tools": [tool]},
        [tool],
    ):
        assert [t["id"] for t in listed_tools(data, file="f.json")] == ["lookup"]
    assert listed_tools([tool], file="f.json", prefix="kb")[0]["id"] == "kb.lookup"


@pytest.mark.parametrize(
    ("tools", "field"),
    [
        ([{"description": "no name"}], "tools[0]"),
        ([{"name": "a b"}], "tools[0].name"),
        ([{"name": "../../etc"}], "tools[0].name"),
        ([{"name": "x" * 129}], "tools[0].name"),
        ([{"name": "a"}, {"name": "a"}], "tools[1]"),
        ([{"name": "a", "inputSchema": "string"}], "tools[0]"),
    ],
)
def test_hostile_lists_are_refused_naming_the_field(tools: list[Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        listed_tools({"tools": tools}, file="f.json")
    assert caught.value.fields["field"] == field


def test_a_flood_of_tools_is_refused() -> None:
    with pytest.raises(InputError, match="more than 1000"):
        listed_tools({"tools": [{"name": f"t{i}"} for i in range(1001)]}, file="f.json")


def test_an_entry_needs_exactly_one_source() -> None:
    McpEntry.model_validate({"mcp": {"command": ["python3", "server.py"]}})
    McpEntry.model_validate({"mcp": {"tools_list": "tools.json", "prefix": "kb"}})
    for bad in (
        {"mcp": {}},
        {"mcp": {"command": ["x"], "tools_list": "t.json"}},
        {"mcp": {"command": []}},
        {"mcp": {"tools_list": "tools.yaml"}},
        {"mcp": {"command": ["x"], "prefix": "a.b"}},
        {"mcp": {"command": ["x"], "env": {}}},
    ):
        with pytest.raises(ValueError):
            McpEntry.model_validate(bad)


def test_the_stdlib_client_lists_an_official_mcp_server() -> None:
    """`runner.runtime.mcplist` (what the sandbox runs) against the `mcp` package's server.

    The server is this test's own fixture, run here on purpose to check interoperability;
    a workflow's server only ever runs inside a sandbox.
    """
    answer = mcplist.list_tools([sys.executable, str(FIXTURES / "official_server.py")], str(REPO))
    assert "error" not in answer, answer
    classes = _listed(answer["tools"])
    assert classes == {"lookup": Effect.READ, "wipe": Effect.UNSAFE}


def test_the_client_follows_cursors_and_skips_notifications() -> None:
    answer = mcplist.list_tools([sys.executable, str(FIXTURES / "docs_server.py")], str(REPO))
    assert _listed(answer["tools"]) == {
        "search_docs": Effect.READ,
        "delete_doc": Effect.UNSAFE,
        "send_email": Effect.UNSAFE,
        "add_note": Effect.UNSAFE,
    }


def test_a_server_that_fails_is_an_error_answer_not_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcplist, "TIMEOUT_S", 2.0)
    silent = tmp_path / "silent.py"
    silent.write_text("import time\ntime.sleep(30)\n", encoding="utf-8")
    flood = tmp_path / "flood.py"
    flood.write_text("import sys\nsys.stdout.write('x' * (5 << 20) + '\\n')\n", encoding="utf-8")
    cases = {
        "no answer within": [sys.executable, str(silent)],
        "over": [sys.executable, str(flood)],
        "ended": [sys.executable, "-c", "pass"],
        "did not start": [str(tmp_path / "missing-binary")],
    }
    for expected, command in cases.items():
        answer = mcplist.list_tools(command, str(tmp_path))
        assert expected in answer.get("error", ""), (command, answer)


def _workflow(folder: Path, tool: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tools = [
        {"name": "search_docs", "annotations": {"readOnlyHint": True}},
        {"name": "delete_doc", "annotations": {"destructiveHint": True}},
        {"name": "send_email"},
    ]
    (folder / "docs-tools.json").write_text(
        json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}}), encoding="utf-8"
    )
    path = folder / "wf.yaml"
    path.write_text(
        "name: mcpflow\nversion: '1'\ntools:\n  - mcp: {tools_list: docs-tools.json}\n"
        f"steps:\n  - id: s\n    tool: {tool}\n",
        encoding="utf-8",
    )
    return path


def test_check_of_a_saved_tools_list_shows_the_deciding_annotations(tmp_path: Path) -> None:
    ok = _workflow(tmp_path / "ok", "search_docs")
    result = CliRunner().invoke(app, ["check", str(ok), "--json"])
    assert result.exit_code == 0, result.stdout
    (tool,) = json.loads(result.stdout)["workflows"][0]["tools"]
    assert tool["effect"] == "read"
    assert tool["decided_by"] == "MCP annotations: readOnlyHint: true"

    for name, why in (("send_email", "no annotations"), ("delete_doc", "destructiveHint: true")):
        bad = _workflow(tmp_path / name, name)
        result = CliRunner().invoke(app, ["check", str(bad)])
        assert result.exit_code == 3, result.stdout
        assert f'tool "{name}" is unsafe (MCP annotations: ' in result.stdout
        assert why in result.stdout


def test_a_tools_list_outside_the_workflow_folder_is_refused(tmp_path: Path) -> None:
    path = _workflow(tmp_path / "w", "search_docs")
    path.write_text(path.read_text().replace("docs-tools.json", "../x.json"), encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert "tools[0]" in result.stdout + result.stderr
