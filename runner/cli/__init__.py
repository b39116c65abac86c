"""The typer command-line interface: parse -> settings -> build objects -> call -> exit code.

``app`` holds the typer ``app`` and `main` (the one boundary where exceptions become exit codes);
``commands/`` one module per command, each registering itself on `app`; tables and other
rendering live here and only here (``report_render``, ``output``, ``terminal``, ``helpstyle``);
``log`` configures structlog for the process.

May import: every other package of runner. Heavy libraries (docker, pydantic-settings, rich)
are imported inside the commands, so that ``--help`` stays quick.
"""

from runner.cli.entry import main

# `app` is not re-exported: the name would hide the module runner.cli.app
__all__ = ["main"]
