"""The report's "reads with no recording" counts the calls real traces record as unrecorded.

The report compared the short class name ``UnrecordedCall`` while the runtime
records the qualified one (``runner.wire.errors.UnrecordedCall``, `error_class_name`), so
the table was always empty. The trace here is written from the call records the real runtime
sent (tests/fixtures/runtime/fakehost.py runs it as a local process) through the host's own
trace writer: the shape a job's traces have.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import manifest_for, run_runtime, write_run_dir

from runner.submit.report import unrecorded_reads
from runner.submit.scheduler import PairOutcome
from runner.trace.writer import TraceWriter


def _obs(tool: str, args: Any, value: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args, "body": json.dumps(value), "body_encoding": "text"}


def _real_trace(tmp_path: Path) -> Path:
    steps = [
        {"id": "a", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
        {"id": "b", "tool": "ticket.get", "args": {"ticket_id": "T-2"}},
    ]
    task = {
        "task_id": "t1",
        "input": {},
        "observations": [_obs("ticket.get", {"ticket_id": "T-1"}, {})],
    }
    workflow = {"name": "w", "version": "1", "model": None, "steps": steps}
    run_dir = write_run_dir(
        tmp_path / "run", workflow, task, manifest_for({"ticket.get": "recorded"})
    )
    result = run_runtime(run_dir, tmp_path)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as trace:
        trace.header(
            run_id="run-1",
            task_id="t1",
            task_input={},
            workflow={"name": "w", "version": "1", "hash": "0" * 64, "content": ""},
            purpose="replay",
            backend="docker",
            clock={"start": 0.0, "step_s": 1.0},
            seed=0,
            environment={},
        )
        for record in result.calls:
            trace.call(record)
        trace.end({"status": result.episode["status"]})
    return path


def test_unrecorded_reads_of_a_real_trace_are_counted(tmp_path: Path) -> None:
    path = _real_trace(tmp_path)
    classes = [
        (json.loads(line).get("error") or {}).get("class") for line in path.read_text().splitlines()
    ]
    assert "runner.wire.errors.UnrecordedCall" in classes  # what traces really hold
    found = unrecorded_reads([PairOutcome("v1", "t1", trace=str(path))])
    assert found == {
        "v1": {
            "count": 1,
            "calls": [
                {
                    "task_id": "t1",
                    "repeat": 0,
                    "index": 1,
                    "tool": "ticket.get",
                    "args": {"ticket_id": "T-2"},
                }
            ],
        }
    }


def test_a_tool_error_class_that_only_ends_like_it_is_not_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [
        {"type": "run"},
        {
            "type": "call",
            "index": 0,
            "tool": "x.get",
            "args": {},
            "error": {"class": "mytools.UnrecordedCall", "message": "a tool's own error"},
        },
        {"type": "end", "status": "failed"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert unrecorded_reads([PairOutcome("v1", "t1", trace=str(path))]) == {}


def test_the_table_says_how_many_misses_the_json_lists() -> None:
    """257 misses, 100 listed in the JSON: the table said "+97 more, see --json", and 157 of
    them were listed nowhere (a new user's τ² job)."""
    import io

    from rich.console import Console

    from runner.cli.render.report import _render_unrecorded

    calls = [{"task_id": "t", "index": i, "tool": "get", "args": {}} for i in range(100)]
    out = io.StringIO()
    _render_unrecorded({"v1": {"count": 257, "calls": calls}}, Console(file=out, width=400))
    assert "+254 more: --json lists the first 100, the traces every one" in out.getvalue()


def test_a_hand_edited_unrecorded_block_is_an_input_error_naming_the_field() -> None:
    """``report JOB`` on a report.json whose miss count is text: a ValueError traceback."""
    import pytest

    from runner.errors import InputError
    from runner.submit.jobreport import JobReport

    for bad, field in [
        ({"v": {"count": "abc", "calls": []}}, "unrecorded.v.count"),
        ({"v": {"count": True, "calls": []}}, "unrecorded.v.count"),
        ({"v": {"count": 1, "calls": ["x"]}}, "unrecorded.v.calls"),
        ({"v": []}, "unrecorded.v"),
    ]:
        with pytest.raises(InputError) as caught:
            JobReport.from_json({"unrecorded": bad}, file="report.json")
        assert caught.value.fields["field"] == field, caught.value
