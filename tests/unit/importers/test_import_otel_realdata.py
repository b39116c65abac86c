"""`import otel` on real input: every agentevals OTLP fixture against its truth file.

The fixtures (Google ADK 2.10 recordings, Apache-2.0) live outside the repository, under the
realdata folder (`tests.support.realdata`): absent, these tests skip, and fail under ``CI=true``.

Compared per fixture: the tool calls in order (name, arguments, result after JSON parsing and
unwrapping ADK's ``{"result": X}``, error flag and error type), the token totals, each turn's
user text and final text, and the number of logical model calls. The truth files of this
corpus carry no ``llm_calls``; the counts below were read off the fixtures by hand (one
``generate_content`` provider span inside each ``call_llm`` wrapper: one logical call each).
A truth file's own ``llm_calls`` wins when it has one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.importers.otel import read_otel
from runner.importers.output import write_import
from runner.tracetools.reader import read_trace
from tests.support.realdata import realdata

LOGICAL_CALLS = {"S1": 1, "S2": 3, "S3": 4, "S4a": 3, "S4b": 3, "S5": 2, "S6a": 1, "S6b": 2}
MODES = ("v1_default", "v2_default")


def fixtures() -> list[str]:
    return [f"{mode}/{name}" for mode in MODES for name in LOGICAL_CALLS]


def result_of(call: dict[str, Any]) -> Any:
    body = call.get("body")
    if body is None:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return body
    if isinstance(value, dict) and list(value) == ["result"]:
        return value["result"]
    return value


def turns_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's calls cut into user exchanges, in the truth file's vocabulary."""
    head, calls = lines[0], [x for x in lines if x["type"] == "call"]
    turns = [{"user_text": head["task_input"].get("message"), "tool_calls": [], "final": None}]
    for call in calls:
        if call["tool"] == "user":
            message = json.loads(call["body"])["message"]
            turns.append({"user_text": message["content"], "tool_calls": [], "final": None})
        elif call["tool"] == "model":
            message = json.loads(call["body"])["message"]
            if not message.get("tool_calls"):
                turns[-1]["final"] = message.get("content")
        else:
            error = call.get("error") or {}
            turns[-1]["tool_calls"].append(
                {
                    "name": call["tool"],
                    "args": call["args"],
                    "result": result_of(call),
                    "is_error": bool(error),
                    "error_type": error.get("class"),
                }
            )
    return turns


@pytest.mark.parametrize("fixture", fixtures())
def test_fixture_matches_its_truth(fixture: str, tmp_path: Path) -> None:
    source = realdata("otel-agentevals", "adk_py", f"{fixture}.json")
    truth = json.loads(source.with_suffix(".truth.json").read_text(encoding="utf-8"))
    report = write_import(read_otel([source]), tmp_path, {})
    traces = sorted((tmp_path / "traces").glob("*.jsonl"))
    assert len(traces) == report["runs"], report
    runs = {}
    for path in traces:
        assert read_trace(path).problems == ()
        runs[path] = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    # one session per fixture; an agent called as a tool (S4b) is a run of its own, linked
    (main,) = [p for p, lines in runs.items() if "parent_run" not in lines[0]["meta"]]
    lines = runs[main]
    head, end = lines[0], lines[-1]
    links = {
        c["meta"]["subagent_run"]: c["tool"]
        for c in lines
        if c["type"] == "call" and "subagent_run" in c.get("meta", {})
    }
    subagents = {lines[0]["run_id"]: lines for p, lines in runs.items() if p != main}
    assert set(links) == set(subagents)
    for run_id, sub in subagents.items():
        assert sub[0]["meta"]["parent_run"] == head["run_id"]
        assert sub[0]["meta"]["parent_call"]["tool"] == links[run_id]

    turns = turns_of(lines)
    assert len(turns) == len(truth["turns"])
    for got, want in zip(turns, truth["turns"], strict=True):
        assert got["user_text"] == want["user_text"]
        assert got["final"] == want["final_text"]
        assert got["tool_calls"] == want["tool_calls"]
    assert (end["meter"]["tokens_in"], end["meter"]["tokens_out"]) == (
        truth["tokens"]["input"],
        truth["tokens"]["output"],
    )
    per_turn = [t.get("llm_calls") for t in truth["turns"]]
    expected = sum(per_turn) if all(n is not None for n in per_turn) else None
    expected = expected or LOGICAL_CALLS[fixture.split("/")[1]]
    assert head["meta"]["logical_model_calls"] == expected
    # a wrapper and its provider span are one call: no model line is counted twice
    model_lines = sum(1 for x in lines if x.get("tool") == "model")
    assert model_lines == expected - head["meta"]["nested_model_calls"]
    key = truth.get("session_key")
    if key is not None:
        assert head["meta"]["session_key"]["value"] == key["value"]
    else:
        assert head["meta"]["session_key"] == {
            "kind": "conversation",
            "value": f"sess-{fixture.split('/')[1]}-{fixture.split('/')[0]}",
        }
    assert report["notes"] == []  # nothing in these files needs a warning


def test_every_fixture_of_the_folder_is_covered() -> None:
    folder = realdata("otel-agentevals", "adk_py")
    found = sorted(
        str(p.relative_to(folder).with_suffix(""))
        for p in folder.rglob("*.json")
        if not p.name.endswith(".truth.json")
    )
    assert found == sorted(fixtures())


def test_the_aborted_run_fails_at_the_tool_that_raised(tmp_path: Path) -> None:
    source = realdata("otel-agentevals", "adk_py", "v1_default", "S6a.json")
    write_import(read_otel([source]), tmp_path, {})
    (trace,) = (tmp_path / "traces").glob("*.jsonl")
    lines = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()]
    end = lines[-1]
    assert end["status"] == "failed"
    assert end["failure"] == {
        "call_index": 1,
        "tool": "get_stock_price",
        "error_class": "ValueError",
        "exit_code": 1,
    }
    assert end["error"]["message"] == "ticker not found: XYZ"
    assert lines[2]["error"] == {"class": "ValueError", "message": "ticker not found: XYZ"}
    # the source aborted on the tool's error: its workflow raises it too, so that
    # reproduce fails at the same call instead of handing the error back to the model
    workflow = lines[0]["workflow"]["content"]
    assert "tool_errors: raise" in workflow
