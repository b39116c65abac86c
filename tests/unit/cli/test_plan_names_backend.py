"""The plan and the report name the backend the runs use (a new user could not tell).

The plan's first line, where it says the concurrency, and ``plan.json``/``report.json``'s
``plan.backend``; the report's header line says it too (an older report without it renders).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.render.report import render_report
from runner.errors import InfrastructureError
from runner.submit.jobreport import JobReport
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


@pytest.mark.parametrize("backend", ["docker", "namespace"])
def test_the_plans_first_line_names_the_backend(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unusable(*args: Any, **kwargs: Any) -> Any:
        raise InfrastructureError("not here")  # the dry run's plan is printed all the same

    monkeypatch.setattr("runner.backends.docker.DockerBackend.connect", unusable)
    monkeypatch.setattr("runner.backends.namespace.NamespaceBackend.__init__", unusable)
    args = ["submit", "--variant", str(FIX / "a.yaml"), "--tasks", str(FIX / "tasks.jsonl")]
    env = {"SANDBOX_REPLAY_STATE_DIR": str(tmp_path), "SANDBOX_REPLAY_BACKEND": backend}
    out = CliRunner().invoke(app, [*args, "--dry-run", "--concurrency", "3"], env=env)
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    assert f"(policy shadow, backend {backend}, concurrency 3)" in first, first


def _report(**plan: Any) -> dict[str, Any]:
    return {
        "job_id": "job-1",
        "status": "complete",
        "exit_code": 0,
        "plan": {"formula": "1 variant x 1 task = 1 run", **plan},
        "ceilings": {},
        "spend": {},
        "pairs": [],
    }


def test_the_reports_header_names_the_backend_and_an_older_report_still_renders() -> None:
    for report, said in ((_report(backend="namespace"), True), (_report(), False)):
        text = io.StringIO()
        # the rest of a real report is missing: only the header matters here
        with contextlib.suppress(KeyError):
            render_report(
                JobReport.from_json(report, file="report.json"), Console(file=text, width=200)
            )
        header = text.getvalue().splitlines()[0]
        assert ("1 run, backend namespace" in header) is said, header
