"""Policy limits on calls and trace size cut a flooding run: ``limit_exceeded``, bounded host.

A sandbox forging a million call lines per run cost the host gigabytes and left
195 MB traces. Past ``limits.max_calls`` call lines, or at a call line that would make the
trace longer than ``limits.max_trace_mb``, the host accepts nothing more, kills the sandbox,
and the run ends ``limit_exceeded`` (episode exit code 125, ``end.limit: {name, value}``).
The sandbox here is a script speaking the protocol, run as a local process (tests/support/fakes.py).
Real containers: tests/integration/test_limits_flood.py.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.domain.ids import sequential_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.driver import run_episode
from runner.episode.request import EpisodeRequest
from runner.settings import Settings
from runner.submit.jobreport import JobReport
from runner.tools.snapshot.toolsnapshot import SnapshotEntry, build_snapshot
from runner.trace.format import episode_exit_code, failure_signature
from runner.tracetools.lint import lint_trace
from tests.support.fakes import SubprocessBackend
from tests.support.paths import REPO, TESTS

SCHEMA_VALIDATOR = pytest.importorskip("jsonschema").Draft202012Validator(
    json.loads((REPO / "docs" / "trace.schema.json").read_text())
)

FLOODER = textwrap.dedent(
    r"""
    import json, os, sys
    pad, count = int(sys.argv[1]), int(sys.argv[2])
    def send(msg):
        os.write(1, json.dumps(msg).encode() + b"\n")
    send({"type": "hello", "protocol": 1, "python": "3.11.2", "platform": "linux",
          "pid": os.getpid(), "packages": {}})
    assert json.loads(sys.stdin.buffer.readline())["type"] == "start"
    body = "x" * pad
    for i in range(count):
        send({"type": "call", "record": {"index": i, "step_id": "fetch", "tool": "kb.search",
              "args": {"q": i}, "body": body, "body_encoding": "text", "clock": 101.0}})
    send({"type": "episode", "status": "succeeded", "output": "FLOODED", "error": None,
          "not_run": []})
    sys.stdin.buffer.readline()
    """
)

WORKFLOW = """\
name: flood
version: "1"
tools: [demo_tools]
steps:
  - id: fetch
    tool: kb.search
    args: {q: x}
"""


class _Registry:
    def __init__(self, root: Path) -> None:
        self.root = root

    def manifest(self, policy: Any) -> dict[str, Any]:
        return {
            "policy": {"name": "shadow", "mode": "shadow", "hash": "p"},
            "tools": [
                {
                    "id": "kb.search",
                    "effect": "read",
                    "schema_hash": "a" * 64,
                    "module": "demo_tools",
                    "qualname": "search",
                    "disposition": "recorded",
                }
            ],
        }

    def tool_roots(self) -> list[Path]:
        return [self.root]


def _run(
    tmp_path: Path, pad: int, count: int = 1_000_000, **limits: Any
) -> tuple[Any, list[dict[str, Any]], Path]:
    wf = tmp_path / "wf.yaml"
    wf.write_text(WORKFLOW)
    script = tmp_path / "flooder.py"
    script.write_text(FLOODER)
    policy = SimpleNamespace(
        name="shadow",
        mode="shadow",
        hash="p",
        prices={},
        limits=SimpleNamespace(
            timeout_s=60, memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16, **limits
        ),
    )
    (tmp_path / "demo_tools.py").write_text("x = 1\n")
    snapshot = build_snapshot(
        [SnapshotEntry(tmp_path.resolve(), "demo_tools.py")], state_dir=tmp_path / "state"
    )
    request = EpisodeRequest(
        workflow=load_workflow(wf),
        task=Task(task_id="t1", input={}, clock_start=100.0),
        policy=policy,
        registry=_Registry(tmp_path),
        image="img:1",
        snapshot=snapshot,
    )
    backend = SubprocessBackend([sys.executable, "-u", str(script), str(pad), str(count)])
    result = run_episode(
        request,
        backend=backend,
        settings=Settings(state_dir=tmp_path / "state"),
        provider=None,
        id_factory=sequential_ids(),
    )
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    for line in lines:
        errors = [e.message for e in SCHEMA_VALIDATOR.iter_errors(line)]
        assert not errors, (line["type"], errors)
    return result, lines, result.trace_path


def test_past_max_calls_the_run_ends_limit_exceeded_and_the_sandbox_is_killed(
    tmp_path: Path,
) -> None:
    result, lines, path = _run(tmp_path, pad=10, max_calls=50, max_trace_mb=128)
    calls = [line for line in lines if line["type"] == "call"]
    end = lines[-1]
    assert result.status == "limit_exceeded" and end["status"] == "limit_exceeded"
    assert len(calls) == 50 and calls[-1]["index"] == 49
    assert end["limit"] == {"name": "max_calls", "value": 50}
    assert end["exit_code"] == 125 == episode_exit_code("limit_exceeded")
    assert end["failure"] == {
        "call_index": 49,
        "tool": "workflow",
        "error_class": "limit_exceeded",
        "exit_code": 125,
    }
    assert end["failure_signature"] == failure_signature(49, "workflow", "limit_exceeded", 125)
    assert end["sandbox"]["killed_for"] == "limit_exceeded"
    assert end["sandbox"]["killed_by_host"] is True
    assert end["output"] is None  # the flooder never got to its (forged) success
    assert "limits.max_calls" in end["reason"]
    assert lines[0]["limits"]["max_calls"] == 50
    lint = lint_trace(path)
    assert lint.errors == () and lint.failure_signature.ok, lint.failure_signature


def test_a_call_line_that_would_pass_max_trace_mb_ends_the_run(tmp_path: Path) -> None:
    result, lines, path = _run(tmp_path, pad=100_000, max_calls=1_000_000, max_trace_mb=1)
    end = lines[-1]
    assert result.status == "limit_exceeded"
    assert end["limit"] == {"name": "max_trace_mb", "value": 1}
    end_bytes = len(path.read_bytes().splitlines(keepends=True)[-1])
    assert path.stat().st_size - end_bytes <= 1024 * 1024
    calls = [line for line in lines if line["type"] == "call"]
    assert 5 <= len(calls) <= 10  # ~100 kB each
    assert end["failure"]["call_index"] == calls[-1]["index"]


def test_under_the_limits_nothing_changes(tmp_path: Path) -> None:
    result, lines, _ = _run(tmp_path, pad=10, count=20, max_calls=20, max_trace_mb=1)
    assert result.status == "succeeded" and "limit" not in lines[-1]
    assert sum(1 for line in lines if line["type"] == "call") == 20


def test_the_plan_and_the_report_show_the_limits_in_effect_with_their_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from runner.cli.app import app
    from runner.cli.render.report import render_report

    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SANDBOX_REPLAY_MAX_CALLS", "77")
    monkeypatch.chdir(TESTS / "fixtures" / "submit")
    dry = CliRunner().invoke(
        app,
        [
            *("submit", "--variant", "a.yaml", "--variant", "b.yaml"),
            *("--tasks", "tasks.jsonl", "--dry-run", "--json"),
        ],
    )
    assert dry.exit_code == 0, dry.output
    limits = json.loads(dry.stdout[dry.stdout.index("{") :])["plan"]["limits"]
    assert limits["max_calls"] == {"value": 77, "source": "SANDBOX_REPLAY_MAX_CALLS"}
    assert limits["max_trace_mb"] == {"value": 128, "source": "policy shadow"}
    assert limits["memory_mb"] == {"value": 512, "source": "policy shadow"}
    assert "limits per run: memory_mb 512 (policy shadow)," in dry.stderr
    assert "max_calls 77 (SANDBOX_REPLAY_MAX_CALLS)" in dry.stderr
    out = io.StringIO()
    report = {
        "job_id": "j",
        "status": "complete",
        "exit_code": 0,
        "plan": {"formula": "2 variants x 4 tasks = 8 runs"},
        "ceilings": {},
        "limits": limits,
        "spend": {},
        "runs_by_status": {},
    }
    render_report(JobReport.from_json(report, file="report.json"), Console(file=out, width=300))
    assert "max_calls 77 (SANDBOX_REPLAY_MAX_CALLS)" in out.getvalue()
    narrow = io.StringIO()  # the 200-column console of a pipe: the line is never split
    render_report(JobReport.from_json(report, file="report.json"), Console(file=narrow, width=80))
    (line,) = [li for li in narrow.getvalue().splitlines() if "limits per run" in li]
    assert line.startswith("limits per run: ") and "max_trace_mb 128 (policy shadow)" in line
