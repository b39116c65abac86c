"""One module per command; importing this package registers every command on the typer app.

May import: every other package of runner (each command imports its heavy parts where it runs).
"""

from runner.cli import helpstyle  # noqa: F401  (how --help reads; before the commands)
from runner.cli.commands import check
from runner.cli.commands import doctor
from runner.cli.commands import image
from runner.cli.commands import lint
from runner.cli.commands import run
from runner.cli.commands import ledger
from runner.cli.commands import importer
from runner.cli.commands import record
from runner.cli.commands import submit
from runner.cli.commands import report
from runner.cli.commands import reproduce
from runner.cli.commands import tasks
from runner.cli.commands import packet
from runner.cli.commands import view
from runner.cli.commands import policy

__all__ = [
    "check",
    "doctor",
    "image",
    "importer",
    "ledger",
    "lint",
    "packet",
    "policy",
    "record",
    "report",
    "reproduce",
    "run",
    "submit",
    "tasks",
    "view",
]
