"""``sandbox-replay record WORKFLOW --tasks T --task ID [-o TRACE]``: a live, recorded run.

Runs the workflow outside the sandbox with its real tools and providers (no isolation: the
workflow's ``unsafe`` tools really act), writes the trace with the five fields on every call
and charges the run to the ledger under purpose ``live``. Exit codes: 0 whenever the episode
ran (its status is data in the output), 2 invalid input, 4 the ``live`` ceiling is reached,
6 the local runtime could not run (recording a failure is the point: unlike ``run``, a failed
episode is exit 0). ``--json``: the summary with ``exit_code`` this command's and
``episode_exit_code`` the trace's, as ``run --json``. No ``--backend``: there is no sandbox to place
(`runner.backends.unsandboxed`), so ``SANDBOX_REPLAY_BACKEND`` does not apply either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption, TaskOption, TasksOption, WorkflowArgument
from runner.cli.render.episode import print_episode, warn_skipped_line
from runner.cli.render.jsonout import print_json
from runner.errors import EXIT_INFRA, EXIT_OK, SandboxReplayError
from runner.runs.record import record_run


@app.command("record")
def record_command(
    ctx: typer.Context,
    workflow: WorkflowArgument,
    tasks: TasksOption,
    task: TaskOption,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Write the trace here (JSONL).", metavar="FILE"),
    ] = None,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="Policy for limits, prices and the live ceiling.",
            metavar="NAME|FILE",
        ),
    ] = "shadow",
    as_json: JsonOption = False,
) -> None:
    """Run one task live (real tools, no sandbox) and record its trace; charged as live."""
    settings = state(ctx).settings()
    try:
        result = record_run(
            settings,
            workflow,
            tasks,
            task,
            output=output,
            policy_name=policy,
            on_skipped_line=warn_skipped_line,
        )
    except SandboxReplayError as exc:
        fail(exc)
    code = EXIT_INFRA if result.infrastructure_failed else EXIT_OK  # a failure recorded is data
    if as_json:  # exit_code: this command's, as in every command's JSON (as run --json)
        print_json(result.summary(exit_code=code))
    else:
        print_episode(result, sandboxed=False)
    raise typer.Exit(code)
