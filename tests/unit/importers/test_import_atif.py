"""`import atif`: Harbor ATIF trajectories become traces (tests/fixtures/import/atif/SOURCE.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.importers.atif import read_atif
from runner.importers.output import write_import
from tests.support.tracelines import resolved_lines

FIXTURE = Path(__file__).parents[2] / "fixtures" / "import" / "atif"


def _import(tmp_path: Path, *files: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    report = write_import(read_atif(list(files)), tmp_path / "out", {})
    traces = {p.stem: resolved_lines(p) for p in (tmp_path / "out" / "traces").glob("*.jsonl")}
    return report, traces


def test_the_specifications_example(tmp_path: Path) -> None:
    report, traces = _import(tmp_path, FIXTURE / "rfc-example.json")
    (lines,) = traces.values()
    calls = [x for x in lines if x["type"] == "call"]
    assert [c["tool"] for c in calls] == ["model", "financial_search", "financial_search", "model"]
    assert calls[1]["args"] == {"ticker": "GOOGL", "metric": "price"}
    assert calls[2]["body"] == "GOOGL volume: 1.5M shares traded."
    assert calls[0]["usage"] == {"prompt_tokens": 520, "completion_tokens": 80}
    assert calls[0]["model"] == "gemini-2.5-flash" and calls[0]["meta"]["reasoning_content_dropped"]
    assert lines[0]["meta"]["final_metrics"]["total_prompt_tokens"] == 1120
    assert (lines[-1]["meter"]["tokens_in"], lines[-1]["meter"]["tokens_out"]) == (1120, 124)
    assert lines[-1]["output"].startswith("As of October 11, 2025")
    assert report["explain"][str(FIXTURE / "rfc-example.json")]["read"]["trajectories"] == 1


def test_a_delegation_links_the_subagents_run_and_a_failed_result(tmp_path: Path) -> None:
    _, traces = _import(tmp_path, FIXTURE / "delegation.jsonl")
    parent, child = traces["atif-triage-7"], traces["atif-research-7a"]
    calls = [x for x in parent if x["type"] == "call"]
    assert calls[0]["request"]["messages"][0] == {
        "role": "system",
        "content": "You triage support tickets.",
    }
    assert calls[1]["error"] == {"class": "ToolError", "message": "database timeout"}
    research = next(c for c in calls if c["tool"] == "research")
    assert research["meta"]["subagent_run"] == "atif-research-7a"
    assert child[0]["task_input"] == {"message": "Known export timeouts?"}
    assert [c["tool"] for c in child if c["type"] == "call"] == ["model", "kb_search", "model"]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"schema_version": "1.4", "steps": []}, "is not ATIF-v1.x"),
        ({"schema_version": "ATIF-v1.2"}, "steps: required"),
        (
            {"schema_version": "ATIF-v1.2", "steps": [{"source": "robot", "message": "x"}]},
            "source 'robot' is not system, user or agent",
        ),
        (
            {
                "schema_version": "ATIF-v1.2",
                "steps": [{"source": "agent", "tool_calls": [{"function_name": "..."}]}],
            },
            "tool_calls[0].function_name",
        ),
    ],
)
def test_malformed_trajectories_are_refused_naming_the_field(
    tmp_path: Path, doc: dict[str, Any], problem: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_atif([path])
    assert problem in str(caught.value)


def test_a_trajectory_without_a_model_name_asks_the_replay_provider(tmp_path: Path) -> None:
    doc = {
        "schema_version": "ATIF-v1.5",
        "session_id": "s",
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "hi"},
            {"step_id": 2, "source": "agent", "message": "hello"},
        ],
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _, traces = _import(tmp_path, path)
    (lines,) = traces.values()
    assert "provider: replay" in lines[0]["workflow"]["content"]
    assert lines[-1]["output"] == "hello"
