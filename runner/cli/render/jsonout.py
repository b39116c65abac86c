"""The ``--json`` output of every command: one JSON object (or list) on stdout.

ASCII only (``ensure_ascii``): a string quoted from a trace, a task or a sandbox reaches the
terminal as escapes, never as control characters; a value JSON cannot hold (a path, a
timestamp) is written as its string.
"""

from __future__ import annotations

import json
from typing import Any

from runner.cli.render.terminal import echo

__all__ = ["print_json"]


def print_json(data: Any, *, err: bool = False) -> None:
    """Print ``data`` as indented, ASCII-only JSON (on stderr when ``err``)."""
    echo(json.dumps(data, indent=2, ensure_ascii=True, default=str), err=err)
