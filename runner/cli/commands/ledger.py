"""``sandbox-replay ledger [--job ID] [--json]``: spend totals by purpose from the ledger.

Reads ``<state_dir>/ledger.sqlite3`` (settings: ``SANDBOX_REPLAY_STATE_DIR``). Never creates
it: with no ledger yet, every total is zero. ``--job`` narrows the totals to one job; an
invalid or unknown job id is invalid input (exit 2). Output: a table (stdout), or one JSON
object with ``--json``:
``{"ledger": path, "schema_version": int | null, "job": {id, status, created} | null,
"purposes": {"live"|"replay"|"judge": {"charged": {...}, "reserved": {...}, "settled_charges",
"model_calls", "runs_by_status"}}}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.console import fold_cells, table_console
from runner.cli.render.jsonout import print_json
from runner.cli.render.report import estimated_lines
from runner.domain.ids import validate_id
from runner.domain.words import counted
from runner.errors import InputError, SandboxReplayError
from runner.ledger import LEDGER_FILENAME, PURPOSES, Ledger, PurposeTotals


@app.command("ledger")
def ledger_command(
    ctx: typer.Context,
    job: Annotated[
        str | None, typer.Option("--job", help="Only this job's totals.", show_default=False)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show what was spent, by purpose (live, replay, judge).

    Runs, model calls, tokens, USD and sandbox seconds charged, and what is reserved but not
    yet settled. Exit 2 for an invalid or unknown --job.
    """
    settings = state(ctx).settings()
    path = settings.state_dir / LEDGER_FILENAME
    try:
        if job is not None:
            validate_id(job, kind="job id", field="--job")
        data = _read(path, job)
    except SandboxReplayError as exc:
        fail(exc)
    if as_json:
        print_json(data)
        return
    _render(data)


def _read(path: Path, job: str | None) -> dict[str, Any]:

    data: dict[str, Any] = {"ledger": str(path), "schema_version": None, "job": None}
    if not path.exists():
        if job is not None:
            raise InputError(f"no job {job!r}: there is no ledger yet at {path}", field="--job")
        data["purposes"] = {p: PurposeTotals(purpose=p).to_dict() for p in PURPOSES}
        return data
    with Ledger(path) as ledger:
        data["schema_version"] = ledger.version
        if job is not None:
            found = ledger.get_job(job)
            if found is None:
                raise InputError(f"no job {job!r} in {path}", field="--job")
            data["job"] = {"id": found.id, "status": found.status, "created": found.created}
        data["purposes"] = {p: t.to_dict() for p, t in ledger.totals(job).items()}
    return data


def _render(data: dict[str, Any]) -> None:

    console = table_console()
    title = "Ledger totals by purpose"
    if data["job"] is not None:
        title += f" — job {data['job']['id']} ({data['job']['status']})"
    table = Table(title=escape(title), title_justify="left")
    for column in (
        "purpose",
        "runs",
        "model calls",
        "tokens in",
        "tokens out",
        "USD",
        "sandbox s",
        "reserved",
        "runs by status",
    ):
        table.add_column(
            column, justify="left" if column in ("purpose", "runs by status") else "right"
        )
    for purpose, totals in data["purposes"].items():
        charged, reserved = totals["charged"], totals["reserved"]
        held = [counted(reserved["runs"], "run")] if reserved["runs"] else []
        held += [f"${reserved['usd']:.4f}"] if reserved["usd"] else []
        held += (
            [f"{reserved['tokens_in'] + reserved['tokens_out']} tok"]
            if (reserved["tokens_in"] or reserved["tokens_out"])
            else []
        )
        statuses = ", ".join(f"{k} {v}" for k, v in totals["runs_by_status"].items())
        table.add_row(
            purpose,
            str(charged["runs"]),
            str(totals["model_calls"]),
            str(charged["tokens_in"]),
            str(charged["tokens_out"]),
            f"${charged['usd']:.4f}",
            f"{charged['sandbox_s']:.1f}",
            " ".join(held) or "–",
            escape(statuses) or "–",
        )
    console.print(fold_cells(table))

    for line in estimated_lines(data["purposes"]):
        console.print(escape(line))
    note = f"ledger: {data['ledger']}"
    if data["schema_version"] is None:
        note += " (none yet: nothing was charged)"
    console.print(escape(note), style="dim")
