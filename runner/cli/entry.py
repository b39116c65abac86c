"""The console script ``sandbox-replay``: every command registered on `app`, run, exit codes.

`main` is the one boundary where exceptions become exit codes (SPEC.md): typer maps usage
errors to 2 and Ctrl-C to 130; a `SandboxReplayError` that reaches it becomes one ``error:``
line on stderr and its family's exit code. `main` registers the invoked command only
(`runner.cli.commands.register`: every command for the top-level help or an unknown name), and
each command imports its heavy parts (docker, pydantic-settings, rich) where it runs, so that
``--help`` and ``check`` stay quick.
"""

from __future__ import annotations

import sys

from runner.cli.app import app
from runner.cli.commands import register
from runner.cli.render.terminal import echo, stdout_gone
from runner.errors import SandboxReplayError

__all__ = ["main"]


def main() -> None:
    """Entry point of the console script; exits with SPEC.md's exit code."""
    register(sys.argv[1:])
    try:
        app(prog_name="sandbox-replay")
    except BrokenPipeError:  # stdout's reader left (``| head``): no traceback, no noise
        stdout_gone()
        sys.exit(1)
    except SandboxReplayError as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
