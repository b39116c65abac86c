"""Acceptance in real containers: the run's clock is every wall-clock read's clock.

A pure tool returns ``time.time()``, ``datetime.now()`` (the class imported by name at module
import), ``date.today()``, ``time.strftime()`` and what a Python child reads. Under a task whose
``clock_start`` is 2019-03-04T05:06:07 every one reads 2019-03-04; a run recorded with
``record`` (the machine's clock, one reading per call) reproduces; a non-Python child that
reads the clock is a coverage note saying so: a clock-only note (``partial: false``) under the
egress witness, which sees that child's network calls, so the egress coverage stays ``full``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli_json

START = 1551675967.0  # 2019-03-04T05:06:07Z

pytestmark = pytest.mark.docker

TOOLS = """
import datetime
import subprocess
import sys
import time
from datetime import datetime as imported_datetime

from runner.sdk import Effect, tool

CHILD = "import time; print(repr(time.time()))"


@tool("clock.read", effect=Effect.PURE, description="Everything that reads the time.")
def read() -> dict:
    first = time.time()
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    return {
        "time": first,
        "again": time.time(),
        "now": imported_datetime.now().isoformat(),
        "today": datetime.date.today().isoformat(),
        "strftime": time.strftime("%Y-%m-%d %H:%M:%S"),
        "child": float(child.stdout),
    }


@tool("clock.shell", effect=Effect.PURE, description="A non-Python child reads the clock.")
def shell() -> str:
    return subprocess.run(["date", "+%Y"], capture_output=True, text=True).stdout.strip()
"""

WORKFLOW = """\
name: clock
version: "1"
tools: [clock_tools]
steps:
  - id: read
    tool: clock.read
  - id: read_again
    tool: clock.read
  - id: shell
    tool: clock.shell
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    for name, text in (
        ("clock_tools.py", textwrap.dedent(TOOLS)),
        ("clock.yaml", WORKFLOW),
        (
            "tasks.jsonl",
            json.dumps({"task_id": "t1", "input": {}, "clock_start": "2019-03-04T05:06:07"}) + "\n",
        ),
    ):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _cli(args: list[str], cwd: Path, image: str) -> Any:
    code, summary, _ = run_cli_json(["--log-format", "json", *args], cwd, image)
    return code, summary


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == "call"]


def test_a_shadow_run_reads_the_tasks_clock_start_everywhere(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "clock")
    code, summary = _cli(
        ["run", "clock.yaml", "--tasks", "tasks.jsonl", "--task", "t1"], work, sandbox_image
    )
    assert code == 0 and summary["status"] == "succeeded", summary
    lines = _lines(Path(summary["trace"]))
    assert lines[0]["clock"] == {"start": START, "step_s": 1.0}
    first, second, shell = _calls(lines)
    for call, offset in ((first, 1), (second, 2)):
        body = json.loads(call["body"])
        reading = START + offset
        assert call["clock"] == body["time"] == body["again"] == body["child"] == reading
        assert body["now"] == f"2019-03-04T05:06:0{7 + offset}"
        assert body["today"] == "2019-03-04"
        assert body["strftime"] == f"2019-03-04 05:06:0{7 + offset}"
    assert shell["body"] != '"2019"'  # `date` is not Python: the machine's clock, and flagged
    notes = lines[-1]["coverage_detail"]
    assert any(n.get("clock") == "machine" and "date" in str(n.get("program")) for n in notes), (
        notes
    )
    assert all(n.get("partial") is False for n in notes), notes  # clock-only
    assert lines[-1]["coverage"] == "full", notes
    # the clock's own patching (ctypes, before the hook) is never a note; the Python child is
    # covered
    assert all("date" in str(n.get("program")) for n in notes), notes
    # the shadow trace reproduces too: the pure tool sees the recorded readings again
    code, payload = _cli(["reproduce", summary["trace"]], work, sandbox_image)
    (report,) = payload["traces"]  # reproduce --json: {exit_code, outcomes, traces}
    assert (code, report["outcome"]) == (0, "reproduced"), report


def test_a_recorded_run_that_read_the_clock_reproduces(tmp_path: Path, sandbox_image: str) -> None:
    work = _project(tmp_path / "clock")
    code, summary = _cli(
        ["record", "clock.yaml", "--tasks", "tasks.jsonl", "--task", "t1", "-o", "rec.jsonl"],
        work,
        sandbox_image,
    )
    assert code == 0 and summary["status"] == "succeeded", summary
    code, payload = _cli(["reproduce", "rec.jsonl"], work, sandbox_image)
    (report,) = payload["traces"]
    assert (code, report["outcome"]) == (0, "reproduced"), report
    lines = _lines(work / "rec.jsonl")
    assert lines[0]["clock"]["step_s"] == 0.0  # record: the machine's clock, read per call
    first, second, _shell = _calls(lines)
    for call in (first, second):
        body = json.loads(call["body"])
        # frozen per call: every read during the call, the child's too, is the call's reading
        assert call["clock"] == body["time"] == body["again"] == body["child"]
        assert call["clock"] > START + 10**8
    assert first["clock"] <= second["clock"]
