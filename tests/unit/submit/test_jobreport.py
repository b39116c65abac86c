"""`JobReport`: what ``report.json`` holds, as a value; read back strictly, rendered by field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.submit.jobreport import JobReport
from runner.submit.scheduler import PairOutcome

PAIRS: list[dict[str, Any]] = [
    {
        "variant": "v1",
        "task_id": "t1",
        "repeat": 0,
        "status": "succeeded",
        "attempt": 1,
        "trace": "/x/t.jsonl",
        "rate_limit_wait_s": 0.5,
        "turn_usd": [0.25, None],
    },
    {"variant": "v2", "task_id": "t1", "repeat": 0, "status": "not_run"},
]


def _document(**changes: Any) -> dict[str, Any]:
    report = JobReport(
        "job-1",
        "complete",
        0,
        plan={"formula": "2 variants x 1 task = 2 runs", "backend": "docker"},
        pairs=(PairOutcome("v1", "t1"),),
    ).to_json()
    report["pairs"] = PAIRS
    report.update(changes)
    return report


def test_to_json_of_from_json_is_the_document() -> None:
    document = _document()
    report = JobReport.from_json(document, file="report.json")
    assert report.pairs[0].turn_usd == (0.25, None) and report.pairs[1].attempt == 0
    assert report.to_json() == document


def test_an_older_report_without_the_newer_keys_reads() -> None:
    report = JobReport.from_json({"job_id": "j", "status": "complete", "exit_code": 0}, file="r")
    assert report.pairs == () and report.incomplete is None and report.grading is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"pairs": "x"}, "pairs"),
        ({"pairs": [{"variant": "v", "task_id": "t"}]}, "pairs[0].status"),
        ({"pairs": [{**PAIRS[0], "trace": 7}]}, "pairs[0].trace"),
        ({"pairs": [{**PAIRS[0], "attempt": True}]}, "pairs[0].attempt"),
        ({"pairs": [{**PAIRS[0], "turn_usd": ["1"]}]}, "pairs[0].turn_usd"),
        ({"exit_code": "0"}, "exit_code"),
        ({"grading": []}, "grading"),
        ({"not_run": [1]}, "not_run[0]"),
    ],
)
def test_a_field_of_the_wrong_type_is_invalid_input_naming_it(
    changes: dict[str, Any], field: str
) -> None:
    from runner.errors import InputError

    with pytest.raises(InputError) as info:
        JobReport.from_json(_document(**changes), file="report.json")
    assert info.value.fields["field"] == field and info.value.exit_code == 2


def test_the_report_command_says_a_hostile_report_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job folder may be anyone's: a wrong type is exit 2 naming the field, no traceback."""
    folder = tmp_path / "jobs" / "job-1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(_document(pairs=[{"variant": 1}])))
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path))
    for args in (["report", "job-1"], ["report", "job-1", "--html", str(tmp_path / "p.html")]):
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 2, done.output
        assert ("pairs[0].variant" in done.output and done.exception is None) or isinstance(
            done.exception, SystemExit
        )
