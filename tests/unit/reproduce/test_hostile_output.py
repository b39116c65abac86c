"""Hostile text on its way out: terminals, rich tables, JUnit files, the run summary.

What commands print or write quotes traces and sandboxes: tool error messages, destinations
tool code tried, stderr, trace file names. Nothing of it may crash the command (rich markup,
lone surrogates) or act on the terminal (escape sequences), and a JUnit file must always parse.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_hostile_input import CONTROL, run_cli

# --- terminals ------------------------------------------------------------------


def test_reproduce_table_with_markup_in_names_and_reasons_does_not_crash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runner.cli.render.reproduce import _table
    from runner.reproduce.report import ReproduceReport

    reports = [
        ReproduceReport(input="traces[/]a.jsonl", outcome="refused", reason="tool [/red] gone"),
        ReproduceReport(input="b.jsonl", outcome="invalid", reason="[bold]x[/italic]"),
    ]
    _table(reports)
    printed = capsys.readouterr().out
    assert "traces[/]a.jsonl" in printed.replace("\n", "") or "[/]" in printed


def test_cli_reproduce_of_two_traces_in_a_folder_named_with_markup(tmp_path: Path) -> None:
    folder = tmp_path / "run["  # the path holds "[/]": a rich closing tag
    folder.mkdir()
    (folder / "]a.jsonl").write_text("not json\n")
    (folder / "b.jsonl").write_text("not json\n")
    proc = run_cli("reproduce", str(folder / "]a.jsonl"), str(folder / "b.jsonl"), cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "MarkupError" not in proc.stderr, proc.stderr
    assert proc.returncode == 2


def test_escape_sequences_from_the_sandbox_never_reach_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Destinations tool code tried, error messages: shown, but inert (no ESC, BEL, C1, NUL)."""
    from runner.cli.render.reproduce import print_reports
    from runner.reproduce.report import ReproduceReport

    report = ReproduceReport(
        input="t.jsonl",
        outcome="not_reproduced",
        reason="first difference \udcff",
        outbound=[{"kind": "dns", "host": "\x1b]0;PWNED\x07\x1b[2Jevil.example", "port": 80}],
        first_difference={
            "index": 1,
            "tool": "kb.search",
            "message": "boom \x1b[31mred\x9b2J",
            "summary": "call #1 kb.search: boom \x1b]0;PWNED\x07",
        },
    )
    for reports in ([report], [report, report]):
        print_reports(reports)
        printed = capsys.readouterr().out
        assert "PWNED" in printed and "\\x1b]0;PWNED\\x07" in printed
        assert not (set(printed) & CONTROL), repr(printed)


def test_inert_keeps_text_and_shows_what_it_replaced() -> None:
    from runner.cli.render.terminal import inert

    assert inert("caf\u00e9 \u4e2d\n\tok") == "caf\u00e9 \u4e2d\n\tok"
    assert inert("\x1b[2J\x00\x7f\x9b\udcff") == "\\x1b[2J\\x00\\x7f\\x9b\\udcff"


# --- files and summaries ----------------------------------------------------------------------


def test_junit_file_parses_whatever_the_reports_quote(tmp_path: Path) -> None:
    """Reasons quote sandbox output and trace content: control characters, NUL, surrogates."""
    from xml.etree import ElementTree

    from runner.cli.render.reproduce import write_junit
    from runner.reproduce.report import ReproduceReport

    report = ReproduceReport(
        input="t\x1b.jsonl",
        outcome="not_reproduced",
        reason="boom \x1b[31m\x00 \udcff x",
        first_difference={"index": 1, "tool": "kb.search", "message": "bell \x07", "summary": "s"},
        outbound=[{"kind": "dns", "host": "\x1b]0;x\x07", "port": 1}],
    )
    refused = ReproduceReport(input="u.jsonl", outcome="refused", reason="v\x0b\x0c")
    path = tmp_path / "junit.xml"
    write_junit([report, refused], path)
    suite = ElementTree.parse(path).getroot()[0]
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["t\\x1b.jsonl", "u.jsonl"]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "boom \\x1b[31m\\x00 \\udcff x"
    assert "\\x07" in (failure.text or "")


def test_run_summary_with_surrogates_and_escapes_prints_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool returning os.fsdecode()d bytes (lone surrogates) crashed `run` with a traceback."""
    from runner.cli.render.episode import print_episode
    from runner.episode.request import EpisodeResult

    end = {
        "status": "crashed",
        "exit_code": 125,
        "reason": "x",
        "error": {"class": "ValueError", "message": "\x1b]0;PWNED\x07\udcff"},
        "output": "a\udcff\ud800b",
        "outbound": [{"kind": "dns", "host": "\x1b[2J", "port": 1, "outcome": "attempted"}],
        "stderr_tail": ["\x1b]0;STDERR\x07"],
        "meter": {},
    }
    print_episode(EpisodeResult("r1", "crashed", tmp_path / "t.jsonl", end))
    printed = capsys.readouterr().out
    printed.encode("utf-8")  # strict: no lone surrogate left
    assert "PWNED" in printed and "STDERR" in printed
    assert not (set(printed) & CONTROL), repr(printed)
