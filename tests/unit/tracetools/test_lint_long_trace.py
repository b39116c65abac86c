"""Attack test: ``lint`` of a long trace must print its verdict, not hang in its table.

Reading and linting a trace is linear and cheap (`runner.tracetools.lint.lint_trace`: 0.2 s
CPU for 5000 calls), but the text report rendered one rich table row (with nested tables) per
call: measured here on the shared machine, 1000 calls 39 s (profiled), 5000 calls (a 360 KB
trace) 104 s and 106 MB, 20 000 calls 238 s and 292 MB, 300 000 calls (22 MB, far inside the
1 GiB trace limit) still running after 12 minutes at 2 GB. A CI job that lints one long agent
run timed out instead of getting its verdict. The table now shows the first `MAX_FINDING_ROWS`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

SOURCE = REPO / "tests" / "fixtures" / "traces" / "complete_succeeded.jsonl"
CALLS = 2000


def _long_trace(path: Path, calls: int) -> Path:
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    body = [
        json.dumps({"v": 1, "type": "call", "index": i, "tool": "t", "effect": "pure", "args": {}})
        for i in range(calls)
    ]
    path.write_text("\n".join([lines[0], *body, lines[-1]]) + "\n", encoding="utf-8")
    return path


def test_lint_of_a_long_trace_finishes_quickly(tmp_path: Path) -> None:
    trace = _long_trace(tmp_path / "long.jsonl", CALLS)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runner", "lint", str(trace)],
            capture_output=True,
            timeout=15,
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"lint of {CALLS} calls still running after 15 s")
    assert done.returncode in (0, 1)
    # the table shows the first findings and counts the rest
    assert b"more findings not shown (lint --json lists every finding)" in done.stdout
