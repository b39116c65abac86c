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

import typer
from typer._click.exceptions import ClickException  # typer 0.29 vendors click (pinned)

from runner.cli.app import app, json_asked, say_error
from runner.cli.commands import register
from runner.cli.render.terminal import echo, stdout_gone
from runner.errors import SandboxReplayError

__all__ = ["main"]


def main() -> None:
    """Entry point of the console script; exits with SPEC.md's exit code.

    With ``--json`` on the command line (`runner.cli.app.json_asked`) every error is one JSON
    object on stdout (`runner.cli.app.say_error`), a usage error too (exit 2): a script reading
    stdout always gets an object.
    """
    args = sys.argv[1:]
    register(args)
    as_json = json_asked(args)
    try:
        if not as_json:
            app(prog_name="sandbox-replay")
        code = app(prog_name="sandbox-replay", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)  # click returns Exit's code
    except BrokenPipeError:  # stdout's reader left (``| head``): no traceback, no noise
        stdout_gone()
        sys.exit(1)
    except typer.Abort:  # end of input at a prompt, as typer's standalone mode says it
        echo("Aborted!", err=True)
        sys.exit(1)
    except (SandboxReplayError, ClickException) as exc:
        say_error(exc, as_json=as_json)
        sys.exit(exc.exit_code if isinstance(exc, SandboxReplayError) else 2)
