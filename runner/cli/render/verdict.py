"""The verdict block that ends ``submit`` and ``report`` on the terminal.

Read in ten seconds, last on the screen (the per-task tables print before it, so the last
screen a person sees holds the answer; they stay in the scrollback, and ``--json`` holds
everything): who wins, by how much and how sure (`runner.grading.headline`), each variant's
mean score with its 95 % interval, pass rate, pass@k and pass^k (`runner.grading.scores`), the
gate's answers with ``--baseline`` (`runner.grading.gate`), the flaky tasks, and what was not
scored and why. Everything shown is a field of the `JobReport`; nothing is computed here but
formatting. Text from files is escaped (rich markup) and made inert by the console.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from runner.cli.render.console import fold_cells, one_line_piped
from runner.cli.render.junit import JUnitCase, write_junit_cases
from runner.cli.render.terminal import one_line
from runner.submit.jobreport import JobReport

__all__ = ["figure", "percent", "render_verdict", "write_gate_junit"]

_STYLE = {"PASS": "green", "FAIL": "red", "INCONCLUSIVE": "yellow"}


def figure(value: Any, interval: Sequence[float] | None, *, pct: bool = False) -> str:
    """``0.92 [0.85, 0.99]`` (or ``92% [85%, 99%]``); ``-`` for no value."""
    if value is None:
        return "-"
    show = percent if pct else (lambda v: f"{v:.2f}")
    return show(value) + (f" [{show(interval[0])}, {show(interval[1])}]" if interval else "")


def percent(value: float) -> str:
    """``0.923`` as ``92%``."""
    return f"{100 * value:.0f}%"


def _not_scored(variants: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for entry in variants:
        counts = entry.get("not_scored") or {}
        if counts:
            why = ", ".join(f"{n} {reason}" for reason, n in counts.items())
            parts.append(f"{entry.get('variant')}: {why}")
    return "; ".join(parts)


def _scores_table(scores: Mapping[str, Any]) -> Table:
    given = scores.get("k")
    k = given if isinstance(given, int) else 1
    table = Table(box=box.SIMPLE, pad_edge=False, show_edge=False)
    table.add_column("variant", no_wrap=True)
    table.add_column("mean score [95%]", no_wrap=True)
    table.add_column("pass rate [95%]", no_wrap=True)
    if k > 1:
        table.add_column(f"pass@{k}", no_wrap=True)
        table.add_column(f"pass^{k}", no_wrap=True)
    table.add_column("scored", justify="right")
    for entry in scores.get("variants") or []:
        row = [
            escape(str(entry.get("variant"))),
            figure(entry.get("mean"), entry.get("interval")),
            figure(entry.get("pass_rate"), entry.get("pass_interval"), pct=True),
        ]
        if k > 1:
            row.append(figure(entry.get("pass_at_k"), None, pct=True))
            row.append(figure(entry.get("pass_hat_k"), None, pct=True))
        row.append(str(entry.get("episodes", 0)))
        table.add_row(*row)
    return table


def render_verdict(report: JobReport, console: Console) -> None:
    """Print the verdict block (the last thing ``submit`` and ``report`` print).

    Args:
        report: the job's report; one written before these fields existed gets the ratings'
            verdicts in words instead.
        console: where to print.
    """
    console.print(Rule("verdict", style="bold"))
    verdict = report.verdict
    grading = report.grading or {}
    if verdict is not None:
        style = "bold green" if verdict.get("winner") else "bold yellow"
        console.print(f"[{style}]{escape(str(verdict.get('text', '')))}[/{style}]")
    elif grading:
        for statement in grading.get("verdicts") or []:  # an older report.json
            console.print(escape(str(statement.get("text", ""))))
    else:
        console.print("[yellow]not graded: no tournament was run for this job[/yellow]")
    scores = report.scores
    if scores and scores.get("variants"):
        console.print(fold_cells(_scores_table(scores)))
        missing = _not_scored(scores["variants"])
        if missing:
            console.print(
                escape(f"not scored (in no denominator): {missing}"),
                soft_wrap=one_line_piped(console),
            )
        given = scores.get("methods")
        methods: Mapping[str, Any] = given if isinstance(given, dict) else {}
        console.print(
            escape(
                f"intervals: mean {methods.get('mean', '-')}; pass rate"
                f" {methods.get('pass_rate', '-')}"
            ),
            style="dim",
            soft_wrap=one_line_piped(console),
        )
    gate = report.gate
    if gate:
        _render_gate(gate, console)
    if report.status != "complete":  # a status read back from a file: one line, cut
        console.print(
            escape(f"job {one_line(report.status)[:80]}: the figures cover the runs that finished"),
            style="yellow",
        )


def _render_gate(gate: Mapping[str, Any], console: Console) -> None:
    console.print(
        escape(f"gate against baseline {gate.get('baseline')} (exit {gate.get('exit_code')}):")
    )
    for entry in gate.get("verdicts") or []:
        word = str(entry.get("verdict"))
        style = _STYLE.get(word, "bold")
        console.print(
            f"  [{style}]{escape(word)}[/{style}] {escape(str(entry.get('variant')))}:"
            f" {escape(str(entry.get('reason', '')))}",
            soft_wrap=one_line_piped(console),
        )
    confirm = gate.get("confirm")
    if isinstance(confirm, dict) and confirm.get("text"):  # runner.submit.confirm
        console.print(escape(f"  {one_line(confirm['text'])}"), soft_wrap=one_line_piped(console))
    for entry in gate.get("flaky") or []:
        tasks = [str(t) for t in entry.get("tasks") or []]
        shown = ", ".join(tasks[:8]) + (", …" if len(tasks) > 8 else "")
        console.print(
            escape(f"  flaky in {entry.get('variant')} (scores differ across repeats): {shown}"),
            soft_wrap=one_line_piped(console),
        )


def write_gate_junit(gate: Mapping[str, Any], path: Path) -> None:
    """One JUnit case per candidate of the gate: PASS passes, FAIL fails, INCONCLUSIVE errors.

    An INCONCLUSIVE case is written as an error (type ``INCONCLUSIVE``): the gate could not
    judge it, which is neither a pass nor a regression (CI shows it apart from failures).

    Args:
        gate: the report's ``gate`` block (`runner.grading.gate.gate`).
        path: the XML file to write.
    """
    cases = []
    confirm = gate.get("confirm")
    confirmed = confirm.get("variants") or [] if isinstance(confirm, dict) else []
    for entry in gate.get("verdicts") or []:
        word, reason = str(entry.get("verdict")), str(entry.get("reason", ""))
        said = f"{word}: {reason}"
        if entry.get("variant") in confirmed and isinstance(confirm, dict):
            said += f"\n{confirm.get('text')}"
        cases.append(
            JUnitCase(
                f"{entry.get('variant')} against {gate.get('baseline')}",
                "submit.gate",
                said,
                failure=reason if word == "FAIL" else None,
                error=(word, reason) if word not in ("PASS", "FAIL") else None,
            )
        )
    write_junit_cases("sandbox-replay gate", cases, path)
