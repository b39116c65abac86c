r"""Text from sandboxes and traces made safe to print on a terminal: the one inert-text rule.

What a command prints often quotes hostile input: a tool's output or error message, a model id,
a host name that tool code tried to resolve, its stderr, a recorded trace's arguments, an
imported file's tool names. Printed raw, an escape sequence in it can clear, recolour, retitle
(OSC) or rewrite the user's terminal; a C1 control (``\x9b`` is CSI on many terminals) does the
same without an ESC; a bidi override or isolate (U+202A-U+202E, U+2066-U+2069) or a zero-width
character makes text read differently from what it is; a lone surrogate (a string decoded with
``surrogateescape``) makes the write itself fail with a traceback.

`inert` is the one function every printed field goes through: plain lines
via `echo` (human-readable ones via `say`, which also wraps them at spaces to a terminal's
width: `wrap_lines`; here, not in ``console``, so that ``check`` never imports rich), tables
via `runner.cli.render.console.table_console` (whose consoles apply it to every string they
render, markup included), logs via `runner.cli.log`, JSON via ``ensure_ascii``.

Invariant: `inert` returns text with no C0 control other than newline and tab, no DEL, no C1
control, no Unicode format character (category Cf: bidi controls, zero-width characters, the
BOM, soft hyphen, tag characters, ...), no line or paragraph separator (Zl, Zp) and no lone
surrogate; each such character is shown as ``\xNN`` (below U+0100) or ``\uNNNN``/``\UNNNNNNNN``,
so nothing is hidden either. It does not touch ``[``: markup is escaped where markup is parsed
(`markup`), never by changing the text.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TextIO

import typer

# Cc except \t \n; Cf (Unicode 15); Zl, Zp; Cs. tests/unit/cli/test_inert_text.py checks this
# class against unicodedata for every code point, so an omission cannot go unnoticed.
_UNSAFE = re.compile(
    "["
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (but \t \n), DEL, C1
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff"  # lone surrogates
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def inert(text: object) -> str:
    r"""``text`` (made a string) with every unsafe character shown as an escape.

    Args:
        text: anything; non-strings are printed as ``str(text)``.

    Returns:
        The text with C0 controls (but newline and tab), DEL, C1 controls, format characters
        (bidi, zero-width), line/paragraph separators and lone surrogates written as
        ``\xNN``/``\uNNNN``/``\UNNNNNNNN``; everything else as it is.
    """
    value = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escaped, value)


def one_line(text: object) -> str:
    r"""`inert` ``text`` that also cannot break a line: newline and tab shown as ``\n``/``\t``.

    For a line that quotes hostile fields (a tool or step name in a ``check`` problem): the
    reader sees one line per problem whatever a name holds.
    """
    return inert(text).replace("\n", "\\n").replace("\t", "\\t")


def markup(text: object) -> str:
    """`inert` text escaped for rich markup: data shown as it is, never as styles or links."""
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from rich.markup import escape

    return escape(inert(text))


def echo(text: object, *, err: bool = False) -> None:
    """`typer.echo` of `inert` ``text`` (stdout, or stderr with ``err``)."""
    typer.echo(inert(text), err=err)


__all__ = [
    "echo",
    "inert",
    "line_width",
    "markup",
    "one_line",
    "say",
    "stdout_gone",
    "wrap_lines",
]


def stdout_gone() -> None:
    """Point stdout at /dev/null after its reader went away (``| head``).

    Later writes and the interpreter's final flush then neither fail nor print a traceback.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (tests): nothing to redirect
        pass


def say(text: object, *, err: bool = False) -> None:
    """`echo` of human-readable lines, wrapped at spaces to a terminal's width (`wrap_lines`).

    Piped or redirected: the lines as they are (one line per fact, for scripts). Never for
    JSON (a wrapped string would no longer be the same JSON).
    """
    stream = sys.stderr if err else sys.stdout
    lines = inert(text).split("\n")
    echo("\n".join(wrap_lines(lines, line_width(stream))), err=err)


def line_width(stream: TextIO) -> int | None:
    """The columns plain lines are wrapped to on ``stream``: the terminal's; None when piped.

    Piped or redirected output is not wrapped: a script or ``grep`` reads one line per fact.
    """
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return shutil.get_terminal_size().columns if tty else None


def wrap_lines(lines: Sequence[str], width: int | None) -> list[str]:
    """``lines`` wrapped at spaces to ``width`` columns, each continuation indented by 4 more.

    A line's leading spaces are its level (the plan's ``  variant ...`` under ``plan ...``);
    its continuation lines start 4 columns further in, so a wrapped line reads as one. Words
    are never broken (an id or a path longer than the width stays whole on its own line).

    Args:
        lines: lines without newlines.
        width: the columns available (at least 20 are used); None: ``lines`` as they are.

    Returns:
        The wrapped lines, in order (an empty line stays one empty line).
    """
    if width is None:
        return list(lines)
    out: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(
            textwrap.wrap(
                line,
                width=max(width, 20),
                initial_indent="",
                subsequent_indent=indent + "    ",
                break_long_words=False,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [""]
        )
    return out
