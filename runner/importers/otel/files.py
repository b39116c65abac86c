"""Read telemetry files into spans and log records, whatever document shape the exporter wrote.

Accepted shapes (one file may hold one document, or one JSON value per line):

- OTLP/JSON: ``{"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}],
  "resourceLogs": [{"resource", "scopeLogs": [{"scope", "logRecords": [...]}]}]}``, also in
  the older spelling ``batches`` / ``instrumentationLibrarySpans`` / ``instrumentationLibraryLogs``
  and protobuf's snake_case (``resource_spans`` ...), and wrapped as ``{"trace": {...}}``;
- Jaeger JSON exports: ``{"data": [{"traceID", "spans": [{"spanID", "operationName",
  "references", "startTime" (µs), "duration" (µs), "tags", "logs"}], "processes"}]}``;
- span objects (OTLP-shaped, Jaeger-shaped, or the Python SDK's ``to_json``: ``context``,
  ``parent_id``, ISO times, plain ``attributes``), as a JSON list or one per line (JSONL);
- JSONL whose lines are whole OTLP documents (the OpenTelemetry Collector's file exporter).

Memory: JSONL is read line by line (each line at most `MAX_LINE_BYTES`); a file that is one
JSON document (several lines, or one line) is parsed whole and may be at most
`MAX_DOCUMENT_BYTES`. Only the attributes a convention reads (`KEEP_PREFIXES`) are kept.

Errors: unreadable or invalid JSON (truncated files included) is an `InputError` naming file
and line; a span without ids is skipped with a warning naming file and place.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from runner.errors import InputError
from runner.importers.otel.explain import Explain
from runner.importers.otel.shapes import (
    LogRecord,
    Notes,
    Origin,
    Span,
    jaeger_span,
    log_record,
    otlp_span,
    pick,
)
from runner.importers.otel.values import as_dict, attributes
from runner.importers.source import load_json
from runner.inputfile import open_input, read_input
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_LINE_BYTES", "Item", "read_file"]

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024
_RESOURCE_KEYS = ("resourceSpans", "resource_spans", "batches")
_SCOPE_KEYS = (
    "scopeSpans",
    "scope_spans",
    "instrumentationLibrarySpans",
    "instrumentation_library_spans",
)
_LOG_RESOURCE_KEYS = ("resourceLogs", "resource_logs")
_LOG_SCOPE_KEYS = (
    "scopeLogs",
    "scope_logs",
    "instrumentationLibraryLogs",
    "instrumentation_library_logs",
)

Item = Span | LogRecord


_EXPORT_KEYS = frozenset(
    {*_RESOURCE_KEYS, *_LOG_RESOURCE_KEYS, "data", "spans", "spanId", "span_id", "spanID"}
)
MAX_WRAPPER_DEPTH = 6
MAX_WRAPPER_NODES = 10_000


def _holds_export(value: Any, depth: int) -> bool:
    """Whether ``value`` (a wrapper's field) holds an export within `MAX_WRAPPER_DEPTH`.

    Breadth first over at most `MAX_WRAPPER_NODES` values: a hostile wrapper of nested lists
    cannot make the search long.
    """
    frontier: list[Any] = [value]
    seen = 0
    for _ in range(depth, MAX_WRAPPER_DEPTH):
        following: list[Any] = []
        for item in frontier:
            seen += 1
            if seen > MAX_WRAPPER_NODES:
                return False
            if isinstance(item, dict):
                if _EXPORT_KEYS.intersection(item) or isinstance(item.get("trace"), dict):
                    return True
                following.extend(list(item.values())[:64])
            elif isinstance(item, list):
                following.extend(item[:64])
        if not following:
            return False
        frontier = following
    return False


def _items(value: Any) -> list[Any]:
    """``value`` when it is a list, else no items.

    ``"spans": 7`` holds no span; the file's "no agent session" error says what was found.
    """
    return value if isinstance(value, list) else []


def _document(doc: Any, file: str, prefix: str, notes: Notes, depth: int = 0) -> Iterator[Item]:
    """Every span and log record of one JSON value (document, span object, list, wrapper)."""
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _document(item, file, f"{prefix}[{i}]", notes, depth)
        return
    if not isinstance(doc, dict):
        notes.add(f"{file}: {prefix or 'document'}: not an object: skipped")
        return
    if isinstance(doc.get("trace"), dict):
        doc = doc["trace"]
    known = False
    for rkey in _RESOURCE_KEYS:
        for i, res in enumerate(_items(doc.get(rkey))):
            known = True
            service = _service(res)
            for skey in _SCOPE_KEYS:
                for j, scope in enumerate(_items(res.get(skey) if isinstance(res, dict) else [])):
                    spans = scope.get("spans") if isinstance(scope, dict) else None
                    origin = Origin(_scope_name(scope), service)
                    for k, obj in enumerate(_items(spans)):
                        where = f"{prefix}{rkey}[{i}].{skey}[{j}].spans[{k}]"
                        if isinstance(obj, dict):
                            span = otlp_span(obj, file, where, notes, origin)
                            if span is not None:
                                yield span
    for rkey in _LOG_RESOURCE_KEYS:
        for i, res in enumerate(_items(doc.get(rkey))):
            known = True
            for skey in _LOG_SCOPE_KEYS:
                for j, scope in enumerate(_items(res.get(skey) if isinstance(res, dict) else [])):
                    records = pick(scope, "logRecords", "log_records", "logs") or []
                    for k, obj in enumerate(records if isinstance(records, list) else []):
                        if isinstance(obj, dict):
                            yield log_record(
                                obj, file, f"{prefix}{rkey}[{i}].{skey}[{j}].logRecords[{k}]"
                            )
    if isinstance(doc.get("data"), list):  # Jaeger
        known = True
        for i, trace in enumerate(doc["data"]):
            trace = as_dict(trace)
            processes = as_dict(trace.get("processes"))
            for k, obj in enumerate(trace.get("spans") or []):
                if isinstance(obj, dict):
                    process = as_dict(processes.get(str(obj.get("processID"))))
                    name = process.get("serviceName")
                    span = jaeger_span(
                        obj,
                        file,
                        f"{prefix}data[{i}].spans[{k}]",
                        notes,
                        name if isinstance(name, str) else "",
                    )
                    if span is not None:
                        yield span
    if known:
        return
    if "spanID" in doc:
        span = jaeger_span(doc, file, prefix or "span", notes)
    elif any(k in doc for k in ("spanId", "span_id", "context")):
        span = otlp_span(doc, file, prefix or "span", notes)
    elif isinstance(doc.get("spans"), list):
        yield from _document(doc["spans"], file, f"{prefix}spans", notes, depth)
        return
    elif any(k in doc for k in ("body", "eventName", "severityNumber")):
        yield log_record(doc, file, prefix or "log record")
        return
    else:
        wrapped = [k for k, v in doc.items() if _holds_export(v, depth)]
        if not wrapped:
            notes.add(f"{file}: {prefix or 'document'}: neither spans, log records nor an export")
            return
        # a capture tool's wrapper (oteltest's ``trace_requests[].pbreq``, a backend's
        # response envelope): the exports inside it, wherever they are
        for key in wrapped:
            yield from _document(doc[key], file, f"{prefix}{key}.", notes, depth + 1)
        return
    if span is not None:
        yield span


def _service(resource: Any) -> str:
    attrs = attributes(as_dict(as_dict(resource).get("resource")).get("attributes"))
    name = attrs.get("service.name")
    return name if isinstance(name, str) else ""


def _scope_name(scope: Any) -> str:
    inner = as_dict(scope)
    for key in ("scope", "instrumentationLibrary", "instrumentation_library"):
        name = as_dict(inner.get(key)).get("name")
        if isinstance(name, str):
            return name
    return ""


def read_file(path: Path, notes: Notes, explain: Explain | None = None) -> Iterator[Item]:
    """Every span and log record of ``path``, streamed when the file is JSONL.

    Each is counted in ``explain`` (by span family and role, or event name) when given.

    Raises:
        InputError: unreadable, not UTF-8, invalid or truncated JSON, a line or document over
            its size limit (file and line named).
    """
    for item in _read_file(path, notes):
        if explain is not None:
            if isinstance(item, Span):
                explain.span(item)
            else:
                explain.log(item)
        yield item


def _read_file(path: Path, notes: Notes) -> Iterator[Item]:
    name = str(path)
    # the one bounded reader: a regular file only (a FIFO or device is refused, not read)
    with open_input(path, "import source") as handle:
        first: bytes | None = None
        number = 0
        for raw in _lines(handle):
            number += 1
            if raw.strip():
                first = raw
                break
        if first is None:
            raise InputError("empty file: no spans", file=name)
        value = _try_line(first, name, number)
        if value is None:  # not one JSON value per line: the whole file is one document
            yield from _whole(path, notes)
            return
        yield from _document(value, name, _line_prefix(number), notes)
        for raw in _lines(handle):
            number += 1
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InputError(f"line longer than {MAX_LINE_BYTES} bytes", file=name, line=number)
            text = _decode(raw, name, number)
            try:
                value = load_json(text, file=name, line=number)
            except ValueError as exc:
                raise InputError(
                    f"invalid JSON (truncated?): {exc}", file=name, line=number
                ) from None
            yield from _document(value, name, _line_prefix(number), notes)


def _lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of ``handle``, each read with at most ``MAX_LINE_BYTES + 1`` bytes buffered.

    A line longer than that comes back as its first ``MAX_LINE_BYTES + 1`` bytes, without its
    newline (the caller refuses it, or reads the file whole); the rest of it is never buffered.
    """
    while True:
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        yield raw


def _line_prefix(number: int) -> str:
    return f"line {number}: "


def _decode(raw: bytes, name: str, number: int | None) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=name, line=number) from None


def _try_line(raw: bytes, name: str, number: int) -> Any:
    if len(raw) > MAX_LINE_BYTES:
        return None
    try:
        return strict_loads(_decode(raw, name, number))
    except ValueError:  # StrictJSONError included
        return None


def _whole(path: Path, notes: Notes) -> Iterator[Item]:
    name = str(path)
    size = path.stat().st_size
    if size > MAX_DOCUMENT_BYTES:
        raise InputError(
            f"one JSON document of {size} bytes; at most {MAX_DOCUMENT_BYTES} are read whole "
            "(export as JSONL, one document or span per line, to stream larger files)",
            file=name,
        )
    text = _decode(read_input(path, "import source"), name, None)
    try:
        doc = load_json(text, file=name)
    except StrictJSONError as exc:
        what = "invalid JSON (truncated?)" if exc.kind == "syntax" else "not strict JSON"
        raise InputError(f"{what}: {exc.detail}", file=name, line=exc.line) from None
    yield from _document(doc, name, "", notes)
