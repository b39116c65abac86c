"""Imports every command module so that each registers itself on the typer app."""

from runner.cli import doctor, image  # noqa: F401
