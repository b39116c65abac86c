"""An anchored fork is graded like an episode of its task (`runner.reproduce.fork.judge_fork`).

A new user saw every successful fork score 1.00: the rubric ran with no expectations. Now the
expectations come from ``--tasks FILE`` or the recorded run's calls when it succeeded; without
any the fork is not graded and the report says so (no score).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli.render.fork import fork_lines
from runner.errors import InputError
from runner.reproduce.fork import judge_fork
from runner.tracetools.anchor import load_anchor
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"
FAILING = HELPDESK / "traces" / "failing.jsonl"
SUCCEEDED = HELPDESK / "traces" / "incomplete.jsonl"  # a succeeded run (one call line cut)
TASKS = HELPDESK / "tasks.jsonl"
DESCRIBED = {"name": "helpdesk-triage", "version": "4", "content_hash": "h", "path": "v4.yaml"}


def _recovered(tmp_path: Path) -> Path:
    """The failing trace as a fork's own trace whose fresh part succeeded (no call after K)."""
    lines = [json.loads(line) for line in FAILING.read_text(encoding="utf-8").splitlines()]
    end = lines[-1]
    end.update(status="succeeded", exit_code=0, output="Ticket T-1000: we are on it.")
    for key in ("failure", "failure_signature", "error"):
        end.pop(key, None)
    path = tmp_path / "fork.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_fork_without_expectations_is_not_graded_and_says_so(tmp_path: Path) -> None:
    anchor = load_anchor(FAILING, 2)
    assert anchor.task.expected is None and anchor.expected_from is None
    report = judge_fork("a", list(anchor.prefix), 2, DESCRIBED, _recovered(tmp_path), anchor=anchor)
    assert report.outcome == "recovered"
    assert report.grade is not None and report.grade["score"] is None  # was 1.0
    (why,) = report.grade["reasons"]
    assert "task ticket-1000 has no expectations to grade against" in why
    text = "\n".join(fork_lines(report))
    assert "grade: none: not graded: task ticket-1000 has no expectations" in text
    assert "1.00" not in text


def test_a_task_file_gives_the_expectations_the_fork_is_graded_against(tmp_path: Path) -> None:
    anchor = load_anchor(FAILING, 2, tasks=TASKS)
    assert anchor.expected_from == f"task file {TASKS}"
    report = judge_fork("a", list(anchor.prefix), 2, DESCRIBED, _recovered(tmp_path), anchor=anchor)
    assert report.grade is not None
    # one expected call of two made in order (kb.search never), the advice text absent
    assert report.grade["score"] == pytest.approx((0.0 + 0.5) / 2)
    assert any("never made: kb.search" in r for r in report.grade["reasons"])
    assert "grade (rubric): 0.25 against task file" in "\n".join(fork_lines(report))


def test_a_succeeded_recording_is_graded_against_its_own_calls() -> None:
    anchor = load_anchor(SUCCEEDED, 1)
    assert anchor.expected_from == "the recorded run's calls"
    assert anchor.task.expected is not None
    assert [c["tool"] for c in anchor.task.expected["tool_calls"]][:1] == ["ticket.get"]
    assert "output" not in anchor.task.expected  # production's answer is no answer key


def test_a_task_file_without_the_traces_task_or_its_expectations_is_invalid(
    tmp_path: Path,
) -> None:
    other = tmp_path / "tasks.jsonl"
    other.write_text('{"task_id": "ticket-9", "input": {}}\n', encoding="utf-8")
    with pytest.raises(InputError, match="no task 'ticket-1000'"):
        load_anchor(FAILING, 2, tasks=other)
    other.write_text('{"task_id": "ticket-1000", "input": {}}\n', encoding="utf-8")
    with pytest.raises(InputError, match="has no expected block") as caught:
        load_anchor(FAILING, 2, tasks=other)
    assert caught.value.fields["field"] == "expected"
