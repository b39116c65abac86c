"""tasks extract: recorded runs become valid task lines (input, observations, expected)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.domain.tasks import load_tasks
from runner.errors import InputError
from runner.trace.format import decode_body
from runner.tracetools.tasks_extract import extract_tasks
from tests.support.paths import REPO, TESTS

GOLDEN = TESTS / "fixtures" / "golden"
EXAMPLES = REPO / "examples" / "helpdesk" / "traces"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_failed_run_gives_input_clock_and_read_observations_without_expected(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tasks.jsonl"
    (task,) = extract_tasks([GOLDEN / "failing.jsonl"], out).tasks
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


def test_a_succeeded_run_gives_expected_output_and_tool_calls_and_the_first_of_an_id_wins(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tasks.jsonl"
    trace = EXAMPLES / "incomplete.jsonl"  # a succeeded run (one response later removed)
    done = extract_tasks([trace, trace], out)
    tasks = done.tasks  # a second trace of one task id is left out, never renamed
    assert [t["task_id"] for t in tasks] == ["ticket-1002"]
    assert done.duplicates == [(trace, "ticket-1002", trace)]
    end = _lines(trace)[-1]
    expected = tasks[0]["expected"]
    # the production output is no answer key: kept for reference, never graded (a fixed
    # version would lose to it); the user writes expected.output from it
    assert "output" not in expected and tasks[0]["recorded_output"] == end["output"]
    assert [c["tool"] for c in expected["tool_calls"]] == [
        "ticket.get",
        "customer.get",
        "notes.append",
        "reply.draft",
    ]
    loaded = load_tasks(out)
    assert loaded.errors == []
    assert loaded.tasks["ticket-1002"].record()["recorded_output"] == end["output"]


def test_a_fixed_answer_does_not_lose_to_the_recorded_one_unless_asked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from runner.cli.app import app
    from runner.grading.model import Result, ToolCall
    from runner.grading.rubric import score

    trace = EXAMPLES / "incomplete.jsonl"
    recorded = _lines(trace)[-1]["output"]
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["tasks", "extract", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 task(s) keep their recorded output as recorded_output" in result.output
    task = load_tasks(out).tasks["ticket-1002"]
    assert task.expected is not None and task.recorded_output == recorded
    calls = tuple(ToolCall(c["tool"], c.get("args", {})) for c in task.expected["tool_calls"])
    production = Result("v1", "succeeded", recorded, calls)
    fixed = Result("v2", "succeeded", "a corrected answer", calls)
    assert score(fixed, task.expected) == score(production, task.expected) == 1.0

    old = CliRunner().invoke(
        app, ["tasks", "extract", str(trace), "-o", str(out), "--expect-recorded-output"]
    )
    assert old.exit_code == 0, old.output
    asked = load_tasks(out).tasks["ticket-1002"]
    assert asked.expected is not None and asked.expected["output"] == recorded
    assert asked.recorded_output is None  # the old rule, asked for: the fix loses
    assert score(fixed, asked.expected) < score(production, asked.expected)


def test_an_unreadable_trace_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        extract_tasks([GOLDEN / "failing.jsonl", bad], tmp_path / "tasks.jsonl")
    assert not (tmp_path / "tasks.jsonl").exists()


def _with(path: Path, tmp_path: Path, name: str, **changes: Any) -> Path:
    lines = _lines(path)
    end = changes.pop("end_status", None)
    lines[0].update(changes)
    if end is not None:
        lines[-1]["status"] = end
    out = tmp_path / name
    out.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return out


def test_only_recorded_production_runs_by_default_with_a_summary(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from runner.cli.app import app

    folder = tmp_path / "traces"
    folder.mkdir()
    _with(GOLDEN / "failing.jsonl", folder, "a-live.jsonl")
    _with(GOLDEN / "failing.jsonl", folder, "b-replay.jsonl", purpose="replay", task_id="r-1")
    _with(GOLDEN / "failing.jsonl", folder, "c-replay.jsonl", purpose="replay", task_id="r-2")
    _with(EXAMPLES / "incomplete.jsonl", folder, "d-ceiling.jsonl", end_status="ceiling_reached")
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["tasks", "extract", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert list(load_tasks(out).tasks) == ["gold-1"]
    assert "skipped 2 trace(s) with purpose replay; --all to include them" in result.output
    assert "skipped 1 trace(s) stopped by a ceiling; --all to include them" in result.output
    everything = CliRunner().invoke(app, ["tasks", "extract", str(folder), "-o", str(out), "--all"])
    assert everything.exit_code == 0, everything.output
    assert list(load_tasks(out).tasks) == ["gold-1", "r-1", "r-2", "ticket-1002"]


def test_nothing_left_to_take_is_an_input_error_and_writes_nothing(tmp_path: Path) -> None:
    replay = _with(GOLDEN / "failing.jsonl", tmp_path, "r.jsonl", purpose="replay")
    with pytest.raises(InputError, match=r"no recorded production run.*--all"):
        extract_tasks([replay], tmp_path / "tasks.jsonl")
    assert not (tmp_path / "tasks.jsonl").exists()


def test_a_run_cut_by_a_policy_limit_is_no_recorded_task(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from runner.cli.app import app

    folder = tmp_path / "traces"
    folder.mkdir()
    _with(GOLDEN / "failing.jsonl", folder, "a-live.jsonl")
    _with(EXAMPLES / "incomplete.jsonl", folder, "b-cut.jsonl", end_status="limit_exceeded")
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["tasks", "extract", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert list(load_tasks(out).tasks) == ["gold-1"]
    assert "skipped 1 trace(s) cut by a policy limit; --all to include them" in result.output


@pytest.mark.parametrize("newer_first", [True, False])
def test_of_two_traces_of_one_task_the_one_recorded_last_is_kept(
    tmp_path: Path, newer_first: bool
) -> None:
    """Was: the first given (a folder's name order), here a broken earlier recording."""
    lines = (EXAMPLES / "incomplete.jsonl").read_text().splitlines()
    run = json.loads(lines[0])
    older, newer = tmp_path / "prod-1.jsonl", tmp_path / "prod-2.jsonl"
    newer.write_text("\n".join(lines) + "\n")
    run["clock"]["start"] -= 3600  # recorded an hour earlier
    older.write_text("\n".join([json.dumps(run), *lines[1:]]) + "\n")
    order = [newer, older] if newer_first else [older, newer]
    done = extract_tasks(order, tmp_path / "tasks.jsonl")
    assert done.duplicates == [(older, "ticket-1002", newer)]
    assert len(done.tasks) == 1
