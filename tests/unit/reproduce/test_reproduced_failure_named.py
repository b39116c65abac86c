"""Reproduce names what happened: the failure by call, tool, error class and message (inert)."""

from __future__ import annotations

import pytest

from runner.cli.render.html.render import render_reproduce
from runner.cli.render.reproduce import print_reports
from runner.reproduce.diff import FAILURE_MESSAGE_CHARS, outcome_of
from runner.reproduce.report import ReproduceReport

END = {
    "type": "end",
    "status": "failed",
    "failure": {"call_index": 1, "tool": "customer.get", "error_class": "KeyError", "exit_code": 1},
}
CALLS = [
    {"index": 0, "tool": "ticket.get", "args": {}},
    {"index": 1, "tool": "customer.get", "error": {"class": "KeyError", "message": "'C-200'"}},
]


def test_outcome_of_carries_the_failing_calls_message() -> None:
    assert outcome_of(END, CALLS)["failure"]["message"] == "'C-200'"
    assert "message" not in outcome_of(END)["failure"]  # no calls given: nothing invented
    other = [{**CALLS[1], "error": {"class": "ValueError", "message": "x"}}]
    assert "message" not in outcome_of(END, other)["failure"]  # another error: not this one
    long = [{**CALLS[1], "error": {"class": "KeyError", "message": "k" * 2000}}]
    failure = outcome_of(END, long)["failure"]
    assert len(failure["message"]) == FAILURE_MESSAGE_CHARS and failure["message_chars"] == 2000


def _report(message: str) -> ReproduceReport:
    failure = {**END["failure"], "message": message}
    side = {"status": "failed", "failure": failure, "failure_signature": "e0c6cf7ce3b0bc11" * 4}
    return ReproduceReport(
        input="traces/failing.jsonl",
        outcome="reproduced",
        reason="the same failure signature, the same calls",
        recorded=side,
        replayed=side,
    )


def test_the_terminal_and_the_page_name_the_reproduced_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _report("'C-200' \x1b]0;PWNED\x07")
    print_reports([report])
    printed = capsys.readouterr().out
    assert "reproduced failure: call #1 customer.get raised KeyError: 'C-200'" in printed
    assert "\x1b" not in printed and "\\x1b]0;PWNED\\x07" in printed  # inert
    print_reports([report, report])  # the table of several traces says it too
    table = capsys.readouterr().out
    assert "KeyError" in table and "customer.get" in table
    page = render_reproduce([_report("'C-200' <script>x</script>")])
    assert "reproduced failure</th><td><b>call #1 customer.get raised KeyError: " in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x</script>" not in page
