"""Every first difference carries a divergence label, decided by rule from the two calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.cli.render.html.render import render_reproduce
from runner.cli.render.reproduce import details
from runner.reproduce.diff import first_difference
from runner.reproduce.labels import LABELS, label_of
from runner.reproduce.report import ReproduceReport

HELPDESK = Path(__file__).resolve().parents[3] / "examples" / "helpdesk" / "traces"

SYSTEM = {"role": "system", "content": "You are a help-desk assistant."}


def _turn(index: int, **request: Any) -> dict[str, Any]:
    base = {"model": "gpt-4o-2024-08-06", "messages": [SYSTEM], "tools": [{"name": "kb.search"}]}
    return {"index": index, "tool": "model", "request": {**base, **request}}


def _tool(index: int, tool: str = "kb.search", **args: Any) -> dict[str, Any]:
    return {"index": index, "tool": tool, "args": args or {"query": "refund"}}


def _miss(call: dict[str, Any]) -> dict[str, Any]:
    """A replayed turn the replay provider could not serve (its error as it writes it)."""
    message = "model turn 0 (call 0) differs from its recording: settings differ"
    return {**call, "error": {"class": "ReplayDivergence", "message": message}}


def _label(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]], **kw: Any) -> str:
    difference = first_difference(recorded, replayed, kw.pop("divergences", []))
    assert difference is not None
    index = difference["index"]
    mine = next((c for c in replayed if c["index"] == index), None)
    theirs = next((c for c in recorded if c["index"] == index), None)
    label, rule = label_of(difference, theirs, mine, recorded, kw.pop("environment", []))
    assert label in LABELS and rule
    return label


def test_the_incomplete_example_trace_is_an_extra_turn() -> None:
    """The documented trace whose call #3 was removed: the replay makes one call more."""
    recorded = [
        json.loads(line)
        for line in (HELPDESK / "incomplete.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "call"
    ]
    replayed = [c for c in recorded if c["index"] < 3]
    search = {"index": 3, "tool": "kb.search", "args": {"query": "charged twice this month"}}
    note = {"kind": "unrecorded_call", "index": 3, "tool": "kb.search", "message": "no call #3"}
    assert _label(recorded, [*replayed, search], divergences=[note]) == "extra_turn"


def test_a_call_the_replay_never_made_is_a_missing_turn() -> None:
    assert _label([_tool(0), _tool(1, "reply.draft")], [_tool(0)]) == "missing_turn"


def test_another_tool_and_other_arguments_are_told_apart() -> None:
    assert _label([_tool(0), _tool(1)], [_tool(0), _tool(1, "notes.append")]) == "different_tool"
    assert _label([_tool(0)], [_tool(0, query="refunds")]) == "different_arguments"
    assert _label([_turn(0)], [_tool(0)]) == "different_tool"  # a tool where a turn was


@pytest.mark.parametrize(
    ("change", "label"),
    [
        ({"model": "gpt-4o-mini"}, "model_drift"),
        ({"tools": [{"name": "kb.search", "parameters": {"lang": "str"}}]}, "tool_schema_changed"),
        ({"messages": [{**SYSTEM, "content": "Be brief."}]}, "prompt_changed"),
        ({"system": "Anthropic's own system field"}, "prompt_changed"),
        ({"temperature": 0.7}, "prompt_changed"),
    ],
)
def test_a_model_request_miss_is_labelled_by_what_differs(
    change: dict[str, Any], label: str
) -> None:
    assert _label([_turn(0)], [_miss(_turn(0, **change))]) == label


def test_the_model_id_wins_over_the_prompt_when_both_changed() -> None:
    replayed = _miss(_turn(0, model="claude", messages=[]))
    assert _label([_turn(0)], [replayed]) == "model_drift"


def test_a_turn_past_every_recorded_turn_is_an_extra_turn() -> None:
    message = "unrecorded model turn: all 1 recorded model turns already used"
    replayed = [_turn(0), _tool(1), {**_turn(2), "error": {"class": "X", "message": message}}]
    recorded = [_turn(0), _tool(1), _tool(2, "reply.draft")]
    difference = first_difference(recorded, replayed, [])
    assert difference is not None and difference["index"] == 2
    difference = {**difference, "message": message}
    assert label_of(difference, recorded[2], replayed[2], recorded)[0] == "extra_turn"


def test_the_same_call_with_another_result_is_the_environment_naming_what_changed() -> None:
    note = {"kind": "pure_result", "index": 0, "tool": "text.summarize", "message": "differs"}
    call = _tool(0, "text.summarize", text="hi")
    difference = first_difference([call], [call], [note])
    assert difference is not None
    env = [{"field": "python", "recorded": "3.11.7", "now": "3.12.1"}]
    label, rule = label_of(difference, call, call, [call], env)
    assert label == "environment" and "python" in rule
    assert "nondeterminism" in label_of(difference, call, call, [call], [])[1]


def test_a_miss_compares_with_the_turn_the_provider_named() -> None:
    """Calls shifted by one: the replay's turn #2 was compared with the recorded turn #1."""
    recorded = [_tool(0), _turn(1), _tool(2)]
    replayed = [
        _tool(0),
        _tool(1, "notes.append"),
        {**_turn(2, model="other"), "error": {"class": "ReplayDivergence", "message": ""}},
    ]
    message = "model turn 0 (call 1) differs from its recording: settings differ in model"
    difference = {"index": 2, "tool": "model", "kind": "model_request", "message": message}
    assert label_of(difference, recorded[2], replayed[2], recorded)[0] == "model_drift"


def test_terminal_and_page_show_the_label_and_its_rule() -> None:
    difference = {
        "index": 3,
        "tool": "kb.search",
        "kind": "unrecorded_call",
        "message": "no call",
        "summary": "call #3 kb.search: no call",
        "label": "extra_turn",
        "label_rule": "the recording has no call at this index",
    }
    report = ReproduceReport("t.jsonl", "not_reproduced", "x", first_difference=difference)
    text = "\n".join(details(report))
    assert "first difference [extra_turn]: call #3 kb.search" in text
    assert "why extra_turn: the recording has no call at this index" in text
    assert report.to_json()["first_difference"]["label"] == "extra_turn"
    page = render_reproduce([report])
    assert '<span class="tag">extra_turn</span>' in page
    assert "Why extra_turn: the recording has no call at this index" in page
