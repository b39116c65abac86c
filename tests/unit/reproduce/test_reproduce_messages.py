"""What ``reproduce`` says to a new user: the project folder of a trace kept in a state folder,
a refusal said once with what to do, and the recorded/replayed lines in plain words."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InfrastructureError
from runner.reproduce.reproducer import Reproducer
from runner.settings import Settings
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"


def _no_docker() -> Any:
    raise InfrastructureError("no engine in this test")


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project holding v2.yaml and its tools, its failing trace in .sandbox-replay/traces/."""
    for module in ("helpdesk_tools", "helpdesk_model"):  # imported by another test: forget it
        monkeypatch.delitem(sys.modules, module, raising=False)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("v2.yaml", "helpdesk_tools.py", "helpdesk_model.py"):
        shutil.copy(HELPDESK / name, project / name)
    shutil.copytree(HELPDESK / "data", project / "data")
    traces = project / ".sandbox-replay" / "traces"
    traces.mkdir(parents=True)
    shutil.copy(HELPDESK / "traces" / "failing.jsonl", traces / "run-1.jsonl")
    return project


def test_a_trace_in_a_projects_state_folder_finds_the_projects_workflow_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.tracetools.reader import read_trace

    project = _project(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    reproducer = Reproducer(Settings(state_dir=tmp_path / "state"), backend_factory=_no_docker)
    trace = project / ".sandbox-replay" / "traces" / "run-1.jsonl"
    # the project's own file, so its tool modules are found beside it (not the trace's copy)
    workflow, folder = reproducer._workflow(read_trace(trace), trace, tmp_path / "scratch")
    assert workflow.path == project / "v2.yaml"
    assert folder == project.resolve()  # its tools resolve there, not in the current directory


class _UnusedBackend:
    """A backend that must not be used: the tool modules are looked for before any sandbox."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"backend.{name} used")


def test_tool_modules_not_found_is_refused_once_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli.render.reproduce import print_reports

    project = _project(tmp_path, monkeypatch)
    (project / "v2.yaml").write_text("# edited since\n" + (HELPDESK / "v2.yaml").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    reproducer = Reproducer(
        Settings(state_dir=tmp_path / "state"), backend_factory=lambda: _UnusedBackend()
    )
    report = reproducer.reproduce(project / ".sandbox-replay" / "traces" / "run-1.jsonl")
    assert report.outcome == "refused", report.reason
    print_reports([report])
    output = capsys.readouterr().out
    assert output.count("cannot import tool module 'helpdesk_tools'") == 1, output
    assert "run it from the project folder, or pass --workflow FILE" in output


def test_outcome_lines_say_no_failure_and_have_no_stray_space() -> None:
    from runner.cli.render.reproduce import details
    from runner.reproduce.diff import verdict
    from runner.reproduce.report import ReproduceReport

    recorded_end = {"status": "succeeded", "failure_signature": None, "output": "ok"}
    replayed_end = {
        "status": "failed",
        "failure_signature": "e1123295c38675b3ffff",
        "failure": {"call_index": 4, "tool": "model", "error_class": "ReplayDivergence"},
    }
    _outcome, _difference, reason = verdict([], recorded_end, [], replayed_end)
    assert reason.startswith("recorded succeeded, replay ended failed (call #4 model"), reason
    report = ReproduceReport(
        "t.jsonl", "not_reproduced", reason, recorded=recorded_end, replayed=replayed_end
    )
    lines = details(report)
    assert "  recorded: succeeded (no failure)" in lines
    assert (
        "  replayed: failed: call #4 model raised ReplayDivergence (signature e1123295c38675b3)"
        in lines
    )
    assert not any("None" in line for line in lines), lines
