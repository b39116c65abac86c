"""A failed episode names its cause: the divergence under an agent framework's own error.

A new user's finding: an MCP agent whose read tool had no observation ended ``failed`` with
``ExceptionGroup: unhandled errors in a TaskGroup`` on the terminal and the trace page; the
cause (``unrecorded call: tool 'notes.search' ...``) was only in the trace's ``divergences``.
Both failed on the old code (neither said ``notes.search``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.cli.render.episode import divergence_lines, print_episode
from runner.cli.render.html import render_trace
from runner.episode.request import EpisodeResult

ROOT = Path(__file__).resolve().parents[3]
RUN_LINE = json.loads(
    (ROOT / "examples" / "helpdesk" / "traces" / "failing.jsonl").read_text().splitlines()[0]
)
MESSAGE = (
    'unrecorded call: tool \'notes.search\' with arguments {"query":"vpn"}: no recorded call'
    " of this tool \x1b[2J(recorded tools: none)\nrun run-2: succeeded (episode exit code 0)"
)
DIVERGENCE = {
    "kind": "unrecorded_call",
    "index": 1,
    "tool": "notes.search",
    "message": MESSAGE,
    "args": {"query": "vpn"},
    "differing": [],
}
END: dict[str, Any] = {
    "v": 1,
    "type": "end",
    "status": "failed",
    "exit_code": 1,
    "error": {"class": "ExceptionGroup", "message": "unhandled errors in a TaskGroup"},
    "failure": {
        "call_index": 1,
        "tool": "workflow",
        "error_class": "ExceptionGroup",
        "exit_code": 1,
    },
    "failure_signature": "0" * 64,
    "divergences": [DIVERGENCE] * 5,
    "outbound": [],
    "coverage": "full",
    "meter": {"tokens_in": 0, "tokens_out": 0, "sandbox_s": 1.0},
}


def test_the_summary_names_the_divergence_under_the_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_episode(EpisodeResult("run-1", "failed", Path("t.jsonl"), END))
    out = capsys.readouterr().out
    assert "divergence (unrecorded_call): call 1 notes.search: unrecorded call" in out
    assert out.count("divergence (unrecorded_call)") == 3
    assert "... and 2 more divergences in the trace" in out
    assert "\x1b" not in out  # the message came from the sandbox: printed inert
    assert not any(line.startswith("run run-2") for line in out.splitlines())  # no forged line


def test_no_divergence_no_line() -> None:
    assert divergence_lines({"status": "failed"}) == []
    assert divergence_lines({"divergences": "not a list"}) == []


def test_the_trace_page_names_the_error_and_the_divergence(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    call = {
        "v": 1,
        "type": "call",
        "index": 1,
        "step_id": "agent",
        "tool": "notes.search",
        "effect": "read",
        "args": {"query": "vpn"},
        "error": {"class": "runner.wire.errors.UnrecordedCall", "message": MESSAGE},
    }
    trace.write_text("".join(json.dumps(line) + "\n" for line in (RUN_LINE, call, END)))
    page = render_trace(trace)
    assert "ExceptionGroup: unhandled errors in a TaskGroup" in page
    assert (
        "unrecorded_call: call #1 notes.search: unrecorded call: tool &#39;notes.search&#39;"
        in (page)
    )
