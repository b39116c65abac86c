"""The report a person reads in ten seconds: the verdict last, scores with intervals in JSON."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runner.cli.render.report import render_report
from runner.errors import InputError
from runner.grading import Group, Result, grade, rubric_judge
from runner.grading.gate import gate
from runner.grading.headline import headline
from runner.submit.jobreport import JobReport


def _report(*, baseline: str | None = None, tasks: int = 30) -> JobReport:
    """A graded job: v2 meets every expectation, v1 only on even tasks (v1×t1 infra_error)."""
    groups = []
    for t in range(tasks):
        results = [Result("v2", "succeeded", "ok")]
        missing = {}
        if t == 1:
            missing["v1"] = "infra_error"
        else:
            results.append(Result("v1", "succeeded", "ok" if t % 2 == 0 else "no"))
        groups.append(Group(f"t{t}", tuple(results), {"output": "ok"}, incomplete=missing))
    graded = grade(groups, rubric_judge, variants=["v1", "v2"], seed=3, resamples=50)
    names = [s.variant for s in graded.standings]
    scores = graded.scores
    assert scores is not None
    return JobReport(
        "job-1",
        "complete",
        0,
        plan={"formula": f"2 variants x {tasks} tasks", "backend": "docker"},
        grading=graded.to_dict(),
        scores=scores,
        gate=gate(scores, baseline) if baseline else None,
        verdict=headline(
            scores, graded.verdicts, names, (graded.uncertainty or {}).get("win_rates")
        ),
    )


def _text(report: JobReport) -> str:
    out = io.StringIO()
    render_report(report, Console(file=out, width=160))
    return out.getvalue()


def test_the_terminal_ends_on_the_verdict_after_the_per_task_table() -> None:
    text = _text(_report(baseline="v1"))
    lines = text.rstrip("\n").splitlines()
    last = "\n".join(lines[-15:])
    assert "v2 wins: mean score 1.00" in last
    assert "against v1 0.52" in last  # 15 of 29 scored v1 episodes
    assert re.search(r"^v1 +0\.52 \[0\.\d\d, 0\.\d\d\] +52% \[", last, re.M)
    assert re.search(r"^v2 +1\.00 \[0\.\d\d, 1\.00\] +100% \[", last, re.M)
    assert "not scored (in no denominator): v1: 1 infra_error" in last
    assert "PASS v2" in last and "gate against baseline v1 (exit 0)" in last
    assert "per task ranking" not in last and "per task ranking" in text  # table before


def test_a_regression_is_said_fail_and_a_close_one_no_clear_winner() -> None:
    text = _text(_report(baseline="v2"))
    assert "FAIL v1" in text.splitlines()[-2] or "FAIL v1" in "\n".join(text.splitlines()[-6:])
    few = _text(_report(tasks=4))
    assert "no clear winner: v2 leads" in few and "too few to tell" in few


def test_report_json_has_mean_and_interval_per_variant_and_reads_back() -> None:
    report = _report(baseline="v1")
    document = json.loads(json.dumps(report.to_json()))
    variants = document["scores"]["variants"]
    assert [v["variant"] for v in variants] == ["v1", "v2"]
    for entry in variants:
        assert isinstance(entry["mean"], float)
        low, high = entry["interval"]
        assert low <= entry["mean"] <= high
    assert document["verdict"]["winner"] == "v2"
    assert document["gate"]["verdicts"][0]["verdict"] == "PASS"
    assert JobReport.from_json(document, file="report.json").to_json() == document


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("scores", "variants", 0, "mean"), "0.5", "scores.variants[0].mean"),
        (("scores", "variants", 0, "interval"), [0.1], "scores.variants[0].interval"),
        (("scores", "variants", 0, "flaky"), [1], "scores.variants[0].flaky"),
        (("gate", "verdicts", 0, "verdict"), 7, "gate.verdicts[0].verdict"),
        (("verdict", "text"), ["x"], "verdict.text"),
        (("scores", "variants"), {"v": 1}, "scores.variants"),
    ],
)
def test_a_hostile_verdict_block_is_invalid_input_naming_the_field(
    path: tuple[Any, ...], value: Any, field: str
) -> None:
    document = _report(baseline="v1").to_json()
    node: Any = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InputError) as info:
        JobReport.from_json(document, file="report.json")
    assert info.value.fields["field"] == field


def test_an_older_report_without_scores_still_ends_on_its_verdicts() -> None:
    document = _report().to_json()
    for key in ("scores", "gate", "verdict"):
        del document[key]
    text = _text(JobReport.from_json(document, file="report.json"))
    assert "verdict" in text.splitlines()[-3] or "verdict" in "\n".join(text.splitlines()[-4:])
    assert "v2 is better than v1" in "\n".join(text.splitlines()[-4:])


def test_the_gate_as_junit_one_case_per_candidate(tmp_path: Path) -> None:
    from xml.etree import ElementTree

    from runner.cli.render.verdict import write_gate_junit

    scores = {
        "variants": [
            {"variant": "base", "mean": 0.8, "interval": [0.7, 0.9]},
            {"variant": "same", "mean": 0.8, "interval": [0.7, 0.9]},
            {"variant": "worse", "mean": 0.2, "interval": [0.1, 0.3]},
            {"variant": "close", "mean": 0.65, "interval": [0.5, 0.8]},
        ]
    }
    path = tmp_path / "gate.xml"
    write_gate_junit(gate(scores, "base"), path)
    cases = {c.get("name"): c for c in ElementTree.parse(path).getroot().iter("testcase")}
    assert set(cases) == {"same against base", "worse against base", "close against base"}
    assert cases["same against base"].find("failure") is None
    assert cases["same against base"].find("error") is None
    assert cases["worse against base"].find("failure") is not None
    error = cases["close against base"].find("error")
    assert error is not None and error.get("type") == "INCONCLUSIVE"


def test_a_scores_block_missing_its_keys_still_renders() -> None:
    """A job folder may be anyone's: keys the renderer reads may be absent or odd."""
    document = _report().to_json()
    document["scores"] = {"k": "5", "variants": [{"mean": 0.5, "interval": [0.1, 0.9]}]}
    text = _text(JobReport.from_json(document, file="report.json"))
    assert "0.50 [0.10, 0.90]" in text and "intervals: mean -" in text


def test_the_page_of_a_report_with_odd_scores_is_written() -> None:
    from runner.cli.render.html.job import job_context
    from runner.cli.render.html.render import render_page

    document = _report().to_json()
    document["scores"] = {"k": "5", "variants": [{"variant": "v1", "mean": 0.5}]}
    report = JobReport.from_json(document, file="report.json")
    page = render_page("job.html.j2", {**job_context(report), "episodes": {}}, {})
    assert "scores-table" in page and "pass@5" not in page


def test_the_page_says_what_the_gates_confirm_ran_and_changed() -> None:
    """Was: the terminal and the JSON said it; the HTML page showed only the verdicts."""
    from runner.cli.render.html.job import job_context
    from runner.cli.render.html.render import render_page

    report = _report(baseline="v2")
    assert report.gate is not None
    text = "confirm-on-retry: borderline FAIL of v1; re-ran its 30 task(s) <once>"
    report.gate["confirm"] = {"text": text, "variants": ["v1"]}
    page = render_page("job.html.j2", {**job_context(report), "episodes": {}}, {})
    assert '<p class="confirm" id="gate-confirm">' in page
    assert "re-ran its 30 task(s) &lt;once&gt;" in page  # escaped, never markup
