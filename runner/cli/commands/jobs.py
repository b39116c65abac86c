"""``sandbox-replay jobs [show ID | prune ...]``: the submissions of this state directory.

``jobs`` lists every job, newest first: id, when it was created, its variants, tasks, status
and exit code, spend (USD, every purpose) and folder (`runner.submit.jobs.list_jobs`).
``jobs --all`` lists the ``run``, ``record`` and ``reproduce`` jobs too, each named by its
trace's id (``run-...``, ``repro-...``) with what happened as its status (the episode's status,
``reproduce``'s verdict). ``jobs show ID`` opens every id listed: a submission's report as
``report ID`` prints it (the same renderer); a submission without a report (failed before it:
``failure.json``; interrupted) or a single-episode job: its entry (status, task, trace).
``jobs prune --older-than 7d --keep 10 [--dry-run]`` removes old jobs: their folders, ledger
rows and traces, never a job whose orchestrator is alive (`runner.submit.jobs.prune_jobs`), and
says why each other job stayed (among the newest, not old enough, still running) and how many
single-episode jobs it did not consider (without ``--all``).

``--json``: one object per command. ``jobs``: ``{"state_dir", "jobs": [JobEntry.to_json()]}``;
``jobs show``: the report (``report --json``), or ``JobEntry.to_json()`` for a job without
one; ``jobs prune``: ``{"dry_run", "removed": [JobEntry.to_json()], "kept", "ledger_rows",
"traces", "skipped_live": [id], "kept_because": {"newest", "recent", "live": [id]},
"not_considered"}``; an error: ``{"exit_code", "error", ...}``. Exit 2 for invalid input (an
unknown job, a bad age).
"""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.joblist import print_job_entry, print_job_list, print_prune
from runner.cli.render.jobview import print_report
from runner.cli.render.jsonout import print_json
from runner.cli.reportfile import load_checked_report
from runner.errors import SandboxReplayError
from runner.submit.jobs import find_job, list_jobs, parse_age, prune_jobs

EveryCommandOption = Annotated[
    bool,
    typer.Option(
        "--all", help="Also the ledger rows of run, record and reproduce (one per episode)."
    ),
]

jobs_app = typer.Typer(
    name="jobs",
    help="List submissions (newest first); show one's report; prune old ones.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(jobs_app)


@jobs_app.callback(invoke_without_command=True)
def jobs_command(
    ctx: typer.Context, every: EveryCommandOption = False, as_json: JsonOption = False
) -> None:
    """List submissions (newest first); show one's report; prune old ones.

    Each job: id, created (UTC), variants, tasks, status and exit code, spend, folder.
    """
    if ctx.invoked_subcommand is not None:
        return
    settings = state(ctx).settings()
    try:
        entries = list_jobs(settings, every_command=every)
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json({"state_dir": str(settings.state_dir), "jobs": [e.to_json() for e in entries]})
        return
    print_job_list(entries, settings.state_dir)


@jobs_app.command("show")
def jobs_show_command(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="The job id.", show_default=False)],
    as_json: JsonOption = False,
) -> None:
    """Show a job: a submission's report (as report JOB_ID), a run's or reproduce's outcome.

    Every id jobs --all lists opens: a run, record or reproduce (named by its trace's id) shows
    its status, task, trace and spend; a submission without a report its failure or status.
    """
    settings = state(ctx).settings()
    try:
        entry = find_job(settings, job_id)
        if entry.folder is not None and (entry.folder / "report.json").is_file():
            report = load_checked_report(settings, job_id)
            print_report(report, as_json)
            return
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json(entry.to_json())
        return
    print_job_entry(entry)


@jobs_app.command("prune")
def jobs_prune_command(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Remove jobs created longer ago than AGE (30m, 12h, 7d, 2w).",
            metavar="AGE",
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option(
            "--keep", min=0, help="Keep the N newest jobs whatever their age.", metavar="N"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    every: EveryCommandOption = False,
    as_json: JsonOption = False,
) -> None:
    """Remove old jobs: folder, ledger rows and traces (never one still running).

    With --older-than and --keep, a job goes only when both allow it.
    """
    settings = state(ctx).settings()
    try:
        age = parse_age(older_than) if older_than is not None else None
        result = prune_jobs(
            settings, older_than_s=age, keep=keep, dry_run=dry_run, every_command=every
        )
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json(
            {
                "dry_run": dry_run,
                "removed": [e.to_json() for e in result.removed],
                "kept": result.kept,
                "ledger_rows": result.ledger_rows,
                "traces": result.traces,
                "skipped_live": result.skipped_live,
                "kept_because": result.kept_reasons(),
                "not_considered": result.not_considered,
            }
        )
        return
    print_prune(result, dry_run=dry_run, keep=keep, older_than=older_than)
