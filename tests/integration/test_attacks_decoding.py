"""Deep, NaN and forged channel lines against the host, in real containers (items 4
and 15).

Every line the host reads from a sandbox, and every line the runtime reads from its worker,
goes through the one strict decoder (runner/trace/strictjson.py). Tool code holds only the
worker's pipe: a line it forges there is refused by the runtime, the episode
``failed`` with `WorkerProtocolError` naming why, and the trace still ends with its ``end`` line
(the host-side refusal of a channel line is tested in tests/unit/episode). A tool's own deep
value is refused where it is made (the runtime writes results with
`runner.trace.strictjson.dumps_value`): the call fails like one returning NaN. Hostile tools:
tests/fixtures/attacks/hostile_tools.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration._episodes import Project
from tests.integration._hostile import backend, backend_entry, project, run_steps

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry", "project"]  # fixtures

ROOT = Path(__file__).resolve().parents[2]


def test_a_pure_tool_returning_a_list_980_deep_is_kept_as_its_repr_and_the_trace_ends(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Recording never changes the agent (runner/trace/jsonform.py): a value nested past the
    trace's depth is recorded as its repr, marked ``encoding: repr`` (``lint`` reports it), and
    the trace still ends (it used to fail the call)."""
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: d, tool: odd.deep, args: {levels: 980}}\n",
    )
    assert out.end["type"] == "end" and out.end["status"] == "succeeded", out.end
    call = out.call("d")
    assert call["encoding"] == "repr" and call.get("error") is None, call
    shallow = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: d, tool: odd.deep, args: {levels: 60}}\n"
    )
    assert shallow.end["status"] == "succeeded"  # control: a deep-ish value is fine


@pytest.mark.parametrize(
    ("tool", "why"), [("forge.deep_line", "nested too deeply"), ("forge.nan_line", "NaN")]
)
def test_a_forged_line_the_decoder_refuses_fails_the_episode_and_the_trace_ends(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, tool: str, why: str
) -> None:
    """Tool code writes the line on every descriptor it holds: it holds only the
    worker's pipe, whose strict decoder refuses it; the episode fails naming why, the host's
    channel never sees the line, and the trace ends with its ``end`` line."""
    out = run_steps(project, backend, sandbox_image, tmp_path, f"- {{id: f, tool: {tool}}}\n")
    end = out.end
    assert end["type"] == "end" and end["status"] == "failed", end
    assert end["error"]["class"].endswith("WorkerProtocolError"), end["error"]
    assert "not believed" in end["error"]["message"] and why in end["error"]["message"], end
    assert end["failure"]["tool"] == tool
    text = out.result.trace_path.read_text()
    assert '"NaN"' not in text  # never turned into the string "NaN"


def _cli(*args: str, cwd: Path, image: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_REPLAY_IMAGE": image},
        check=False,
    )


def test_run_and_submit_with_deep_and_forged_lines_exit_as_their_runs_go(
    project: Project, sandbox_image: str, tmp_path: Path
) -> None:
    """``run`` gave a traceback and exit 1 (trace without end); ``submit`` exited 6."""
    deep = project.workflow("- {id: d, tool: odd.deep, args: {levels: 980}}\n", name="deep")
    forged = project.workflow("- {id: f, tool: forge.deep_line}\n", name="forged")
    tasks = project.root / "deep_tasks.jsonl"
    tasks.write_text('{"task_id": "t1", "input": {}}\n')
    ran = _cli(
        "run",
        str(deep),
        "--tasks",
        str(tasks),
        "--task",
        "t1",
        "--json",
        cwd=project.root,
        image=sandbox_image,
    )
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = json.loads(ran.stdout)
    trace = Path(summary["trace"])
    assert json.loads(trace.read_text().splitlines()[-1])["type"] == "end"
    submitted = _cli(
        "submit",
        "--variant",
        str(forged),
        "--variant",
        str(deep),
        "--tasks",
        str(tasks),
        "--json",
        cwd=project.root,
        image=sandbox_image,
    )
    assert "Traceback" not in submitted.stderr, submitted.stderr
    assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-2000:]
