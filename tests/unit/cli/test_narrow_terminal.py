"""At 80 columns nothing a user needs is cut: tables fold, plan lines wrap, the bar has an ETA."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console
from rich.progress import TimeRemainingColumn
from rich.table import Table

import runner.cli.render.terminal as terminal_module
from runner.cli.render.console import fold_cells, words_whole, wrap_lines
from runner.cli.render.jobview import JobProgress
from runner.cli.render.report import render_report
from runner.cli.render.terminal import say
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


def _cells(text: str) -> list[str]:
    """Each rendered table line's cells, stripped (box characters as separators)."""
    out = []
    for line in text.splitlines():
        for sep in "┃║":
            line = line.replace(sep, "│")
        out.extend(cell.strip() for cell in line.split("│") if cell.strip())
    return out


def test_a_word_is_folded_only_when_no_column_has_room_to_give() -> None:
    """The new user's job at 80 columns: ``succeede`` / ``d`` while ``mean rank`` beside it
    could wrap at its space. Now the words stay whole; an id longer than any room left is
    still folded (never cut)."""
    table = Table()
    for header in ("variant", "mu", "mu 95% interval", "sigma", "ordinal", "mean rank", "W/T/L"):
        table.add_column(header)
    table.add_column("episodes")
    table.add_row("docs-assistant@1", "25.00", "-", "8.33", "0.00", "-", "0/0/0", "2 succeeded")
    out = io.StringIO()
    Console(file=out, width=80).print(fold_cells(table))
    cells = _cells(out.getvalue())
    assert "succeeded" in cells and "rank" in cells, out.getvalue()  # wrapped at a space
    for word in ("interval", "ordinal", "episodes", "variant"):
        assert any(word in cell for cell in cells), (word, out.getvalue())

    table.add_row("x" * 60, "1", "-", "1", "1", "-", "0/0/0", "ok")  # longer than any room
    out = io.StringIO()
    Console(file=out, width=80).print(fold_cells(table))
    assert out.getvalue().count("x") == 60 and "…" not in out.getvalue()  # folded, not cut
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80


def test_words_whole_moves_width_from_columns_that_can_wrap() -> None:
    # column 1 is 2 short of its word; column 0 has 5 to spare, column 2 is fixed
    assert words_whole([20, 6, 10], [15, 8, 4], [False, False, True]) == [18, 8, 10]
    # no room for a 30-column word: nothing moves (the word is folded)
    assert words_whole([20, 6], [18, 30], [False, False]) == [20, 6]


def test_a_long_report_line_wraps_at_spaces_on_a_terminal_and_stays_whole_piped() -> None:
    limits = {f"limit_{i}": {"value": 10_000, "source": "policy shadow"} for i in range(6)}
    report = dataclasses.replace(_report(), limits=limits)
    shown = {}
    for terminal, width in ((True, 80), (False, 200)):
        out = io.StringIO()
        console = Console(file=out, width=width, force_terminal=terminal, color_system=None)
        render_report(report, console)
        shown[terminal] = [line for line in out.getvalue().splitlines() if "policy" in line]
    (piped,) = shown[False]  # one line for grep
    assert len(shown[True]) > 1 and all(len(line) <= 80 for line in shown[True])
    # wrapped at spaces: the words are the piped line's, none split (was: cut at column 80)
    assert " ".join(shown[True]).split() == piped.split()


def test_say_wraps_human_lines_at_spaces_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check``, ``run``, ``reproduce`` lines: wrapped at spaces under their indent on a
    terminal (the terminal cut them mid-word at its edge), one line each when piped."""
    line = '  tool "docs.search_docs" of mcp server python3 docs_server.py: read (recorded)'
    monkeypatch.setattr(terminal_module, "line_width", lambda stream: 40)
    say(line)
    wrapped = capsys.readouterr().out.splitlines()
    assert len(wrapped) > 1 and all(len(part) <= 40 for part in wrapped)
    assert " ".join(wrapped).split() == line.split()
    assert all(part.startswith("      ") for part in wrapped[1:])  # under the line's indent
    monkeypatch.setattr(terminal_module, "line_width", lambda stream: None)  # piped
    say(line)
    assert capsys.readouterr().out == line + "\n"
