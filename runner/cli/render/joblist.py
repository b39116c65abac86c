"""``jobs`` and ``jobs prune`` on the terminal: a table of jobs, and what a prune removed.

Every cell is inert (`runner.cli.render.console.table_console`) and markup-escaped: a job
folder's files are anyone's. The table folds what does not fit (`fold_cells`): an id is never
cut at 80 columns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from runner.cli.render.console import fold_cells, one_line_piped, table_console
from runner.cli.render.terminal import markup, one_line
from runner.domain.words import counted

if TYPE_CHECKING:
    from runner.submit.jobs import JobEntry, PruneResult

__all__ = ["print_job_entry", "print_job_list", "print_prune"]


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch_s))


def _short_when(epoch_s: float) -> str:
    """``12-07 19:36`` (the year is said once, by the caller)."""
    return time.strftime("%m-%d %H:%M", time.gmtime(epoch_s))


def _variants(entry: JobEntry) -> str:
    return ", ".join(entry.variants) or "–"


def _tasks(entry: JobEntry) -> str:
    if entry.tasks is None:
        return "–"
    return f"{entry.tasks} x{entry.repeats}" if entry.repeats > 1 else str(entry.tasks)


def _status(entry: JobEntry) -> str:
    exit_code = f" (exit {entry.exit_code})" if entry.exit_code is not None else ""
    command = f"{entry.command}: " if entry.command != "submit" else ""
    return command + entry.status + exit_code + (", live" if entry.live else "")


def print_job_list(
    entries: Sequence[JobEntry], state_dir: Path, console: Console | None = None
) -> None:
    """The jobs table (newest first), then where they live; a line when there is none.

    Args:
        entries: the jobs (`runner.submit.jobs.list_jobs`).
        state_dir: the state directory (its ``jobs/`` folder is said once, under the table).
        console: where to print (default: `table_console`, stdout).
    """
    console = console or table_console()
    if not entries:
        console.print(markup(f"no jobs in {state_dir} (submit makes one)"))
        return
    years = sorted({time.gmtime(e.created).tm_year for e in entries})
    title = f"{len(entries)} job{'s' if len(entries) != 1 else ''}, newest first"
    span = str(years[0]) if years[0] == years[-1] else f"{years[0]}-{years[-1]}"
    table = Table(
        title=f"{title} (created in UTC, {span})",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("job")
    for column in ("created", "variants", "tasks", "status", "spend"):
        table.add_column(column, justify="right" if column in ("tasks", "spend") else "left")
    standard = state_dir.resolve() / "jobs"
    elsewhere = [  # a run, record or reproduce has no folder: its trace is its record
        e
        for e in entries
        if e.command == "submit" and (e.folder is None or e.folder.parent != standard)
    ]
    for entry in entries:
        table.add_row(
            markup(entry.id),
            _short_when(entry.created),
            markup(_variants(entry)),
            _tasks(entry),
            markup(_status(entry)),
            f"${entry.spend_usd:.4f}",
        )
    # the id whole on one line (it is what the user copies) while the other columns keep the
    # ~50 they need to wrap in; on a narrower console it folds with them
    fits = max(len(e.id) for e in entries) + 50 <= console.width
    console.print(fold_cells(table, whole=("job",) if fits else ()))
    console.print(
        markup(f"folders: {standard}/JOB_ID"), style="dim", soft_wrap=one_line_piped(console)
    )
    for entry in elsewhere:  # a row of the ledger whose folder is gone
        console.print(markup(f"  {entry.id}: no folder (ledger rows only)"), style="dim")
    console.print("show one: sandbox-replay jobs show JOB_ID", style="dim")


def _kept(result: PruneResult, keep: int | None, older_than: str | None) -> str:
    """``3 kept: 2 among the 2 newest (--keep 2), 1 newer than 7d (--older-than)``."""
    why = []
    if result.kept_newest:
        why.append(f"{len(result.kept_newest)} among the {keep} newest (--keep {keep})")
    if result.kept_recent:
        why.append(f"{len(result.kept_recent)} not older than {older_than} (--older-than)")
    if result.skipped_live:
        why.append(f"{len(result.skipped_live)} still running")
    return f"{result.kept} kept" + (": " + ", ".join(why) if why else "")


def print_prune(
    result: PruneResult,
    *,
    dry_run: bool,
    keep: int | None = None,
    older_than: str | None = None,
) -> None:
    """One line per job removed (or that would be), then the totals and why the rest stayed.

    Args:
        result: what `runner.submit.jobs.prune_jobs` did.
        dry_run: it removed nothing (``would remove``).
        keep: ``--keep``, named in the reason a job stayed.
        older_than: ``--older-than`` as given (``7d``), named likewise.
    """
    console = table_console()
    verb = "would remove" if dry_run else "removed"
    for entry in result.removed:
        console.print(markup(f"{verb} {entry.id} ({_when(entry.created)}, {_status(entry)})"))
    for job_id in result.skipped_live:
        console.print(markup(f"kept {job_id}: its orchestrator may still be running"))
    console.print(
        markup(
            f"{verb} {counted(len(result.removed), 'job')}"
            f" ({counted(result.ledger_rows, 'ledger row')}, {counted(result.traces, 'trace')});"
            f" {_kept(result, keep, older_than)}"
        )
    )
    if result.not_considered:
        console.print(
            f"not considered: {result.not_considered} run, record and reproduce"
            " job(s) (--all prunes them too)",
            style="dim",
        )


def print_job_entry(entry: JobEntry, console: Console | None = None) -> None:
    """``jobs show`` of a job without a report: a run, record or reproduce, or a failed job.

    A single-episode command's job is named by its trace's id: its verdict or episode status,
    workflow, task, spend, the trace and the command that shows it. A submission without a
    report: its status, the failure it recorded (``failure.json``) or how to continue it.
    """
    console = console or table_console()
    exit_code = f" (exit {entry.exit_code})" if entry.exit_code is not None else ""
    console.print(markup(f"{entry.command} {entry.id}: {entry.status}{exit_code}"))
    what = (
        f"workflow {_variants(entry)}, task {entry.task_id or '–'}"
        if entry.command != "submit"
        else f"variants {_variants(entry)}, tasks {_tasks(entry)}"
    )
    console.print(
        markup(f"  {what}; created {_when(entry.created)} UTC; spend ${entry.spend_usd:.4f}")
    )
    if entry.error is not None:
        # an error's text quotes what a sandbox or a file said: one line, whatever it holds
        console.print(markup(f"  failed before its report: {one_line(entry.error)}"))
    if entry.trace is not None:
        console.print(markup(f"  trace: {entry.trace}"), soft_wrap=True)
        console.print(markup(f"  see it: sandbox-replay view {entry.trace}"), style="dim")
    elif entry.command == "submit" and entry.error is None and entry.status != "running":
        console.print(
            markup(f"  no report yet; continue with: sandbox-replay submit --resume {entry.id}"),
            style="dim",
        )
    if entry.folder is not None:
        console.print(markup(f"  folder: {entry.folder}"), style="dim", soft_wrap=True)
