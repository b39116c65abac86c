"""The typer command-line interface: parse -> settings -> build objects -> call -> exit code."""
