"""`make demo`'s script (examples/demo.sh) in real containers: order, exit codes, the verdicts.

The demo must show, in order: ``check`` rejecting v3 and naming ``ticket.close`` (exit 3, and
the demo goes on); ``submit`` of v1 against v2 with a ceiling, the tournament with v2 first and
the rubric's reasons; ``reproduce`` of the failing trace (``reproduced``) and of the incomplete
one (``not_reproduced``, naming call #3 ``kb.search`` and the destinations). A wrong exit code
fails the script.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.sh"
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker


def _demo(tmp_path: Path, image: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(
        {
            "SANDBOX_REPLAY": CLI,
            "PYTHON_BIN": sys.executable,
            "SANDBOX_REPLAY_IMAGE": image,
            "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state"),
            **env,
        }
    )
    return subprocess.run(
        ["bash", str(DEMO)], env=full, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.slow
def test_demo_shows_the_three_jobs_in_order(tmp_path: Path, sandbox_image: str) -> None:
    done = _demo(tmp_path, sandbox_image)
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    assert done.returncode == 0, out + done.stderr
    marks = [
        'tool "ticket.close" is unsafe',
        "[exit 3, as expected]",
        "2 variants x 22 tasks = 44 runs",
        "runs 50 (--ceiling-runs)",
        "tournament (judge rubric)",
        "per task ranking (1 is best; score and the judge's reasons)",
        "[exit 0, as expected]",
        "traces/failing.jsonl: reproduced (exit 0)",
        "traces/incomplete.jsonl: not_reproduced (exit 1)",
        "first difference [extra_turn]: call #3 kb.search",
        "outbound destinations: 0",
        "[exit 1, as expected]",
        "demo finished in",
    ]
    at = 0
    for mark in marks:  # each one after the one before
        found = out.find(mark, at)
        assert found >= 0, f"{mark!r} not found after position {at}:\n{out}"
        at = found + len(mark)
    # v2 wins on every task, for reasons the demo prints
    table = out[out.find("tournament (judge rubric)") :]
    assert table.find("helpdesk-triage@2") < table.find("helpdesk-triage@1")
    assert "22/0/0" in table and "0/0/22" in table
    # the rubric's scores and reasons come from submit's own report (no script reads it)
    assert re.search(r"ticket-1000\s*│\s*1\s*│\s*helpdesk-triage@2\s*│\s*1\.00", out), out
    assert "never made: kb.search" in out
    assert "44 succeeded" in out
    assert "\x1b[" not in done.stdout  # not a terminal: no raw escape sequences in the log
    assert "report.json" not in DEMO.read_text()


def test_demo_fails_on_a_wrong_exit_code(tmp_path: Path, sandbox_image: str) -> None:
    done = _demo(tmp_path, sandbox_image, SANDBOX_REPLAY="/bin/true")
    assert done.returncode == 1
    assert "exited 0, expected 3" in done.stderr
