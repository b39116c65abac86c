"""Imports every command module so that each registers itself on the typer app."""

from runner.cli import helpstyle  # noqa: F401  (how --help reads; before the commands)
from runner.cli.commands import check  # noqa: F401
from runner.cli.commands import doctor  # noqa: F401
from runner.cli.commands import image  # noqa: F401
from runner.cli.commands import lint  # noqa: F401
from runner.cli.commands import run  # noqa: F401
from runner.cli.commands import ledger  # noqa: F401
from runner.cli.commands import importer  # noqa: F401
from runner.cli.commands import record  # noqa: F401
from runner.cli.commands import submit  # noqa: F401
from runner.cli.commands import reproduce  # noqa: F401
from runner.cli.commands import tasks  # noqa: F401
from runner.cli.commands import packet  # noqa: F401
