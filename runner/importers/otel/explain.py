"""What an import read and ignored, by file and span family: ``import --explain``.

`Explain` is filled while files are read (`runner.importers.otel.files.read_file`: each span
by family and role, each log record by event name) and while sessions are built (what was
decided later: wrappers merged into the call around them, tool spans that were no new call).
Its JSON form is ``import-report.json``'s ``explain``; the CLI prints it with ``--explain``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from runner.importers.otel.shapes import LogRecord, Span

__all__ = ["READ_EVENTS", "Explain"]

READ_EVENTS = frozenset(
    {
        "gen_ai.client.inference.operation.details",
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
        "exception",
        "tool.output",
    }
)
"""Span event and log record names a convention reads (the rest are counted as ignored)."""


class Explain:
    """What each file held, counted by span family and role: ``import --explain``.

    Per file: spans read (family and role), spans ignored (family, with the reason), log
    records by event name (read or ignored). Unknown families are named, never silently
    skipped. `as_dict` is the JSON form written into ``import-report.json``.
    """

    def __init__(self) -> None:
        self.read: dict[str, Counter[str]] = defaultdict(Counter)
        self.ignored: dict[str, Counter[str]] = defaultdict(Counter)
        self.reasons: dict[str, str] = {}
        self.logs: dict[str, Counter[str]] = defaultdict(Counter)
        self.later: dict[str, Counter[str]] = defaultdict(Counter)

    def span(self, span: Span) -> None:
        """Count a span of its file."""
        if span.role == "ignore":
            self.ignored[span.file][span.family] += 1
            self.reasons.setdefault(span.family, span.reason)
        else:
            self.read[span.file][f"{span.family} {span.role}"] += 1

    def log(self, record: LogRecord) -> None:
        """Count a log record of its file by event name."""
        name = record.event.name or "(no event name)"
        state = "read" if name in READ_EVENTS else "ignored"
        self.logs[record.file][f"{name} ({state})"] += 1

    def note(self, file: str, what: str, count: int = 1) -> None:
        """Count something decided after reading (a wrapper merged, a span not a call)."""
        self.later[file][what] += count

    def as_dict(self) -> dict[str, Any]:
        """``{file: {"read", "ignored": {family: {count, why}}, "log_records", "decided"}}``."""
        files = sorted({*self.read, *self.ignored, *self.logs, *self.later})
        return {
            f: {
                "read": dict(sorted(self.read[f].items())),
                "ignored": {
                    family: {"count": n, "why": self.reasons.get(family, "")}
                    for family, n in sorted(self.ignored[f].items())
                },
                "log_records": dict(sorted(self.logs[f].items())),
                "decided": dict(sorted(self.later[f].items())),
            }
            for f in files
        }
