"""The typer command-line interface: parse -> settings -> call ONE use case -> render -> exit code.

``app`` holds the typer ``app``, ``entry`` `main` (the one boundary where exceptions become exit
codes); ``commands/`` one thin module per command, each registering itself on `app` (the table:
module and summary), importing no other command; ``render/`` everything printed or written
(terminal text, tables, JSON, JUnit, HTML), and only there; ``log`` configures structlog for the
process, ``helpstyle`` how ``--help`` reads.

May import: every other package of runner. ``--help`` imports no command module (the table's
summaries); the docker SDK and ray are imported where a backend is made.
"""

from runner.cli.entry import main

# `app` is not re-exported: the name would hide the module runner.cli.app
__all__ = ["main"]
