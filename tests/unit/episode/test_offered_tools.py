"""The tools a program offers its model, against its declared toolset (issue 27): named in
the trace's end line, never denied (runner/providers/offered.py says why)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.providers.offered import MAX_NAME_CHARS, offered_tools, undeclared, undeclared_offered
from runner.tracetools.records import EndRecord

WORKFLOW = {
    "steps": [
        {"id": "agent", "program": "a:run", "tools": ["kb.search", "reply.format"]},
        {"id": "other", "program": "a:run", "tools": []},
    ]
}


@pytest.mark.parametrize(
    ("api", "tools"),
    [
        (
            "chat_completions",
            [
                {"type": "function", "function": {"name": "kb__search"}},
                {"type": "function", "function": {"name": "search_kb"}},
            ],
        ),
        (
            "responses",
            [
                {"type": "function", "name": "kb.search"},
                {"type": "function", "name": "search_kb"},
                {"type": "web_search"},  # not a function tool (the allow-list refuses it)
            ],
        ),
        ("messages", [{"name": "reply__format"}, {"name": "search_kb"}]),
    ],
)
def test_an_offered_tool_nobody_declared_is_named_on_each_api(
    api: str, tools: list[dict[str, Any]]
) -> None:
    request = {"model": "m", "tools": tools}
    assert undeclared_offered(api, request, WORKFLOW, "agent") == ["search_kb"]
    assert "search_kb" in undeclared_offered(api, request, WORKFLOW, "other")


@pytest.mark.parametrize(
    "tools",
    [None, "x", [1, None, {"function": "x"}, {"type": "function", "function": {"name": 3}}]],
)
def test_hostile_tool_lists_give_no_names(tools: Any) -> None:
    assert offered_tools("chat_completions", {"tools": tools}) == []


def test_names_are_bounded_and_unique() -> None:
    long = "x" * 1000
    request = {"tools": [{"name": long}, {"name": long}, *[{"name": f"t{i}"} for i in range(600)]]}
    names = offered_tools("messages", request)
    assert names[0] == "x" * MAX_NAME_CHARS and len(names) == 255  # 256 read, one repeated
    assert undeclared(["a.b", "a__b", "c"], ["a.b"]) == ["c"]
    assert offered_tools("messages", {"tools": [{"name": "a\x1b[31mb"}]}) == ["a?[31mb"]


def test_the_end_line_field_reads_back() -> None:
    line = {
        "v": 1,
        "type": "end",
        "status": "succeeded",
        "exit_code": 0,
        "undeclared_tools": [{"step_id": "agent", "name": "search_kb", "requests": 2}],
    }
    end = EndRecord.model_validate(line)
    assert end.undeclared_tools is not None and end.undeclared_tools[0].name == "search_kb"


def test_an_mcp_tool_is_offered_under_its_own_name() -> None:
    """The Agents SDK offers ``notes.search_notes`` (entry prefix ``notes``) as
    ``search_notes``: declared; the server's other tool, offered too, is named."""
    workflow = {
        "tools": [{"mcp": {"command": ["python3", "s.py"], "prefix": "notes"}}],
        "steps": [{"id": "agent", "program": "a:run", "tools": ["notes.search_notes"]}],
    }
    request = {"tools": [{"type": "function", "name": n} for n in ("search_notes", "delete_note")]}
    assert undeclared_offered("responses", request, workflow, "agent") == ["delete_note"]
    plain = {**workflow, "tools": [{"mcp": {"command": ["python3", "s.py"]}}]}
    assert undeclared_offered("responses", request, plain, "agent") == [
        "search_notes",
        "delete_note",
    ]
