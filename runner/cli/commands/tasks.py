"""``sandbox-replay tasks extract TRACE... -o TASKS.jsonl``: recorded runs become tasks.

Each trace gives one task: its input, its ``read`` calls as observations and, for a run that
succeeded, the recorded output and tool calls as ``expected`` (`runner.tracetools.
tasks_extract`). The file is the ``--tasks`` input of ``submit`` and ``run``. Exit codes: 0
written, 2 a trace is unreadable or incomplete (file, line, field named; nothing written).

``--json``: one JSON object on stdout, ``{"output", "tasks": [{"task_id", "observations" (a
count), "expected" (whether it has an expected outcome), "recorded_output" (kept, not
graded)}], "skipped": {reason: [trace]}, "duplicates": [{"trace", "task_id", "kept"}]}``; an
error is ``{"exit_code", "error", ...}`` as every command's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail
from runner.cli.options import JsonOption
from runner.cli.render.jsonout import print_json
from runner.cli.render.terminal import echo
from runner.domain.words import counted
from runner.errors import SandboxReplayError
from runner.reproduce.inputs import expand_inputs
from runner.tracetools.tasks_extract import extract_tasks

tasks_app = typer.Typer(help="Make task files from recorded runs.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("extract")
def extract_command(
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Recorded traces (JSONL), or folders of them.",
            metavar="TRACE",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "-o",
            "--output",
            help="The task file to write.",
            metavar="TASKS.jsonl",
            show_default=False,
        ),
    ],
    include_all: Annotated[
        bool,
        typer.Option(
            "--all", help="Also take replay and judge runs and runs stopped by a ceiling."
        ),
    ] = False,
    expect_recorded_output: Annotated[
        bool,
        typer.Option(
            "--expect-recorded-output",
            help="Make a succeeded run's output the expected answer (default: kept as"
            " recorded_output, not graded: a fixed version would lose to the recorded one).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Turn recorded production runs into tasks: input, observations, expected outcome."""
    try:
        paths = [p for p in expand_inputs(list(traces)) if p.name.endswith(".jsonl")]
        done = extract_tasks(
            paths, output, include_all=include_all, expect_recorded_output=expect_recorded_output
        )
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json(
            {
                "exit_code": 0,
                "output": str(output),
                "tasks": [
                    {
                        "task_id": task["task_id"],
                        "observations": len(task["observations"]),
                        "expected": "expected" in task,
                        "recorded_output": "recorded_output" in task,
                    }
                    for task in done.tasks
                ],
                "skipped": {why: [str(p) for p in paths] for why, paths in done.skipped.items()},
                "duplicates": [
                    {"trace": str(path), "task_id": task_id, "kept": str(kept)}
                    for path, task_id, kept in done.duplicates
                ],
            }
        )
        return
    for task in done.tasks:
        expected = "with expected outcome" if "expected" in task else "no expected outcome"
        echo(f"{task['task_id']}: {counted(len(task['observations']), 'observation')}, {expected}")
    for reason, skipped in done.skipped.items():
        echo(f"skipped {len(skipped)} trace(s) {reason}; --all to include them")
    for path, task_id, kept in done.duplicates:
        echo(f"skipped {path}: task {task_id} is taken from {kept} (the one recorded last)")
    unchecked = sum(1 for task in done.tasks if "recorded_output" in task)
    if unchecked:
        echo(
            f"{unchecked} task(s) keep their recorded output as recorded_output, not graded: write"
            " expected.output or expected.output_contains where it is right"
            " (--expect-recorded-output takes it as is)"
        )
    echo(f"wrote {counted(len(done.tasks), 'task')} to {output}")
