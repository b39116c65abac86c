"""Reproduce's terminal output: the first difference said once, and a totals line at the end."""

from __future__ import annotations

import pytest

from runner.cli.render.reproduce import print_reports
from runner.reproduce.diff import verdict
from runner.reproduce.report import ReproduceReport

RECORDED_END = {"type": "end", "status": "succeeded", "output": "done"}
RECORDED = [
    {"index": 0, "tool": "ticket.get", "args": {"id": "T-1"}, "result": {"id": "T-1"}},
    {"index": 1, "tool": "kb.search", "args": {"query": "refund"}, "result": []},
]


def _not_reproduced() -> ReproduceReport:
    """A replay whose second call asked for other arguments (the diff's own verdict)."""
    replayed = [RECORDED[0], {**RECORDED[1], "args": {"query": "charged twice"}}]
    end = {"type": "end", "status": "succeeded", "output": "done"}
    outcome, difference, reason = verdict(RECORDED, RECORDED_END, replayed, end)
    assert outcome == "not_reproduced" and difference is not None
    side = {"status": "succeeded", "failure": None, "failure_signature": None}
    return ReproduceReport(
        input="traces/changed.jsonl",
        outcome=outcome,
        reason=reason,
        recorded=side,
        replayed=side,
        first_difference=difference,
    )


def _reproduced() -> ReproduceReport:
    side = {"status": "succeeded", "failure": None, "failure_signature": None}
    return ReproduceReport(
        input="traces/ok.jsonl",
        outcome="reproduced",
        reason="the same success, the same calls",
        recorded=side,
        replayed=side,
    )


def test_the_first_difference_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    report = _not_reproduced()
    difference = report.first_difference
    assert difference is not None
    assert difference["summary"] in report.reason  # the JSON's reason keeps it: scripts read it
    print_reports([report])
    out = capsys.readouterr().out
    assert out.count(difference["message"]) == 1, out  # was twice: the reason, then the block
    assert out.count("first difference") == 1, out
    assert "first difference: call #1 kb.search" in out
    assert "  the same outcome, but the calls differ\n" in out


def test_a_totals_line_ends_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    print_reports([_reproduced(), _not_reproduced(), _reproduced()])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "3 traces: 2 reproduced, 1 not_reproduced"
    print_reports([_reproduced()])
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 trace: 1 reproduced"
