"""One module per command, each registering itself on the typer app when it is imported.

Importing this package registers nothing: `register` imports the modules of the commands a
command line names, so that typer builds only the invoked command's parameters (building all
of them cost ~0.17 s at every start, issue 16), and every module when the line names none,
asks for the top-level help or names an unknown command (typer's listing, "No such command"
and its suggestions need them all). `runner.cli.entry.main` calls it with ``sys.argv``;
``register()`` (no argument) registers every command, for callers that invoke the app
themselves (tests with typer's ``CliRunner``).

May import: every other package of runner (each command imports its heavy parts where it runs).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from runner.cli import helpstyle  # noqa: F401  (how --help reads; before the commands)
from runner.cli.app import GLOBAL_OPTIONS_WITH_VALUE

__all__ = ["COMMANDS", "command_name", "register"]

# Command name -> its module under runner.cli.commands, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "check": "check",
    "doctor": "doctor",
    "image": "image",
    "lint": "lint",
    "run": "run",
    "ledger": "ledger",
    "import": "importer",
    "record": "record",
    "submit": "submit",
    "report": "report",
    "reproduce": "reproduce",
    "tasks": "tasks",
    "packet": "packet",
    "view": "view",
    "policy": "policy",
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
    """Import the command modules that ``args`` needs, which registers them on the app.

    Args:
        args: the command line after the program's name: the named command's module only;
            every module when it names no known command (or ``args`` is None).
    """
    name = None if args is None else command_name(args)
    named = COMMANDS.get(name) if name is not None else None
    for module in [named] if named is not None else COMMANDS.values():
        importlib.import_module(f"{__name__}.{module}")
