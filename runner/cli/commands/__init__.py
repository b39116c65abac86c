"""The command table: each command's module and summary, and the registration of commands.

Each command lives in one module here and registers itself on the typer app when that module is
imported. Importing this package registers nothing: `register` imports the module of the
command a command line names, so that typer builds only that command's parameters and the
command's module may import what it uses at its top. A line that names no known command (the
top-level ``--help``, no argument, an unknown name) registers each command as its name and
`Command.summary` only, which is all typer's listing and its "No such command" suggestions
read: ``--help`` imports no command module (tests/unit/cli/test_cli_gate.py pins what it leaves
unimported; tests/unit/cli/test_cli_lazy.py that the output is the same as with every command
registered, and that each summary is its command's first help paragraph).
`runner.cli.entry.main` calls `register` with ``sys.argv``; ``register()`` (no argument)
registers every command, for callers that invoke the app themselves (tests with typer's
``CliRunner``).

May import: `runner.cli.app` only; each command module imports the use case it calls, the
renderers and the packages below.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from runner.cli import helpstyle  # noqa: F401  (how --help reads; before the commands)
from runner.cli.app import GLOBAL_OPTIONS_WITH_VALUE, app

__all__ = ["COMMANDS", "Command", "command_name", "register"]


@dataclass(frozen=True)
class Command:
    """One command of the table.

    Attributes:
        module: its module under ``runner.cli.commands``.
        summary: the first paragraph of its help, as the top-level ``--help`` lists it.
    """

    module: str
    summary: str


# Command name -> its module and summary, in the order `--help` lists them.
COMMANDS: dict[str, Command] = {
    "check": Command(
        "check", "Tell, before anything runs, whether workflows can be sandboxed under a policy."
    ),
    "doctor": Command(
        "doctor",
        "Check the backend (default Docker), the sandbox image and that sandboxes are cut off.",
    ),
    "lint": Command(
        "lint", "Report which of the five seed fields each trace and each call is missing."
    ),
    "run": Command(
        "run", "Run one task of a workflow in a sandbox; print the summary and the trace path."
    ),
    "ledger": Command("ledger", "Show what was spent, by purpose (live, replay, judge)."),
    "record": Command(
        "record",
        "Run one task live (real tools, no sandbox) and record its trace; charged as live.",
    ),
    "submit": Command(
        "submit",
        "Shadow-evaluate workflow versions on recorded tasks in sandboxes, then grade them.",
    ),
    "report": Command(
        "report",
        "Show a submission's report again (from its job folder); --html writes it as a page.",
    ),
    "reproduce": Command(
        "reproduce",
        "Replay recorded runs with no network: reproduced (0), not_reproduced (1), refused (5).",
    ),
    "packet": Command(
        "packet",
        "Pack a trace with its workflow and tool code into a packet that reproduce accepts.",
    ),
    "view": Command(
        "view", "Serve a job's or a trace's report page on 127.0.0.1 and print its address."
    ),
    "jobs": Command("jobs", "List submissions (newest first); show one's report; prune old ones."),
    "image": Command("image", "Build and try the sandbox image."),
    "import": Command(
        "importer",
        "Import agent traces (τ²-bench, OpenAI messages, OpenTelemetry, Inspect, Harbor ATIF).",
    ),
    "tasks": Command("tasks", "Make task files from recorded runs."),
    "policy": Command("policy", "Compare policies on recorded calls."),
}


def command_name(args: Sequence[str]) -> str | None:
    """The command a command line invokes, or None when it names none before asking for help.

    Args:
        args: the arguments after the program's name (``sys.argv[1:]``).

    Returns:
        The first argument that is neither an option nor the value of a global option that
        takes one (`runner.cli.app.GLOBAL_OPTIONS_WITH_VALUE`, also as ``--opt=value``);
        None if there is none, or if ``--help`` comes first (the top-level help).
    """
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--help":
            return None
        elif arg in GLOBAL_OPTIONS_WITH_VALUE:
            skip = True
        elif arg == "--":
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def register(args: Sequence[str] | None = None) -> None:
    """Register the commands ``args`` needs on the app.

    Args:
        args: the command line after the program's name: the named command's module is
            imported; a line naming no known command registers every command's summary
            only (`_list_only`); None (or a ``--`` before the command) imports every module.
    """
    name = None if args is None else command_name(args)
    if name in COMMANDS:
        importlib.import_module(f"{__name__}.{COMMANDS[name].module}")
    elif args is None or "--" in args:
        for command in COMMANDS.values():
            importlib.import_module(f"{__name__}.{command.module}")
    else:
        for listed, command in COMMANDS.items():
            app.command(listed, help=command.summary)(_list_only)


def _list_only() -> None:
    """The stand-in of a command that is only listed: never invoked (`register`)."""
    raise AssertionError("a listed-only command was invoked")  # pragma: no cover
