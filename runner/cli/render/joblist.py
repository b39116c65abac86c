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

from rich.table import Table

from runner.cli.render.console import fold_cells, table_console
from runner.cli.render.terminal import markup

if TYPE_CHECKING:
    from runner.submit.jobs import JobEntry, PruneResult

__all__ = ["print_job_list", "print_prune"]


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch_s))


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


def print_job_list(entries: Sequence[JobEntry], state_dir: Path) -> None:
    """The jobs table (newest first), then where they live; a line when there is none."""
    console = table_console()
    if not entries:
        console.print(markup(f"no jobs in {state_dir} (submit makes one)"))
        return
    table = Table(title=f"{len(entries)} job{'s' if len(entries) != 1 else ''}")
    for column in ("job", "created (UTC)", "variants", "tasks", "status", "spend", "folder"):
        table.add_column(column, justify="right" if column in ("tasks", "spend") else "left")
    for entry in entries:
        table.add_row(
            markup(entry.id),
            _when(entry.created),
            markup(_variants(entry)),
            _tasks(entry),
            markup(_status(entry)),
            f"${entry.spend_usd:.4f}",
            markup(str(entry.folder) if entry.folder is not None else "– (ledger only)"),
        )
    console.print(fold_cells(table))
    console.print("show one: sandbox-replay jobs show JOB_ID", style="dim")


def print_prune(result: PruneResult, *, dry_run: bool) -> None:
    """One line per job removed (or that would be), then the totals."""
    console = table_console()
    verb = "would remove" if dry_run else "removed"
    for entry in result.removed:
        console.print(markup(f"{verb} {entry.id} ({_when(entry.created)}, {_status(entry)})"))
    for job_id in result.skipped_live:
        console.print(markup(f"kept {job_id}: its orchestrator may still be running"))
    console.print(
        f"{verb} {len(result.removed)} job{'s' if len(result.removed) != 1 else ''}"
        f" ({result.ledger_rows} ledger rows, {result.traces} traces); {result.kept} kept"
    )
