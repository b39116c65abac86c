"""Summaries of traces read them line by line: lint, grading and the report never hold a trace.

Grading and the report loaded traces whole (a flooded run's 195 MB trace cost
the host gigabytes). Here a trace of 40 calls with a 1 MiB body each (40 MiB) is summarised
while `tracemalloc` watches: the peak stays a few lines' worth, far below the trace.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.grading import Result
from runner.submit.report import _records, unrecorded_reads
from runner.submit.scheduler import PairOutcome
from runner.trace.format import failure_signature
from runner.tracetools.lint import lint_trace

CALLS = 40
BODY = "b" * (1024 * 1024 - 64)
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "trace.jsonl"
    run = {
        "v": 1,
        "type": "run",
        "run_id": "run-1",
        "task_id": "t1",
        "task_input": {},
        "workflow": {"name": "w", "version": "1", "hash": "0" * 64, "content": ""},
        "purpose": "replay",
        "backend": "docker",
        "clock": {"start": 0.0, "step_s": 1.0},
        "seed": 0,
        "environment": {"tools": {"kb.search": "a" * 64}},
    }
    with path.open("w", encoding="ascii") as out:
        out.write(json.dumps(run) + "\n")
        for i in range(CALLS):
            call = {
                "v": 1,
                "type": "call",
                "index": i,
                "step_id": "s",
                "tool": "kb.search",
                "effect": "read",
                "args": {"q": i},
                "body": BODY,
                "body_encoding": "text",
                "schema_hash": "a" * 64,
                "clock": 1.0,
            }
            if i == CALLS - 1:
                call["error"] = {
                    "class": "runner.wire.errors.UnrecordedCall",
                    "message": "no observation",
                }
            out.write(json.dumps(call) + "\n")
        failure = {
            "call_index": CALLS - 1,
            "tool": "workflow",
            "error_class": "limit_exceeded",
            "exit_code": 125,
        }
        end = {
            "v": 1,
            "type": "end",
            "status": "limit_exceeded",
            "exit_code": 125,
            "failure": failure,
            "failure_signature": failure_signature(CALLS - 1, "workflow", "limit_exceeded", 125),
            "limit": {"name": "max_calls", "value": CALLS},
        }
        out.write(json.dumps(end) + "\n")
    assert path.stat().st_size > CALLS * (MIB - 100)
    return path


def _peak(work: Callable[[], Any]) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        result = work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak / MIB


def test_lint_keeps_verdicts_not_calls(big_trace: Path) -> None:
    result, peak = _peak(lambda: lint_trace(big_trace))
    assert result.errors == () and len(result.calls) == CALLS
    assert result.failure_signature.ok, result.failure_signature
    assert peak < 12, f"lint held {peak:.0f} MiB of a {CALLS} MiB trace"


def test_grading_reads_the_trace_line_by_line(big_trace: Path) -> None:
    result, peak = _peak(lambda: Result.from_trace("v1", _records(str(big_trace))))
    assert result.status == "limit_exceeded" and len(result.tool_calls) == CALLS
    assert peak < 12, f"grading held {peak:.0f} MiB of a {CALLS} MiB trace"


def test_the_report_reads_the_trace_line_by_line(big_trace: Path) -> None:
    pairs = [PairOutcome("v1", "t1", trace=str(big_trace))]
    found, peak = _peak(lambda: unrecorded_reads(pairs))
    assert found["v1"]["count"] == 1
    assert peak < 12, f"the report held {peak:.0f} MiB of a {CALLS} MiB trace"
