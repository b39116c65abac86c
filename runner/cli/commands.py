"""Imports every command module so that each registers itself on the typer app."""

from runner.cli import helpstyle  # noqa: F401  (how --help reads; before the commands)
from runner.cli import check  # noqa: F401
from runner.cli import doctor  # noqa: F401
from runner.cli import image  # noqa: F401
from runner.cli import lint  # noqa: F401
from runner.cli import run  # noqa: F401
from runner.cli import ledger  # noqa: F401
from runner.cli import importer  # noqa: F401
from runner.cli import record  # noqa: F401
from runner.cli import submit  # noqa: F401
from runner.cli import reproduce  # noqa: F401
from runner.cli import tasks  # noqa: F401
from runner.cli import packet  # noqa: F401
