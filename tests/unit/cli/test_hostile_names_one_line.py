"""File names and report fields that could forge output lines, or hang the console (review4).

A trace file's name is hostile input too (``reproduce traces/*`` over a folder someone else
filled): a newline in it must not start a line of its own, which could read as another trace's
verdict (``good.jsonl: reproduced (exit 0)``). The report's header quotes ``report.json``: a
tampered ``plan.backend`` (not a backend name, a newline, a 1 MB string that rich took minutes
to wrap) is refused by ``report`` with the file and the field, exit 2; the header's other
fields are printed on one line and cut.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.render.report import render_report
from runner.submit.jobreport import JobReport
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"
FORGED = "evil\ngood.jsonl: reproduced (exit 0)"


def _invoke(*args: str, tmp_path: Path) -> Any:
    return CliRunner().invoke(app, [*args], env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "st")})


def test_a_skipped_files_newline_does_not_start_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.reproduce.report import ReproduceReport

    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(GOLDEN / "failing.jsonl", folder / "a.jsonl")
    (folder / (FORGED + ".txt")).write_text("x\n", encoding="utf-8")

    def reproduce(self: Any, path: Path) -> ReproduceReport:
        return ReproduceReport(str(path), "not_reproduced", "differs")

    monkeypatch.setattr("runner.reproduce.reproducer.Reproducer.reproduce", reproduce)
    out = _invoke("reproduce", str(folder), tmp_path=tmp_path)
    assert out.exit_code == 1, out.output
    assert "evil\\ngood.jsonl" in out.output
    assert not any(line.startswith("good.jsonl: reproduced") for line in out.output.splitlines())


def test_a_traces_newline_does_not_start_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.reproduce.report import ReproduceReport

    trace = tmp_path / (FORGED + ".jsonl")
    shutil.copy(GOLDEN / "failing.jsonl", trace)

    def reproduce(self: Any, path: Path) -> ReproduceReport:
        return ReproduceReport(str(path), "not_reproduced", "differs")

    monkeypatch.setattr("runner.reproduce.reproducer.Reproducer.reproduce", reproduce)
    out = _invoke("reproduce", str(trace), tmp_path=tmp_path)
    assert out.exit_code == 1, out.output
    assert not any(line.startswith("good.jsonl: reproduced") for line in out.output.splitlines())


def _report(job_id: str, **plan: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "status": "complete",
        "exit_code": 0,
        "plan": {"formula": "1 variant x 1 task = 1 run", **plan},
        "ceilings": {},
        "spend": {},
        "pairs": [],
    }


@pytest.mark.parametrize(
    "backend", ["ns\x1b]0;PWN\x07\ninjected line", "B" * (1 << 20), {"a": 1}, 7, ["docker"]]
)
def test_report_refuses_a_tampered_backend(backend: Any, tmp_path: Path) -> None:
    job_id = "job-20261201T184117Z-abcdef"
    folder = tmp_path / "st" / "jobs" / job_id
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(_report(job_id, backend=backend)), "utf-8")
    started = time.monotonic()
    out = _invoke("report", job_id, tmp_path=tmp_path)
    assert time.monotonic() - started < 20  # a 1 MB field took rich minutes to wrap
    assert out.exit_code == 2, out.output
    assert "report.json" in out.output and "plan.backend" in out.output
    assert "injected line" not in out.output and "Traceback" not in out.output


def test_the_headers_fields_stay_on_one_line_and_are_cut() -> None:
    report = _report("job-1", backend="docker")
    report["status"] = "complete\nforged: line " + "S" * 5000
    text = io.StringIO()
    with contextlib.suppress(KeyError):  # only the header matters here
        render_report(
            JobReport.from_json(report, file="report.json"), Console(file=text, width=200)
        )
    lines = text.getvalue().splitlines()
    assert not any(line.startswith("forged") for line in lines)
    assert "complete\\nforged" in lines[0]
    assert text.getvalue().count("S") < 1000


def test_a_failed_jobs_error_does_not_start_a_line(tmp_path: Path) -> None:
    """Review: ``jobs show`` printed ``failure.json``'s error (an error's text, which quotes
    what a sandbox or a file said) inert but with its newlines, so it could forge a line."""
    folder = tmp_path / "st" / "jobs" / "job-1"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps({"job_id": "job-1", "variants": []}))
    failure = {"job_id": "job-1", "exit_code": 5, "error": "boom\nsubmit job-1: complete", "at": 1}
    (folder / "failure.json").write_text(json.dumps(failure))
    done = _invoke("jobs", "show", "job-1", tmp_path=tmp_path)
    assert "boom" in done.output, done.output
    assert not any(line.startswith("submit job-1: complete") for line in done.output.splitlines())
