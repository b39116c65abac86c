r"""Text from sandboxes and traces made safe to print on a terminal.

What a command prints often quotes hostile input: a tool's error message, a host name that tool
code tried to resolve, its stderr, a recorded trace's arguments. Printed raw, an escape sequence
in it can retitle, clear or rewrite the user's terminal, and a lone surrogate (a string decoded
with ``surrogateescape``) makes the write itself fail with a traceback.

Invariant: `inert` returns text with no C0 control character other than newline and tab, no
DEL, no C1 control and no lone surrogate; each such character is shown as ``\xNN`` (or
``\uNNNN``), so nothing is hidden either.
"""

from __future__ import annotations

import re

import typer

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    r"""``text`` with every control character and lone surrogate shown as ``\xNN``/``\uNNNN``.

    Newlines and tabs are kept; everything else prints as itself.
    """
    return _UNSAFE.sub(_escaped, text)


def echo(text: str, *, err: bool = False) -> None:
    """`typer.echo` of `inert` ``text``."""
    typer.echo(inert(text), err=err)


__all__ = ["echo", "inert"]
