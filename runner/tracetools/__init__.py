"""Host-side trace tools: the reader with limits, ``lint`` and ``tasks extract``.

Every trace read on the host goes through `read_trace` / `read_trace_stream` (bounded lines,
strict decoding, each record validated into the pydantic models of ``records``; problems name
file, line and field). ``lint`` judges the five seed fields; ``tasks_extract`` turns recorded
runs into tasks.

May import: `runner.domain`, `runner.trace`, `runner.sdk`, `runner.errors` and third-party
libraries (pydantic); never the packages above it (episode, providers, submit, cli, ...).
"""

from runner.tracetools.lint import TraceLint, lint_trace, lint_traces
from runner.tracetools.reader import (
    MAX_LINE_BYTES,
    CallRecord,
    EndRecord,
    RunRecord,
    Trace,
    TraceProblem,
    TraceVersionError,
    load_trace,
    read_trace,
    read_trace_stream,
)
from runner.tracetools.tasks_extract import Extraction, extract_tasks

__all__ = [
    "MAX_LINE_BYTES",
    "CallRecord",
    "EndRecord",
    "Extraction",
    "RunRecord",
    "Trace",
    "TraceLint",
    "TraceProblem",
    "TraceVersionError",
    "extract_tasks",
    "lint_trace",
    "lint_traces",
    "load_trace",
    "read_trace",
    "read_trace_stream",
]
