"""A reproduce's reports as ``reproduce`` prints them: details, a table, JUnit cases.

One trace: its verdict with the details (recorded and replayed outcomes, the first difference,
refusals, outbound destinations, the environment diff); several: a table, then the details of
each trace not reproduced. Everything quoted from traces and sandboxes is printed inert
(`runner.cli.render.terminal`); a file name is kept to one line, so it cannot forge another
trace's verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from runner.cli.render.console import fold_cells, table_console
from runner.cli.render.junit import JUnitCase, write_junit_cases
from runner.cli.render.terminal import markup, one_line, say
from runner.domain.words import counted
from runner.reproduce.report import EXIT_OF
from runner.wire.observed import refuses, words

if TYPE_CHECKING:
    from runner.reproduce.report import ReproduceReport

__all__ = [
    "details",
    "failure_words",
    "nondeterminism_lines",
    "print_reports",
    "totals_line",
    "write_junit",
]


def failure_words(failure: Any) -> str:
    """``call #1 customer.get raised KeyError: 'C-200'`` (the message as recorded, cut)."""
    if not isinstance(failure, dict):
        return ""
    text = (
        f"call #{failure.get('call_index')} {failure.get('tool')} raised"
        f" {failure.get('error_class')}"
    )
    message = failure.get("message")
    if message:
        text += f": {one_line(message)}"
        if failure.get("message_chars"):
            text += f"... ({failure['message_chars']} characters)"
    return text


def _outcome_text(outcome: dict[str, Any]) -> str:
    """``failed: call #1 customer.get raised KeyError: ... (signature 0123456789abcdef)``."""
    signature = outcome.get("failure_signature")
    if not signature:
        return f"{outcome.get('status')} (no failure)"
    said = failure_words(outcome.get("failure"))
    return (
        f"{outcome.get('status')}"
        + (f": {said}" if said else "")
        + (f" (signature {str(signature)[:16]})")
    )


def _packages_text(item: dict[str, Any]) -> str:
    """The packages no tool module imports, in one line, with what each side had installed.

    A recording made on a host lists that host's virtualenv; the sandbox image lists what is
    installed in it (often nothing but the standard library): different lists, not a fault.
    An older report holds ``"43 packages"`` texts instead of the counts.
    """

    def amount(value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            return counted(value, "package") if value else "none but the standard library"
        return one_line(value)

    recorded = amount(item.get("recorded_count", item.get("recorded")))
    now = amount(item.get("now_count", item.get("now")))
    return (
        f"other packages, none imported by the tool modules: the recording's environment had"
        f" {recorded} installed, the sandbox image has {now} ({item.get('only_recorded')} only"
        f" in the recording, {item.get('only_now')} only in the sandbox; expected, not a fault)"
    )


def details(report: ReproduceReport) -> list[str]:
    """The lines that say ``report``: its verdict, then what it found (see the module)."""
    difference = report.first_difference
    reason = report.reason
    if difference:  # said in full below: the reason's copy of it would be the same line twice
        reason = reason.removesuffix(f"; first difference: {difference.get('summary')}")
    # a file name may hold a newline: one line, so it cannot forge another trace's verdict
    lines = [
        f"{one_line(report.input)}: {report.outcome} (exit {report.exit_code})",
        f"  {reason}",
    ]
    if report.outcome == "reproduced" and report.replayed.get("failure"):
        lines.append(f"  reproduced failure: {failure_words(report.replayed['failure'])}")
    if report.recorded:
        lines.append(f"  recorded: {_outcome_text(report.recorded)}")
    if report.replayed:
        lines.append(
            f"  replayed: {_outcome_text(report.replayed)}"
            + (" (the source's verdict, kept)" if report.replayed.get("source_verdict") else "")
        )
    if difference:
        label = f" [{difference['label']}]" if difference.get("label") else ""
        lines.append(
            f"  first difference{label}: call #{difference.get('index')} {difference.get('tool')}"
        )
        if difference.get("label_rule"):
            lines.append(f"    why {difference['label']}: {difference['label_rule']}")
        if difference.get("args") is not None:
            lines.append(f"    arguments: {json.dumps(difference['args'], ensure_ascii=False)}")
        lines.append(f"    {difference.get('message')}")
    # A single refusal is already the reason line (said once); several are listed, but not
    # those the nondeterminism lines below list (--strict-determinism's: each was said twice)
    read = nondeterminism_lines(report)
    if len(report.refusals) > 1:
        listed = "\n".join(read)
        lines.extend(
            f"  refused: {one_line(reason)}"
            for reason in report.refusals
            if one_line(reason) not in listed and not _more_unlisted(reason, report)
        )
    if report.outcome in ("not_reproduced", "reproduced") or report.outbound:
        lines.append(f"  outbound destinations: {len(report.outbound)}")
        for attempt in report.outbound[:20]:
            where = attempt.get("host") or attempt.get("address")
            count = attempt.get("count") or 1
            times = f" ({count} attempts)" if count != 1 else ""
            lines.append(f"    {attempt.get('kind')} {where}:{attempt.get('port')}{times}")
    lines.extend(read)
    if report.environment_diff and report.outcome == "not_reproduced":
        lines.append("  environment differences:")
        for item in report.environment_diff:
            if item["field"] == "packages":  # the ones that do not matter, in one line
                lines.append(f"    {_packages_text(item)}")
            else:
                why = f" ({item['why']})" if item.get("why") else ""
                then, now = ("absent" if v is None else v for v in (item["recorded"], item["now"]))
                lines.append(f"    {item['field']}: {then} -> {now}{why}")
    if report.replay_trace:
        lines.append(f"  replay trace: {report.replay_trace}")
    return lines


def _more_unlisted(reason: str, report: ReproduceReport) -> bool:
    """The strict refusal counting the entries past the cap (the lines say ``... and N more``)."""
    found = report.nondeterminism or {}
    return bool(found.get("dropped")) and reason.endswith(" more not listed")


def nondeterminism_lines(report: ReproduceReport) -> list[str]:
    """What the replay read that its trace does not pin, and what could not be seen.

    Nothing for a trace that never ran (its replay trace is None).
    """
    if report.replay_trace is None:
        return []
    found = report.nondeterminism
    if found is None:
        return ["  nondeterminism: not reported (the run ended before the runtime said)"]
    entries = [e for e in found.get("entries") or [] if refuses(e)]
    packages = [e for e in found.get("entries") or [] if not refuses(e)]
    unseen = "; ".join(found.get("not_observed") or [])
    if not entries and not found.get("dropped"):
        lines = ["  nondeterminism: nothing the trace does not pin"]
    else:
        refused = " (each refused the replay: --strict-determinism)" if report.refusals else ""
        lines = [
            f"  nondeterminism: {counted(len(entries), 'read')} the trace does not pin{refused}"
        ]
        lines.extend(f"    {one_line(words(e))}" for e in entries[:20])  # a sandbox's text
        more = len(entries) - 20 + int(found.get("dropped") or 0)
        if more > 0:
            lines.append(f"    ... and {more} more")
    if packages:  # an SDK's own configuration: said in one line, listed in --json and --html
        names = ", ".join(one_line(e.get("what")) for e in packages[:6])
        names += ", ..." if len(packages) > 6 else ""
        lines.append(
            f"    and {counted(len(packages), 'read')} by installed packages or the standard"
            f" library's own lookups, not refused (their configuration): {names}"
        )
    lines.append(f"    not observed: {unseen}")
    return lines


def _table(reports: list[ReproduceReport]) -> None:
    table = Table(title="reproduce")
    for column in ("trace", "outcome", "exit", "first difference / reason"):
        table.add_column(column, overflow="fold")
    for report in reports:
        first = report.first_difference
        why = first["summary"] if first else report.reason
        if first and first.get("label"):
            why = f"[{first['label']}] {why}"
        if not first and report.outcome == "reproduced" and report.replayed.get("failure"):
            why += f": {failure_words(report.replayed['failure'])}"
        # file names and reasons come from hostile inputs: never rich markup
        table.add_row(
            markup(one_line(report.input)),
            markup(report.outcome),
            str(report.exit_code),
            markup(why[:200]),
        )
    table_console().print(fold_cells(table))


def totals_line(reports: list[ReproduceReport]) -> str:
    """``3 traces: 2 reproduced, 1 not_reproduced`` (the outcomes a trace had, in `EXIT_OF` order).

    The outcome words are the reports' own (`runner.reproduce.report.ReproduceReport`).
    """
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.outcome] = counts.get(report.outcome, 0) + 1
    order = [o for o in EXIT_OF if o in counts] + sorted(set(counts) - set(EXIT_OF))
    noun = "trace" if len(reports) == 1 else "traces"
    return f"{len(reports)} {noun}: " + ", ".join(f"{counts[o]} {o}" for o in order)


def print_reports(reports: list[ReproduceReport]) -> None:
    """Print one report's details, or a table then the details of each not reproduced.

    The last line is the totals (`totals_line`). Everything quoted from traces and sandboxes
    is printed inert (`runner.cli.render.terminal`).
    """
    if len(reports) == 1:
        say("\n".join(details(reports[0])))
    else:
        _table(reports)
        for report in reports:
            if report.outcome != "reproduced":
                say("\n".join(details(report)))
    say(totals_line(reports))


def write_junit(reports: list[ReproduceReport], path: Path) -> None:
    """One JUnit test case per trace: reproduced passes, not_reproduced fails, else errors.

    Written by the one JUnit writer (`runner.cli.render.junit`): text XML cannot carry is escaped.
    """
    cases = []
    for report in reports:
        text = "\n".join(details(report))
        failure = report.reason if report.outcome == "not_reproduced" else None
        error = None
        if report.outcome not in ("reproduced", "not_reproduced"):
            error = (report.outcome, report.reason)
        cases.append(JUnitCase(report.input, "reproduce", text, failure=failure, error=error))
    write_junit_cases("sandbox-replay reproduce", cases, path)
