"""Consoles for the commands that print tables (submit, report, ledger, lint, jobs).

On a terminal rich uses the terminal's width. When stdout is piped or redirected rich would
assume 80 columns and wrap inside phrases and identifiers (``= 44`` / ``runs``, file names cut
in two); such output is read by tools and people alike, so it gets a wide console
(`PIPED_WIDTH` columns) instead.

On a narrow terminal (80 columns) a table never cuts a value (rich's default ends a cell that
does not fit with ``…``: a job id, a run id, an interval's upper bound were lost): every table
goes through `fold_cells`, whose columns wrap at spaces and fold a word longer than the column
(an id) onto the next line. Rich's own shrinking ignores words (it narrows the widest columns,
then all evenly: ``succeede`` / ``d`` at 80 columns while a phrase beside it had room to wrap):
a folded table takes columns back from cells that can wrap at a space for the cells whose
longest word would be cut, and only a word longer than any room left is split.

Plain lines that can be long (the plan, a job's header) are wrapped at spaces to a terminal's
width by `wrap_lines`, their continuation indented under the line's own text (piped: one line
each, for scripts).

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
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.table import Table

from runner.cli.render.terminal import inert, line_width, stdout_gone, wrap_lines

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.text import Text

__all__ = [
    "PIPED_WIDTH",
    "fold_cells",
    "line_width",
    "one_line_piped",
    "table_console",
    "words_whole",
    "wrap_lines",
]

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


def fold_cells(table: Table, *, whole: Collection[str] = ()) -> Table:
    """Make every column of ``table`` wrap, then fold, what does not fit; never cut it.

    A column wraps at spaces; a word wider than its column (an id, a path, ``25.00–30.63``)
    is folded onto the next line, whole characters kept. Columns made ``no_wrap`` are made
    wrappable: rich crops a ``no_wrap`` cell that does not fit whatever its overflow (rich
    13, measured at 40 columns), and a word is never wrapped inside anyway, so on a wide
    console an id still reads on one line.

    Args:
        table: the table (changed in place).
        whole: headers of columns kept on one line (``no_wrap``): the other columns wrap and
            fold first (rich shrinks a table's widest column first, folding an id before a
            phrase). The caller keeps them narrow enough for the console (else rich crops).

    Returns:
        ``table`` itself, for ``console.print(fold_cells(table))``.
    """
    for column in table.columns:
        column.overflow = "fold"
        column.no_wrap = column.header in whole
    # Rich has no option for word-aware shrinking; the subclass adds no state, only the width
    # rule, so the table's class is swapped rather than every table built through a factory.
    table.__class__ = _WordTable
    return table


class _WordTable(Table):
    """A rich table whose columns keep their longest word whole where others can wrap."""

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        widths = super()._calculate_column_widths(console, options)
        words = [self._measure_column(console, options, c).minimum for c in self.columns]
        fixed = [c.no_wrap or c.width is not None for c in self.columns]
        return words_whole(widths, words, fixed)


def words_whole(widths: Sequence[int], words: Sequence[int], fixed: Sequence[bool]) -> list[int]:
    """Column widths moved to the columns narrower than their longest word, where it can be.

    Args:
        widths: each column's width as rich shrank it (padding included).
        words: each column's narrowest width that cuts no word (its longest word + padding).
        fixed: columns that give nothing (``no_wrap`` or a set width).

    Returns:
        Widths with the same total: a column short of its longest word takes columns, one
        at a time, from the column with the most room above its own longest word; the
        shortest deficits first, so that as many columns as possible read whole. A column
        whose word is longer than all the room left keeps its width (that word is folded).
    """
    out = list(widths)
    pairs = enumerate(zip(out, words, strict=True))
    short = sorted((word - width, i) for i, (width, word) in pairs if word > width)
    for need, i in short:
        room = sum(max(0, out[j] - words[j]) for j in range(len(out)) if not fixed[j])
        if room < need:
            continue  # a token longer than the width: folded, the only split left
        for _ in range(need):
            donor = max(
                (j for j in range(len(out)) if j != i and not fixed[j] and out[j] > words[j]),
                key=lambda j: out[j] - words[j],
            )
            out[donor] -= 1
            out[i] += 1
    return out


def one_line_piped(console: Console) -> bool:
    """``soft_wrap`` for a long plain line on ``console``: True (one line) when piped.

    Piped, a line stays whole for ``grep``; on a terminal rich wraps it at spaces (a word
    longer than the width is folded), where an unwrapped line would be cut mid-word by the
    terminal itself at its edge (a new user read ``(policy sh`` / ``adow)`` at 80 columns).
    """
    return not console.is_terminal
