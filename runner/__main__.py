"""``python -m runner`` runs the CLI."""

from runner.cli.app import main

main()
