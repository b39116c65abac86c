"""Imports reproduce against what they wrote, checked on the written files.

Each failed before: a run that ended after a tool result replayed past it (the workflow's
``max_turns`` was the source's largest), a source without tool definitions wrote traces whose
requests listed no tools while the workflow offered them, dotted tool names were offered as
``ticket.get`` in the trace and ``ticket__get`` by the runtime, and a run ending on a tool
result recorded no output where the runtime returns the last turn's content.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from runner.domain.workflow import load_workflow
from runner.importers.openai_messages import read_openai_messages
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.tracetools.lint import lint_trace
from tests.support.paths import TESTS
from tests.support.tracelines import resolved_lines

FIX = TESTS / "fixtures" / "import"


def _lines(path: Path) -> list[dict[str, Any]]:
    return resolved_lines(path)


def _agent(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(lines[0]["workflow"]["content"])["steps"][0]["agent"]  # type: ignore[no-any-return]


def test_a_run_that_ended_after_a_tool_result_gets_its_recorded_turns_as_max_turns(
    tmp_path: Path,
) -> None:
    write_import(read_openai_messages(FIX / "handoff.jsonl"), tmp_path, {})
    handoff, limit, answered = (
        _lines(tmp_path / "traces" / f"handoff-{n}.jsonl") for n in (1, 2, 3)
    )
    assert handoff[-2]["tool"] == "transfer_to_human"  # the recording ends on a tool result
    assert _agent(handoff)["max_turns"] == 2 and _agent(limit)["max_turns"] == 2
    assert _agent(answered)["max_turns"] == 2  # the shape's: a final answer ends the loop
    # the output is the last model turn's content, as the agent step returns it
    assert handoff[-1]["output"] == "I am handing you over to a colleague."
    assert limit[-1]["output"] is None and answered[-1]["output"] == "Yes, order 10 has shipped."
    for lines in (handoff, limit, answered):
        load_workflow(tmp_path / lines[0]["meta"]["workflow_file"])  # a valid workflow


def test_the_tau2_step_limit_and_hand_off_end_where_the_recording_ended(tmp_path: Path) -> None:
    write_import(read_tau2(FIX / "tau2-handoff" / "results.json"), tmp_path, {})
    for trace in sorted((tmp_path / "traces").glob("*.jsonl")):
        lines = _lines(trace)
        models = sum(1 for line in lines if line.get("tool") == "model")
        assert lines[-2]["tool"] not in ("model", "user")
        assert _agent(lines)["max_turns"] == models == 2


def test_dotted_names_are_offered_as_function_names_in_trace_and_workflow(tmp_path: Path) -> None:
    write_import(read_openai_messages(FIX / "chat.jsonl"), tmp_path, {})
    lines = _lines(tmp_path / "traces" / "chat-1.jsonl")
    model = lines[1]
    names = [t["function"]["name"] for t in model["request"]["tools"]]
    assert names == ["ticket__get", "ticket__close", "kb_search"]
    assert model["meta"]["request_tools_rewritten"] is True  # the source wrote ticket.get
    assert model["request"]["tools"][0]["function"]["parameters"]["required"] == ["ticket_id"]
    agent = _agent(lines)
    assert agent["tools"] == ["ticket.get", "ticket.close", "kb_search"]
    assert "unlisted_tools" not in agent
    served = json.loads(model["body"])["message"]["tool_calls"][0]["function"]["name"]
    assert served == "ticket.get"  # the recorded turn stays verbatim (mapped back by id)


def test_tools_known_by_name_only_are_unlisted_in_trace_and_workflow_and_lint_says_so(
    tmp_path: Path,
) -> None:
    report = write_import(read_openai_messages(FIX / "chat-bare.json"), tmp_path, {})
    assert any("known by name only" in n and "--tools" in n for n in report["notes"])
    trace = tmp_path / "traces" / "chat-bare-1.jsonl"
    lines = _lines(trace)
    assert all("tools" not in line["request"] for line in lines if line.get("tool") == "model")
    agent = _agent(lines)
    assert agent["unlisted_tools"] == agent["tools"] == ["ticket.get", "kb_search", "ticket.close"]
    linted = lint_trace(trace).to_json()
    tool_calls = [c for c in linted["calls"] if c["kind"] == "tool"]
    assert tool_calls and all(
        c["fields"]["schema_hash"]["status"] == "missing"
        and "known by name only" in c["fields"]["schema_hash"]["detail"]
        for c in tool_calls
    )


def test_with_tools_the_same_file_lists_them_and_lint_is_satisfied(tmp_path: Path) -> None:
    write_import(read_openai_messages(FIX / "chat-bare.json", FIX / "tools.json"), tmp_path, {})
    trace = tmp_path / "traces" / "chat-bare-1.jsonl"
    lines = _lines(trace)
    assert "unlisted_tools" not in _agent(lines)
    linted = lint_trace(trace).to_json()
    assert all(
        c["fields"]["schema_hash"]["status"] == "ok" for c in linted["calls"] if c["kind"] == "tool"
    )


def test_a_tau2_results_file_without_its_tools_file_agrees_with_its_workflow(
    tmp_path: Path,
) -> None:
    source = tmp_path / "alone" / "results.json"
    source.parent.mkdir()
    shutil.copy(FIX / "tau2-mini" / "results.json", source)
    report = write_import(read_tau2(source), tmp_path / "out", {})
    assert any("known by name only" in n for n in report["notes"])
    for trace in (tmp_path / "out" / "traces").glob("*.jsonl"):
        lines = _lines(trace)
        assert all("tools" not in x["request"] for x in lines if x.get("tool") == "model")
        assert set(_agent(lines)["unlisted_tools"]) == set(_agent(lines)["tools"])
