"""tasks extract: recorded runs become valid task lines (input, observations, expected)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.domain.tasks import load_tasks
from runner.errors import InputError
from runner.orchestrator.tasks_extract import extract_tasks
from runner.traceformat import decode_body

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "helpdesk" / "traces"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_failed_run_gives_input_clock_and_read_observations_without_expected(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tasks.jsonl"
    (task,) = extract_tasks([GOLDEN / "failing.jsonl"], out)
    run = _lines(GOLDEN / "failing.jsonl")[0]
    assert task["task_id"] == "gold-1" and task["input"] == run["task_input"]
    assert task["clock_start"] == run["clock"]["start"] and "expected" not in task
    fetch, lookup, customer = task["observations"]
    assert [o["tool"] for o in task["observations"]] == [
        "ticket.fetch",
        "kb.lookup",
        "customer.get",
    ]
    # a raw I/O call becomes its tool-level value: shadow serves return values, not HTTP
    assert json.loads(decode_body(fetch) or b"") == {
        "id": "T-7",
        "subject": "refund for a double charge",
        "customer": "C-404",
    }
    assert json.loads(lookup["body"]) == "Refunds are paid back within 5 business days."
    assert customer["error"] == {"class": "KeyError", "message": "'C-404'"}
    loaded = load_tasks(out)
    assert loaded.errors == [] and list(loaded.tasks) == ["gold-1"]


def test_a_succeeded_run_gives_expected_output_and_tool_calls_and_ids_stay_unique(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tasks.jsonl"
    trace = EXAMPLES / "incomplete.jsonl"  # a succeeded run (one response later removed)
    tasks = extract_tasks([trace, trace], out)
    assert [t["task_id"] for t in tasks] == ["ticket-1002", "ticket-1002-2"]
    end = _lines(trace)[-1]
    expected = tasks[0]["expected"]
    assert expected["output"] == end["output"]
    assert [c["tool"] for c in expected["tool_calls"]] == [
        "ticket.get",
        "customer.get",
        "notes.append",
        "reply.draft",
    ]
    assert load_tasks(out).errors == []


def test_an_unreadable_trace_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        extract_tasks([GOLDEN / "failing.jsonl", bad], tmp_path / "tasks.jsonl")
    assert not (tmp_path / "tasks.jsonl").exists()
