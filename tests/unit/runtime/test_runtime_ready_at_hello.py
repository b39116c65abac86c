"""``hello`` means ready: the worker is spawned and witnessed before the runtime says it.

The warm pool counts a sandbox as warm at its ``hello``. The runtime said hello first and
spawned its worker afterwards, so a warm sandbox handed out at once still waited for its
worker's interpreter and witness bootstrap before the first tool call (~60-170 ms, measured).
Now, when ``hello`` arrives, the worker is a child of the runtime with its seccomp filter on
(``/proc/PID/status`` ``Seccomp: 2``). Outside a container; where the witness cannot run here
the test fails under CI=true (`tests.conftest._unusable`) like the other witness tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import _unusable
from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import manifest_for, run_runtime, write_run_dir


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as handle:
            found += [int(p) for p in handle.read().split()]
    return found


def _status(pid: int, key: str) -> str:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    return ""


def test_at_hello_the_worker_runs_under_its_witness(tmp_path: Path) -> None:
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [{"id": "x", "tool": "math.add", "args": {"a": 1, "b": 2}}],
    }
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t", "input": {}},
        manifest_for({"math.add": "execute"}),
    )
    seen: dict[str, Any] = {}

    def at_hello(proc: subprocess.Popen[bytes]) -> None:
        children = _children(proc.pid)
        seen["children"] = children
        seen["seccomp"] = [_status(child, "Seccomp") for child in children]

    result = run_runtime(run_dir, tmp_path, after_hello=at_hello)
    assert result.returncode == 0, result.stderr
    unavailable = [c for c in result.of("coverage") if "egress witness" in c.get("reason", "")]
    if unavailable:
        _unusable(unavailable[0]["reason"], what="the egress witness")
    assert result.messages[0]["type"] == "hello"
    assert len(seen["children"]) == 1, seen  # the worker, already there
    assert seen["seccomp"] == ["2"], seen  # and already witnessed (filter mode)
