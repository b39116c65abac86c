"""The span tree of a set of spans: index, parent links, log records attached to spans.

- Spans are keyed by (trace id, span id); a second span with the same key is a warning (the
  first is kept).
- A parent that was never exported, a trace without a root and a cycle in parent links are
  warnings naming span, trace and file; the span whose parent is missing (for a cycle: the
  earliest span of the cycle) becomes a root. Children are ordered by start time, then file
  order.
- Log records attach to the span they name; one naming no span attaches to the one model span
  (of its trace, when it names one) that was open at its time, and only when exactly one was:
  with several open at once the record is ambiguous, a warning, never guessed.

Iterative throughout: a trace of 100,000 spans needs no recursion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from runner.importers.otel.shapes import LogRecord, Notes, Span

__all__ = ["Key", "attach_logs", "index_spans", "span_tree", "where"]

Key = tuple[str, str]


def where(span: Span) -> str:
    """Where a span is, for warnings: file, place in it, span id and trace."""
    return f"{span.file}: {span.where}: span {span.span_id} (trace {span.trace_id})"


def index_spans(
    items: Iterable[Span | LogRecord], notes: Notes
) -> tuple[dict[Key, Span], list[LogRecord]]:
    """Spans by (trace, span id), numbered in file order, and the log records apart.

    A second span with a key already seen is a warning; the first is kept.
    """
    spans: dict[Key, Span] = {}
    logs: list[LogRecord] = []
    order = 0
    for item in items:
        if isinstance(item, LogRecord):
            logs.append(item)
            continue
        key = (item.trace_id, item.span_id)
        if key in spans:
            notes.add(f"{where(item)}: duplicate span id (first at {spans[key].where}): ignored")
            continue
        item.order = order
        order += 1
        spans[key] = item
    return spans, logs


def attach_logs(spans: dict[Key, Span], logs: list[LogRecord], notes: Notes) -> None:
    """Attach each log record to its span (see the module docstring); warn about the rest."""
    by_trace: dict[str, list[Span]] = defaultdict(list)
    all_models: list[Span] = []
    indexed = False
    for log in logs:
        if log.trace_id is not None and log.span_id is not None:
            span = spans.get((log.trace_id, log.span_id))
            if span is not None:
                span.logs.append(log.event)
                continue
            notes.add(
                f"{log.file}: {log.where}: log record names span {log.span_id} (trace "
                f"{log.trace_id}), which was never exported: ignored"
            )
            continue
        if not indexed:
            indexed = True
            for span in spans.values():
                if span.role == "model":
                    by_trace[span.trace_id].append(span)
                    all_models.append(span)
        pool = by_trace.get(log.trace_id, []) if log.trace_id else all_models
        stamp = log.event.time_ns
        candidates = [
            s
            for s in pool
            if s.start_ns is not None
            and s.end_ns is not None
            and stamp is not None
            and s.start_ns <= stamp <= s.end_ns
        ]
        if len(candidates) == 1:
            candidates[0].logs.append(log.event)
        elif candidates:
            notes.add(
                f"{log.file}: {log.where}: log record names no span and {len(candidates)} model "
                "spans were open at its time: ambiguous, ignored"
            )
        else:
            notes.add(f"{log.file}: {log.where}: log record tied to no span: ignored")


def span_tree(spans: dict[Key, Span], notes: Notes) -> tuple[list[Span], dict[Key, list[Span]]]:
    """``(roots, children by parent key)``, both in start order; broken links become roots."""
    children: dict[Key, list[Span]] = defaultdict(list)
    missing: dict[Key, list[Span]] = defaultdict(list)
    rooted = {s.trace_id for s in spans.values() if s.parent_id is None}
    for span in spans.values():
        if span.parent_id is not None and (span.trace_id, span.parent_id) not in spans:
            missing[(span.trace_id, span.parent_id)].append(span)
            span.parent_id = None
    for (_, parent_id), orphans in missing.items():
        notes.add(
            f"{where(orphans[0])}: parent span {parent_id} was never exported"
            + (f" ({len(orphans)} spans name it)" if len(orphans) > 1 else "")
            + ": treated as a root"
        )
    for trace in sorted({trace for trace, _ in missing} - rooted):
        notes.add(f"trace {trace}: its root span was never exported (spans above kept as roots)")
    _break_cycles(spans, notes)
    roots: list[Span] = []
    for span in spans.values():
        if span.parent_id is None:
            roots.append(span)
        else:
            children[(span.trace_id, span.parent_id)].append(span)
    for kids in children.values():
        kids.sort(key=lambda s: (s.start_ns or 0, s.order))
    roots.sort(key=lambda s: (s.start_ns or 0, s.order))
    return roots, children


def _break_cycles(spans: dict[Key, Span], notes: Notes) -> None:
    state: dict[Key, int] = {}
    for start in list(spans):
        chain: list[Key] = []
        key: Key | None = start
        while key is not None and state.get(key, 0) == 0:
            state[key] = 1
            chain.append(key)
            span = spans[key]
            key = (span.trace_id, span.parent_id) if span.parent_id is not None else None
        if key is not None and state.get(key) == 1:  # back on the current chain: a cycle
            cycle = chain[chain.index(key) :]
            cut = min((spans[k] for k in cycle), key=lambda s: (s.start_ns or 0, s.order))
            notes.add(
                f"{where(cut)}: parent links form a cycle through spans "
                f"{', '.join(spans[k].span_id for k in cycle)}: cut above this span"
            )
            cut.parent_id = None
        for k in chain:
            state[k] = 2
