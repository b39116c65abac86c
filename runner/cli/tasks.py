"""``sandbox-replay tasks extract TRACE... -o TASKS.jsonl``: recorded runs become tasks.

Each trace gives one task: its input, its ``read`` calls as observations and, for a run that
succeeded, the recorded output and tool calls as ``expected`` (`runner.orchestrator.
tasks_extract`). The file is the ``--tasks`` input of ``submit`` and ``run``. Exit codes: 0
written, 2 a trace is unreadable or incomplete (file, line, field named; nothing written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail
from runner.errors import SandboxReplayError

tasks_app = typer.Typer(help="Make task files from recorded runs.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("extract")
def extract_command(
    traces: Annotated[
        list[Path], typer.Argument(help="Recorded traces (JSONL).", show_default=False)
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The task file to write.", show_default=False)
    ],
) -> None:
    """Turn recorded runs into shadow-evaluation tasks (input, observations, expected)."""
    from runner.orchestrator.reproduce_inputs import expand_inputs
    from runner.orchestrator.tasks_extract import extract_tasks

    try:
        paths = [p for p in expand_inputs(list(traces)) if p.name.endswith(".jsonl")]
        tasks = extract_tasks(paths, output)
    except SandboxReplayError as exc:
        fail(exc)
    for task in tasks:
        expected = "with expected outcome" if "expected" in task else "no expected outcome"
        typer.echo(f"{task['task_id']}: {len(task['observations'])} observations, {expected}")
    typer.echo(f"wrote {len(tasks)} tasks to {output}")
