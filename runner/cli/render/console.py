"""Consoles for the commands that print tables (submit, report, ledger, lint).

On a terminal rich uses the terminal's width. When stdout is piped or redirected rich would
assume 80 columns and wrap inside phrases and identifiers (``= 44`` / ``runs``, file names cut
in two); such output is read by tools and people alike, so it gets a wide console
(`PIPED_WIDTH` columns) instead, and id columns are created with ``no_wrap=True``.

A reader that goes away (``| head -1``) silences the console: rich's default would exit 1
(`rich.console.Console.on_broken_pipe`), replacing the job's exit code.

Every string such a console renders (printed text, table cells, titles, markup included) is made
`runner.cli.render.terminal.inert` first, and emoji codes (``:warning:``) are not expanded: a field
quoted from a sandbox or a trace can neither drive the terminal nor turn into a picture. Fields
must still be markup-escaped where markup is parsed (`runner.cli.render.terminal.markup`), so that
``[bold]`` in data prints as it is.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console

from runner.cli.render.terminal import inert, stdout_gone

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

__all__ = ["PIPED_WIDTH", "table_console"]

PIPED_WIDTH = 200


def table_console(*, stderr: bool = False, file: TextIO | None = None) -> Console:
    """Return a rich console: the terminal's width on a TTY, `PIPED_WIDTH` columns otherwise.

    Args:
        stderr: write to stderr instead of stdout.
        file: write there instead (its ``isatty`` decides the width).
    """

    class _InertConsole(Console):
        def on_broken_pipe(self) -> None:
            stdout_gone()
            self.quiet = True  # the rest of the output goes nowhere; the exit code stands

        def render_str(self, text: str, **kwargs: Any) -> Text:
            return super().render_str(inert(text), **kwargs)

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return _InertConsole(file=file, stderr=stderr, width=None if tty else PIPED_WIDTH, emoji=False)
