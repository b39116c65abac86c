"""The argument and option declarations several commands share: one home for each.

A command names its parameter with one of these (``as_json: JsonOption = False``), so that
the same flag reads the same in every ``--help`` and is declared once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["JsonOption", "PriceOption", "TaskOption", "TasksOption", "WorkflowArgument"]

WorkflowArgument = Annotated[
    Path, typer.Argument(help="The workflow YAML file.", show_default=False)
]
TasksOption = Annotated[
    Path, typer.Option("--tasks", help="Task file (JSONL).", metavar="FILE", show_default=False)
]
TaskOption = Annotated[
    str, typer.Option("--task", help="Id of the task to run.", metavar="ID", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
PriceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        help="A model's price, MODEL=IN/OUT in USD per million input/output tokens"
        " (repeat; wins over the policy's prices).",
        metavar="MODEL=IN/OUT",
    ),
]
