"""``python -m runner`` runs the CLI."""

from runner.cli.entry import main

main()
