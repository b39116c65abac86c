"""Tests only: a trace's lines as JSON objects, each request whole (references resolved).

Importers write a turn's history by reference (``messages_from``, docs/trace-format.md); tests
that look into requests read them as every reader of the project does, through
`runner.tracetools.reader.read_trace`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.tracetools.reader import read_trace


def resolved_lines(path: Path) -> list[dict[str, Any]]:
    """The run line, the call lines (requests whole) and the end line of the trace at ``path``."""
    trace = read_trace(path)
    lines = [trace.run.to_json(), *(c.to_json() for c in trace.calls)]
    if trace.end is not None:
        lines.append(trace.end.to_json())
    return lines
