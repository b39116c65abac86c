"""An anchored fork's report as ``reproduce --fork-at`` prints it.

The outcome first, then the prefix (K calls verified, or the first difference), the fresh
part's status and calls, and the grade. Everything quoted from traces and sandboxes is printed
inert (`runner.cli.render.terminal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.cli.render.reproduce import failure_words
from runner.cli.render.terminal import one_line, say

if TYPE_CHECKING:
    from runner.reproduce.fork import ForkReport

__all__ = ["fork_lines", "print_fork"]

_SHOW_CALLS = 8
_SHOW_OUTPUT = 200


def _calls_text(calls: list[dict[str, Any]]) -> str:
    shown = [
        f"#{c.get('index')} {one_line(str(c.get('tool')))}" + (" (error)" if c.get("error") else "")
        for c in calls[:_SHOW_CALLS]
    ]
    more = f", ... {len(calls) - _SHOW_CALLS} more" if len(calls) > _SHOW_CALLS else ""
    return ", ".join(shown) + more


def fork_lines(report: ForkReport) -> list[str]:
    """The lines that say ``report`` (see the module docstring)."""
    k = report.fork_at
    version = report.workflow
    under = f" under {one_line(str(version.get('name')))}@{one_line(str(version.get('version')))}"
    lines = [
        f"{one_line(report.input)} forked at call {k}"
        + (under if version else "")
        + f": {report.outcome} (exit {report.exit_code})",
        f"  {one_line(report.reason)}",
    ]
    prefix = report.prefix
    if prefix.get("verified"):
        last = f"calls #0-#{k - 1}" if k > 1 else "call #0"
        lines.append(f"  prefix verified: {k} recorded call{'s' if k != 1 else ''} ({last})")
    elif prefix.get("first_difference"):
        lines.append(
            "  prefix NOT verified: " + one_line(str(prefix["first_difference"].get("summary")))
        )
    for reason in report.refusals:
        lines.append(f"  refused: {one_line(reason)}")
    fresh = report.fresh
    if fresh is not None and prefix.get("verified"):
        calls = list(fresh.get("calls") or [])
        status = str(fresh.get("status"))
        said = failure_words(fresh.get("failure"))
        lines.append(
            f"  fresh part (from call #{k}): {status}"
            + (f", {said}" if said and status != "succeeded" else "")
            + f"; {len(calls)} call{'s' if len(calls) != 1 else ''}"
            + (f": {_calls_text(calls)}" if calls else "")
        )
        output = fresh.get("output")
        if output is not None:
            text = one_line(output if isinstance(output, str) else str(output))
            cut = text if len(text) <= _SHOW_OUTPUT else text[: _SHOW_OUTPUT - 3] + "..."
            lines.append(f"  output: {cut}")
    if report.grade is not None:
        grade = report.grade
        why = "; ".join(one_line(str(r)) for r in grade.get("reasons") or [])
        if grade.get("score") is None:  # no expectations: said, never a score of 1.00
            lines.append(f"  grade: none: {why}")
        else:
            source = grade.get("expected_from")
            lines.append(
                f"  grade ({grade.get('judge')}): {float(grade['score']):.2f}"
                + (f" against {one_line(str(source))}" if source else "")
                + (f" ({why})" if why else "")
            )
    if report.fork_trace:
        lines.append(f"  fork trace: {one_line(report.fork_trace)}")
    return lines


def print_fork(report: ForkReport) -> None:
    """Print `fork_lines` on stdout."""
    for line in fork_lines(report):
        say(line)
