"""The runtime with the egress witness (issue 18), outside a container: what the log says then.

The worker installs the seccomp filter on itself before any user code and the runtime answers
it. Attempts go to loopback 127.0.0.1:9 only (the witness answers ``ENETUNREACH``; nothing is
sent). Skipped where this machine's kernel or profile refuses the witness (the containers'
check is tests/integration/test_worker_witness.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import Result, manifest_for, run_runtime, write_run_dir


def _run(tmp_path: Path, tool: str, args: dict[str, Any] | None = None) -> Result:
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [{"id": "x", "tool": tool, "args": args or {}}],
    }
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t", "input": {}},
        manifest_for({tool: "execute"}),
    )
    result = run_runtime(run_dir, tmp_path)
    assert result.returncode == 0, result.stderr
    unavailable = [c for c in result.of("coverage") if "egress witness" in c.get("reason", "")]
    if unavailable:
        pytest.skip(unavailable[0]["reason"])
    assert result.episode["status"] == "succeeded", result.episode
    return result


def test_a_non_python_child_is_witnessed_and_coverage_stays_full(tmp_path: Path) -> None:
    result = _run(tmp_path, "net.shell", {"port": 9})
    attempts = [m["attempt"] for m in result.of("egress")]
    assert [(a["address"], a["port"], a["event"]) for a in attempts] == [
        ("127.0.0.1", 9, "seccomp.connect")
    ]
    assert result.of("coverage") == []  # no note for the non-Python child


def test_a_python_connect_is_logged_once(tmp_path: Path) -> None:
    result = _run(tmp_path, "net.connect", {"host": "127.0.0.1", "port": 9})
    egress = result.of("egress")
    assert [(m["attempt"]["event"], m.get("count", 1)) for m in egress] == [("seccomp.connect", 1)]
