"""Read telemetry files into spans and log records, whatever shape the exporter wrote.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.importers.otel.values import any_value, as_dict, attributes, norm_id, time_ns
from runner.importers.source import load_json
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads

__all__ = [
    "KEEP_PREFIXES",
    "MAX_DOCUMENT_BYTES",
    "MAX_LINE_BYTES",
    "Event",
    "LogRecord",
    "Notes",
    "Span",
    "read_file",
]

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024
KEEP_PREFIXES = (
    "gen_ai.",
    "llm.",
    "tool.",
    "tool_call.",
    "input.",
    "output.",
    "openinference.",
    "session.",
    "langfuse.session",
    "gcp.vertex.agent.",
    "error.",
    "exception.",
    "event.name",
    "agent.name",
    "otel.status",
    "content",
    "message",
    "index",
    "finish_reason",
    "id",
    "tool_calls",
    "role",
)
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


class Notes:
    """Warnings for the import report: the first `limit` kept, the rest counted."""

    def __init__(self, limit: int = 200) -> None:
        self.items: list[str] = []
        self.dropped = 0
        self.limit = limit

    def add(self, text: str) -> None:
        """Keep ``text`` (or count it once the limit is reached)."""
        if len(self.items) < self.limit:
            self.items.append(text)
        else:
            self.dropped += 1

    def all(self) -> list[str]:
        """The kept warnings, plus a line saying how many more there were."""
        more = [f"... and {self.dropped} more warnings"] if self.dropped else []
        return [*self.items, *more]


@dataclass(slots=True)
class Event:
    """A span event or a log record's content: name, time and decoded attributes/body."""

    name: str
    time_ns: int | None
    attrs: dict[str, Any]
    body: Any = None


@dataclass(slots=True)
class Span:
    """One span, decoded. ``where`` locates it in ``file`` (line, or path in the document)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int | None
    end_ns: int | None
    attrs: dict[str, Any]
    events: list[Event]
    error: bool
    status_message: str | None
    file: str
    where: str
    order: int = 0
    logs: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class LogRecord:
    """One log record (an event carrying message content), tied to a span when it names one."""

    trace_id: str | None
    span_id: str | None
    event: Event
    file: str
    where: str


def _pick(obj: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _keep(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k.startswith(KEEP_PREFIXES)}


def _status(obj: dict[str, Any], attrs: dict[str, Any]) -> tuple[bool, str | None]:
    status = obj.get("status")
    error = False
    message = None
    if isinstance(status, dict):
        code = _pick(status, "code", "status_code", "statusCode")
        error = code in (2, "2") or (isinstance(code, str) and code.upper().endswith("ERROR"))
        text = _pick(status, "message", "description")
        message = text if isinstance(text, str) and text else None
    tag = attrs.get("otel.status_code")
    if isinstance(tag, str) and tag.upper() == "ERROR":
        error = True
        text = attrs.get("otel.status_description")
        message = message or (text if isinstance(text, str) else None)
    if attrs.get("error") is True:
        error = True
    return error, message


def _events(raw: Any) -> list[Event]:
    out: list[Event] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        if "fields" in item:  # Jaeger log: {timestamp µs, fields: [tags]}
            attrs = attributes(item.get("fields"))
            name = attrs.pop("event", "") or ""
            out.append(Event(str(name), time_ns(item.get("timestamp"), "us"), _keep(attrs)))
            continue
        attrs = attributes(item.get("attributes"))
        stamp = _pick(item, "timeUnixNano", "time_unix_nano", "timestamp")
        out.append(Event(str(item.get("name") or ""), time_ns(stamp), _keep(attrs)))
    return out


def _otlp_span(obj: dict[str, Any], file: str, where: str, notes: Notes) -> Span | None:
    context = as_dict(obj.get("context"))
    trace = norm_id(_pick(obj, "traceId", "trace_id", "traceID") or context.get("trace_id"), 16)
    span = norm_id(_pick(obj, "spanId", "span_id", "spanID") or context.get("span_id"), 8)
    if trace is None or span is None:
        notes.add(f"{file}: {where}: a span without trace id or span id: skipped")
        return None
    parent = norm_id(_pick(obj, "parentSpanId", "parent_span_id", "parent_id", "parentId"), 8)
    start = time_ns(_pick(obj, "startTimeUnixNano", "start_time_unix_nano", "start_time"))
    end = time_ns(_pick(obj, "endTimeUnixNano", "end_time_unix_nano", "end_time"))
    attrs = attributes(obj.get("attributes"))
    error, message = _status(obj, attrs)
    return Span(
        trace_id=trace,
        span_id=span,
        parent_id=parent,
        name=str(obj.get("name") or ""),
        start_ns=start,
        end_ns=end,
        attrs=_keep(attrs),
        events=_events(obj.get("events")),
        error=error,
        status_message=message,
        file=file,
        where=where,
    )


def _jaeger_span(obj: dict[str, Any], file: str, where: str, notes: Notes) -> Span | None:
    trace = norm_id(obj.get("traceID"), 16)
    span = norm_id(obj.get("spanID"), 8)
    if trace is None or span is None:
        notes.add(f"{file}: {where}: a span without traceID or spanID: skipped")
        return None
    parent = None
    for ref in obj.get("references") or []:
        if isinstance(ref, dict) and str(ref.get("refType", "")).upper() == "CHILD_OF":
            parent = norm_id(ref.get("spanID"), 8)
            break
    if parent is None:
        parent = norm_id(obj.get("parentSpanID"), 8)
    start = time_ns(obj.get("startTime"), "us")
    duration = time_ns(obj.get("duration"), "us")
    attrs = attributes(obj.get("tags"))
    error, message = _status(obj, attrs)
    return Span(
        trace_id=trace,
        span_id=span,
        parent_id=parent,
        name=str(obj.get("operationName") or ""),
        start_ns=start,
        end_ns=start + duration if start is not None and duration is not None else None,
        attrs=_keep(attrs),
        events=_events(obj.get("logs")),
        error=error,
        status_message=message,
        file=file,
        where=where,
    )


def _log(obj: dict[str, Any], file: str, where: str) -> LogRecord:
    attrs = attributes(obj.get("attributes"))
    name = _pick(obj, "eventName", "event_name") or attrs.get("event.name") or ""
    stamp = _pick(obj, "timeUnixNano", "time_unix_nano") or _pick(
        obj, "observedTimeUnixNano", "observed_time_unix_nano"
    )
    return LogRecord(
        trace_id=norm_id(_pick(obj, "traceId", "trace_id"), 16),
        span_id=norm_id(_pick(obj, "spanId", "span_id"), 8),
        event=Event(str(name), time_ns(stamp), _keep(attrs), any_value(obj.get("body"))),
        file=file,
        where=where,
    )


Item = Span | LogRecord


def _document(doc: Any, file: str, prefix: str, notes: Notes) -> Iterator[Item]:
    """Every span and log record of one JSON value (document, span object or list)."""
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _document(item, file, f"{prefix}[{i}]", notes)
        return
    if not isinstance(doc, dict):
        notes.add(f"{file}: {prefix or 'document'}: not an object: skipped")
        return
    if isinstance(doc.get("trace"), dict):
        doc = doc["trace"]
    known = False
    for rkey in _RESOURCE_KEYS:
        for i, res in enumerate(doc.get(rkey) or []):
            known = True
            for skey in _SCOPE_KEYS:
                for j, scope in enumerate(res.get(skey) or [] if isinstance(res, dict) else []):
                    spans = scope.get("spans") if isinstance(scope, dict) else None
                    for k, obj in enumerate(spans or []):
                        where = f"{prefix}{rkey}[{i}].{skey}[{j}].spans[{k}]"
                        if isinstance(obj, dict):
                            span = _otlp_span(obj, file, where, notes)
                            if span is not None:
                                yield span
    for rkey in _LOG_RESOURCE_KEYS:
        for i, res in enumerate(doc.get(rkey) or []):
            known = True
            for skey in _LOG_SCOPE_KEYS:
                for j, scope in enumerate(res.get(skey) or [] if isinstance(res, dict) else []):
                    records = _pick(scope, "logRecords", "log_records", "logs") or []
                    for k, obj in enumerate(records if isinstance(records, list) else []):
                        if isinstance(obj, dict):
                            yield _log(
                                obj, file, f"{prefix}{rkey}[{i}].{skey}[{j}].logRecords[{k}]"
                            )
    if isinstance(doc.get("data"), list):  # Jaeger
        known = True
        for i, trace in enumerate(doc["data"]):
            for k, obj in enumerate(trace.get("spans") or [] if isinstance(trace, dict) else []):
                if isinstance(obj, dict):
                    span = _jaeger_span(obj, file, f"{prefix}data[{i}].spans[{k}]", notes)
                    if span is not None:
                        yield span
    if known:
        return
    if "spanID" in doc:
        span = _jaeger_span(doc, file, prefix or "span", notes)
    elif any(k in doc for k in ("spanId", "span_id", "context")):
        span = _otlp_span(doc, file, prefix or "span", notes)
    elif isinstance(doc.get("spans"), list):
        yield from _document(doc["spans"], file, f"{prefix}spans", notes)
        return
    elif any(k in doc for k in ("body", "eventName", "severityNumber")):
        yield _log(doc, file, prefix or "log record")
        return
    else:
        notes.add(f"{file}: {prefix or 'document'}: neither spans, log records nor an export")
        return
    if span is not None:
        yield span


def read_file(path: Path, notes: Notes) -> Iterator[Item]:
    """Every span and log record of ``path``, streamed when the file is JSONL.

    Raises:
        InputError: unreadable, not UTF-8, invalid or truncated JSON, a line or document over
            its size limit (file and line named).
    """
    name = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=name) from None
    with handle:
        first: bytes | None = None
        number = 0
        for raw in handle:
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
        for raw in handle:
            number += 1
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"line longer than {MAX_LINE_BYTES} bytes", file=name, line=number)
            text = _decode(raw, name, number)
            try:
                value = load_json(text, file=name, line=number)
            except ValueError as exc:
                raise InputError(
                    f"invalid JSON (truncated?): {exc}", file=name, line=number
                ) from None
            yield from _document(value, name, _line_prefix(number), notes)


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
    text = _decode(path.read_bytes(), name, None)
    try:
        doc = load_json(text, file=name)
    except StrictJSONError as exc:
        what = "invalid JSON (truncated?)" if exc.kind == "syntax" else "not strict JSON"
        raise InputError(f"{what}: {exc.detail}", file=name, line=exc.line) from None
    yield from _document(doc, name, "", notes)
