"""At 80 columns nothing a user needs is cut: tables fold, plan lines wrap, the bar has an ETA."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import TimeRemainingColumn
from rich.table import Table

from runner.cli.render.console import fold_cells, wrap_lines
from runner.cli.render.jobview import JobProgress
from runner.cli.render.report import render_report
from runner.grading import Group, Result, grade, rubric_judge
from runner.submit.jobreport import JobReport

LONG_VARIANT = "candidate-workflow-v2-with-retries"


def _report() -> JobReport:
    """A graded job with 3 repeats (pass@3 and pass^3 columns) and a long variant name."""
    groups = []
    for t in range(6):
        for r in range(3):
            results = (
                Result(LONG_VARIANT, "succeeded", "ok"),
                Result("v1", "succeeded", "ok" if (t + r) % 2 == 0 else "no"),
            )
            groups.append(Group(f"t{t}", results, {"output": "ok"}, repeat=r))
    graded = grade(groups, rubric_judge, variants=["v1", LONG_VARIANT], seed=3, resamples=50)
    return JobReport(
        "job-20261207T185410Z-e5c42bff",
        "complete",
        0,
        plan={"formula": "2 variants x 6 tasks x 3 repeats", "backend": "docker"},
        grading=graded.to_dict(),
        scores=graded.scores,
    )


def _unfolded(text: str) -> str:
    """The table's cells joined back: box characters and line breaks removed."""
    return "".join(ch for ch in text if ch not in "│┃║ \n")


def test_the_report_at_80_columns_cuts_no_value() -> None:
    out = io.StringIO()
    report = _report()
    render_report(report, Console(file=out, width=80))
    text = out.getvalue()
    assert "…" not in text, text  # rich's ellipsis: a cut value (was: the mu interval, ids)
    assert max(len(line) for line in text.splitlines()) <= 80 or "intervals:" in text
    joined = _unfolded(text)
    assert LONG_VARIANT in joined
    scores = report.scores or {}
    for entry in scores["variants"]:  # every verdict number is printed whole
        low, high = entry["interval"]
        assert f"{low:.2f}" in joined and f"{high:.2f}" in joined


def test_a_folded_id_keeps_every_character() -> None:
    table = Table()
    table.add_column("id", no_wrap=True)  # as the renderers made id columns
    table.add_column("why")
    ident = "job-20261207T185410Z-e5c42bff-0123456789abcdef"
    table.add_row(ident, "a reason " * 8)
    out = io.StringIO()
    Console(file=out, width=40).print(fold_cells(table))
    rows = [line.split("│")[1].strip() for line in out.getvalue().splitlines() if "│" in line]
    assert "…" not in out.getvalue() and "".join(rows) == ident  # was: cut to 17 characters


def test_plan_lines_wrap_to_the_width_under_their_indent() -> None:
    line = "  variant v2: " + " ".join(f"word{i}" for i in range(40))
    path = "/very/long/path/" + "x" * 100
    wrapped = wrap_lines(["plan job-1: 2 variants", line, f"  tasks {path}"], 80)
    assert wrapped[0] == "plan job-1: 2 variants"
    assert all(len(w) <= 80 for w in wrapped if path not in w)
    assert all(w.startswith("      ") for w in wrapped[2:-2])  # continuations: indent + 4
    assert " ".join(w.strip() for w in wrapped[1:-2]) == line.strip()  # nothing lost
    assert path in wrapped[-1] or path in wrapped[-2]  # a path is never broken


def test_the_progress_bar_shows_an_eta() -> None:
    bar = JobProgress(10)
    assert any(isinstance(c, TimeRemainingColumn) for c in bar.progress.columns)
    out = io.StringIO()
    Console(file=out, width=80).print(bar.progress.get_renderable())
    assert "eta" in out.getvalue() and "-:--:--" in out.getvalue()  # unknown until a run ends
