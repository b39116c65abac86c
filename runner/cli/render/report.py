"""The report of a submission as rich tables (``submit`` and ``report`` without ``--json``).

What is shown, in order: the job line, ceilings, the per-run limits in effect, the spend by
purpose, runs by status, the tournament standings, per task the ranking with each variant's
score and the judge's reasons, per variant the reads no recording served, then the groups of
pairs not run, of runs stopped by a ceiling and of tasks left ungraded, and last the verdict
block (`runner.cli.render.verdict`): the answer is the last screen, whatever the number of
tasks above it (decided over a ``--details`` flag that would hide the tables: they stay in
the scrollback for whoever scrolls, nothing changes for a reader of the whole output, and
``--json`` is the machine's view). Identical reasons are shown once, with the pairs or tasks
they concern (`group_by_reason`), never repeated line after line.

Every text that comes from a file (variant names, task ids, reasons, tool arguments, statuses)
is escaped: it is data, never rich markup. The console
(`runner.cli.render.console.table_console`) makes every string inert (no terminal controls,
bidi or zero-width characters). Id columns never wrap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner.cli.render.console import fold_cells, one_line_piped
from runner.cli.render.terminal import one_line
from runner.cli.render.verdict import render_verdict
from runner.domain.words import counted
from runner.submit.ceilings import describe_limits, figure
from runner.submit.jobreport import JobReport

__all__ = ["group_by_reason", "render_report", "sample"]

# Items named per group before "…"; --json and report.json keep every one.
SHOWN = 8


def group_by_reason(entries: Iterable[Mapping[str, Any]], label: str) -> list[dict[str, Any]]:
    """Group entries that share a ``reason``, in first-seen order.

    Args:
        entries: dicts with ``reason`` and the fields ``label`` is built from.
        label: ``pair`` (``variant×task_id``, and ``#repeat`` when the entries hold more than
            repeat 0: the same pair twice is two episodes) or ``task`` (``task_id``).

    Returns:
        ``[{"reason", "count", "items": [label, ...]}]``.
    """
    entries = list(entries)
    repeated = any(_repeat(e) for e in entries)
    groups: dict[str, dict[str, Any]] = {}
    for entry in entries:
        reason = str(entry.get("reason") or "no reason given")
        if label == "pair":
            item = f"{entry.get('variant')}×{entry.get('task_id')}"
            if repeated:
                item += f"#{_repeat(entry)}"
        else:
            item = str(entry.get("task_id"))
        group = groups.setdefault(reason, {"reason": reason, "count": 0, "items": []})
        group["count"] += 1
        group["items"].append(item)
    return list(groups.values())


def _repeat(entry: Mapping[str, Any]) -> int:
    value = entry.get("repeat")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def sample(items: list[str], shown: int = SHOWN) -> str:
    """``a, b, c, …`` with at most ``shown`` items named."""
    head = ", ".join(items[:shown])
    return head + (", …" if len(items) > shown else "")


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def estimated_lines(spend: Mapping[str, Any]) -> list[str]:
    """One line per purpose whose charges include estimates (reservations nothing measured).

    Args:
        spend: ``{purpose: PurposeTotals.to_dict()}``.
    """
    lines = []
    for purpose, totals in spend.items():
        count = totals.get("estimated_charges") or 0
        if not count:
            continue
        amount = totals.get("estimated") or {}
        lines.append(
            f"{purpose}: {count} charge(s) estimated, not measured (after a crash: a sandbox "
            f"already gone, or a model call in flight, charged at its reservation): "
            f"{amount.get('sandbox_s', 0.0):.1f} sandbox-s, ${amount.get('usd', 0.0):.6f}, "
            f"{amount.get('tokens_in', 0) + amount.get('tokens_out', 0)} tokens"
        )
    return lines


HEADER_FIELD_CHARS = 300
"""A header field of ``report.json`` is cut after this many characters (rich took minutes to
wrap a 1 MB one)."""


def _header_field(value: object) -> str:
    """A field of the header line: on one line (a newline cannot forge a line), cut, escaped."""
    text = one_line(value)
    if len(text) > HEADER_FIELD_CHARS:
        text = text[:HEADER_FIELD_CHARS] + f"... ({len(text)} characters)"
    return escape(text)


def render_report(report: JobReport, console: Console) -> None:
    """Print the report on ``console``.

    Args:
        report: the job's report (one read back from an older ``report.json`` renders too).
        console: where to print.
    """
    backend = report.plan.get("backend")  # older reports have none
    job, status, code = (_header_field(v) for v in (report.job_id, report.status, report.exit_code))
    console.print(
        f"[bold]job {job}[/bold]: {status} (exit {code})"
        f" — {_header_field(report.plan.get('formula', ''))}"
        + (f", backend {_header_field(backend)}" if backend else "")
    )
    for purpose, dims in report.ceilings.items():
        text = ", ".join(f"{d} {figure(v['value'])} ({v['source']})" for d, v in dims.items())
        console.print(
            escape(f"ceiling {purpose}: {text or 'unbounded'}"), soft_wrap=one_line_piped(console)
        )
    if report.limits:
        # piped: one line each (a reader greps them; README "200-column"); a terminal wraps
        console.print(
            escape(f"limits per run: {describe_limits(report.limits)}"),
            soft_wrap=one_line_piped(console),
        )
    if report.ceiling_reached:
        message = escape(str(report.ceiling_reached.get("message", "")))
        console.print(f"[red]ceiling reached:[/red] {message}")
    spend = Table(title="spend by purpose")
    for column in ("purpose", "runs", "model calls", "tokens in", "tokens out", "USD", "sandbox-s"):
        spend.add_column(column, justify="right" if column != "purpose" else "left")
    for purpose, totals in report.spend.items():
        charged = totals["charged"]
        spend.add_row(
            escape(str(purpose)),
            str(charged["runs"]),
            str(totals["model_calls"]),
            str(charged["tokens_in"]),
            str(charged["tokens_out"]),
            f"{charged['usd']:.6f}",
            f"{charged['sandbox_s']:.1f}",
        )
    console.print(fold_cells(spend))
    waited = report.rate_limit_wait_s
    if waited > 0:  # not counted against run timeouts
        console.print(f"waited on provider rate limits: {waited:.1f} s in all (rate_limit_wait_s)")
    for line in estimated_lines(report.spend):
        console.print(f"[yellow]{escape(line)}[/yellow]")
    console.print(
        escape("runs: " + ", ".join(f"{n} {s}" for s, n in report.runs_by_status.items()))
    )
    grading = report.grading
    if grading:
        _render_grading(grading, console)
    _render_unrecorded(report.unrecorded, console)
    _render_groups(report, grading, console)
    render_verdict(report, console)


def _render_grading(grading: Mapping[str, Any], console: Console) -> None:

    table = Table(title=f"tournament (judge {escape(str(grading['judge']))})")
    table.add_column("variant", no_wrap=True)
    for column in ("mu", "mu 95% interval", "sigma", "ordinal", "mean rank", "W/T/L", "episodes"):
        table.add_column(column)
    for entry in grading["variants"]:
        wins = sum(v["wins"] for v in entry["versus"].values())
        ties = sum(v["ties"] for v in entry["versus"].values())
        losses = sum(v["losses"] for v in entry["versus"].values())
        rating = entry["rating"]
        mean_rank = entry["mean_rank"]
        interval = (entry.get("interval") or {}).get("mu")
        table.add_row(
            escape(str(entry["variant"])),
            f"{rating['mu']:.2f}",
            f"{interval[0]:.2f}–{interval[1]:.2f}" if interval else "-",
            f"{rating['sigma']:.2f}",
            f"{rating['ordinal']:.2f}",
            "-" if mean_rank is None else f"{mean_rank:.2f}",
            f"{wins}/{ties}/{losses}",
            escape(", ".join(f"{n} {s}" for s, n in entry["episodes_by_status"].items())),
        )
    console.print(fold_cells(table))
    for verdict in grading.get("verdicts") or []:
        console.print(escape(f"pairwise: {verdict['text']}"))
    consistency = grading.get("consistency")
    if consistency:
        disagreed = consistency["disagreed"]
        console.print(
            escape(
                f"judge asked in two orders: agreed on {consistency['agreed']} of"
                f" {counted(consistency['checked'], 'group')}"
                + (
                    "; disagreed on " + sample([str(d["task_id"]) for d in disagreed])
                    if disagreed
                    else ""
                )
            )
        )
    if grading.get("seed") is not None:
        console.print(f"shown orders and bootstrap seeded with {grading['seed']}")
    if not grading["tasks"]:
        return
    tasks = Table(title="per task ranking (1 is best; score and the judge's reasons)")
    tasks.add_column("task", no_wrap=True)
    tasks.add_column("rank", justify="right")
    tasks.add_column("variant", no_wrap=True)
    tasks.add_column("score", justify="right")
    tasks.add_column("why")
    for ranking in grading["tasks"]:
        reasons = (ranking.get("detail") or {}).get("reasons") or {}
        for n, entry in enumerate(ranking["ranking"]):
            why = reasons.get(entry["variant"])
            text = (
                "\n".join(str(r) for r in why)  # one reason a line
                if why
                else ("meets every expectation" if isinstance(why, list) else "")
            )
            tasks.add_row(
                escape(str(ranking["task_id"])) if n == 0 else "",
                str(entry["rank"]),
                escape(str(entry["variant"])),
                _score(entry.get("score")),
                escape(text),
                end_section=n == len(ranking["ranking"]) - 1,
            )
    console.print(fold_cells(tasks))


def _render_unrecorded(unrecorded: Mapping[str, Any], console: Console) -> None:

    if not unrecorded:
        return
    table = Table(title="reads with no recording (UnrecordedCall), per variant")
    table.add_column("variant", no_wrap=True)
    table.add_column("misses", justify="right")
    table.add_column("first ones (task #index tool args)")
    for variant, entry in unrecorded.items():
        calls = entry.get("calls") or []
        shown = [
            f"{c.get('task_id')} #{c.get('index')} {c.get('tool')} "
            + json.dumps(c.get("args"), ensure_ascii=False, sort_keys=True)[:80]
            for c in calls[:3]
        ]
        count = int(entry["count"])  # a whole number (`JobReport.from_json` checks it)
        rest = count - len(shown)
        more = f" (+{rest} more, see --json)" if rest > 0 else ""
        if len(calls) < count:  # --json lists the first MAX_LISTED_MISSES of them
            more = f" (+{rest} more: --json lists the first {len(calls)}, the traces every one)"
        table.add_row(escape(str(variant)), str(entry["count"]), escape("; ".join(shown) + more))
    console.print(fold_cells(table))


def _render_groups(report: JobReport, grading: Mapping[str, Any] | None, console: Console) -> None:
    not_run = report.not_run
    if not_run:
        unit = "episode" if any(_repeat(e) for e in not_run) else "pair"  # --repeats K
        console.print(f"[yellow]{counted(len(not_run), unit)} not run:[/yellow]")
        for group in group_by_reason(not_run, "pair"):
            console.print(
                escape(
                    f"  {counted(group['count'], unit)} {group['reason']}: {sample(group['items'])}"
                )
            )
    incomplete = report.incomplete
    by_status: dict[str, list[str]] = {}
    for entry in incomplete or []:
        item = (
            f"{entry.get('variant')}×{entry.get('task_id')}"
            if entry.get("variant")
            else (f"task {entry.get('task_id')}")
        )
        by_status.setdefault(str(entry.get("status")), []).append(item)
    for status, items in by_status.items():
        console.print(
            escape(
                f"{counted(len(items), 'run' if not status.startswith('judge') else 'group')}"
                f" incomplete ({status}; never scored, an unknown in every verdict):"
                f" {sample(items)}"
            )
        )
    stopped = report.stopped_by_ceiling
    if stopped and incomplete is None:  # a report written before ``incomplete`` existed
        items = [f"{e['variant']}×{e['task_id']}" for e in stopped]
        console.print(
            escape(
                f"{counted(len(items), 'run')} stopped by the ceiling (ungraded): {sample(items)}"
            )
        )
    for group in group_by_reason((grading or {}).get("ungraded") or [], "task"):
        console.print(
            escape(
                f"{counted(group['count'], 'task')} ungraded ({group['reason']}):"
                f" {sample(group['items'])}"
            )
        )
