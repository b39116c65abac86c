"""The spans and log records of telemetry, and how one exported span object reads.

`Span`, `Event` and `LogRecord` are what the importer works on, whatever the exporter wrote:
`otlp_span` reads an OTLP-shaped span object (also the Python SDK's ``to_json``: ``context``,
``parent_id``, ISO times, plain ``attributes``), `jaeger_span` a Jaeger one (``spanID``,
``operationName``, ``references``, ``startTime`` and ``duration`` in µs, ``tags``, ``logs``),
`log_record` an OTLP log record. Each span is classified when it is read
(`runner.importers.otel.conventions.classify`: family and role, from its name, attributes,
instrumentation scope, service and kind); then only the attributes a convention reads
(`KEEP_PREFIXES`, `KEEP_KEYS`) are kept. A span without ids is skipped with a warning naming
file and place (`Notes`). The documents and files these come from are read by
`runner.importers.otel.files`, which counts what it read per family
(`runner.importers.otel.explain`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.domain.words import counted
from runner.importers.otel.conventions import SpanView, classify
from runner.importers.otel.values import any_value, as_dict, attributes, norm_id, time_ns

__all__ = [
    "KEEP_KEYS",
    "KEEP_PREFIXES",
    "Event",
    "LogRecord",
    "Notes",
    "Origin",
    "Span",
    "jaeger_span",
    "log_record",
    "otlp_span",
    "pick",
]

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
    "traceloop.",
    "langsmith.",
    "anthropic.",
    "claude_code.",
    "pydantic_ai.",
)
KEEP_KEYS = frozenset(
    {
        # pydantic-ai (before its GenAI names), Claude Code (flat names), any-agent's output
        "tool_arguments",
        "tool_response",
        "events",
        "agent_name",
        "final_result",
        "user_prompt",
        "prompt",
        "tool_name",
        "tool_input",
        "tool_output",
        "tool_use_id",
        "success",
        "error",
        "model",
        "input_tokens",
        "output_tokens",
        "response.model_output",
        "model_output",
        "query_source",
        "agent_id",
        "parent_agent_id",
    }
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
        more = [f"... and {counted(self.dropped, 'more warning')}"] if self.dropped else []
        return [*self.items, *more]


@dataclass(slots=True)
class Event:
    """A span event or a log record's content: name, time and decoded attributes/body."""

    name: str
    time_ns: int | None
    attrs: dict[str, Any]
    body: Any = None


@dataclass(frozen=True)
class Origin:
    """Where spans come from: the instrumentation scope's name and the resource's service."""

    scope: str = ""
    service: str = ""


@dataclass(slots=True)
class Span:
    """One span, decoded. ``where`` locates it in ``file`` (line, or path in the document).

    ``family`` and ``role`` are its classification (`runner.importers.otel.conventions`);
    ``reason`` says why a span of role ``ignore`` is ignored.
    """

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
    family: str = ""
    role: str = "ignore"
    reason: str = ""
    scope: str = ""
    kind: str = ""


@dataclass(slots=True)
class LogRecord:
    """One log record (an event carrying message content), tied to a span when it names one."""

    trace_id: str | None
    span_id: str | None
    event: Event
    file: str
    where: str


def pick(obj: dict[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` that ``obj`` has (spellings of one field), or None."""
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _keep(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k.startswith(KEEP_PREFIXES) or k in KEEP_KEYS}


_KINDS = {"1": "INTERNAL", "2": "SERVER", "3": "CLIENT", "4": "PRODUCER", "5": "CONSUMER"}


def _kind(value: Any) -> str:
    """``SERVER``, ``CLIENT``, ... from a number, ``SPAN_KIND_SERVER`` or ``server``."""
    text = str(value if value is not None else "").strip().upper()
    text = text.removeprefix("SPAN_KIND_").removeprefix("SPANKIND.")
    return _KINDS.get(text, text)


def _classified(span: Span, attrs: dict[str, Any], origin: Origin, scope: str, kind: str) -> Span:
    """Classify ``span`` on its full attributes, then keep only what a convention reads."""
    found = classify(SpanView(span.name, attrs, scope, origin.service, kind))
    span.family, span.role, span.reason = found.family, found.role, found.reason
    span.scope, span.kind = scope, kind
    span.attrs = _keep(attrs)
    return span


def _status(obj: dict[str, Any], attrs: dict[str, Any]) -> tuple[bool, str | None]:
    status = obj.get("status")
    error = False
    message = None
    if isinstance(status, dict):
        code = pick(status, "code", "status_code", "statusCode")
        error = code in (2, "2") or (isinstance(code, str) and code.upper().endswith("ERROR"))
        text = pick(status, "message", "description")
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
        stamp = pick(item, "timeUnixNano", "time_unix_nano", "timestamp")
        out.append(Event(str(item.get("name") or ""), time_ns(stamp), _keep(attrs)))
    return out


def otlp_span(
    obj: dict[str, Any], file: str, where: str, notes: Notes, origin: Origin = Origin()
) -> Span | None:
    """An OTLP-shaped span object at ``where`` of ``file``; None (noted) when it has no ids.

    Also the Python SDK's ``to_json`` and any-agent's dumps: ``context`` and ``parent``
    objects (``{"trace_id", "span_id"}``), ``kind`` as text, ``resource.attributes`` and
    ``instrumentation_scope`` inline.
    """
    context = as_dict(obj.get("context"))
    trace = norm_id(pick(obj, "traceId", "trace_id", "traceID") or context.get("trace_id"), 16)
    span = norm_id(pick(obj, "spanId", "span_id", "spanID") or context.get("span_id"), 8)
    if trace is None or span is None:
        notes.add(f"{file}: {where}: a span without trace id or span id: skipped")
        return None
    parent_raw = pick(obj, "parentSpanId", "parent_span_id", "parent_id", "parentId")
    if parent_raw is None and isinstance(obj.get("parent"), dict):
        parent_raw = obj["parent"].get("span_id")
    parent = norm_id(parent_raw, 8)
    start = time_ns(pick(obj, "startTimeUnixNano", "start_time_unix_nano", "start_time"))
    end = time_ns(pick(obj, "endTimeUnixNano", "end_time_unix_nano", "end_time"))
    attrs = attributes(obj.get("attributes"))
    error, message = _status(obj, attrs)
    scope = origin.scope or _inline_scope(obj)
    if not origin.service:
        resource = attributes(as_dict(obj.get("resource")).get("attributes"))
        service = resource.get("service.name")
        origin = Origin(origin.scope, service if isinstance(service, str) else "")
    result = Span(
        trace_id=trace,
        span_id=span,
        parent_id=parent,
        name=str(obj.get("name") or ""),
        start_ns=start,
        end_ns=end,
        attrs=attrs,
        events=_events(obj.get("events")),
        error=error,
        status_message=message,
        file=file,
        where=where,
    )
    return _classified(result, attrs, origin, scope, _kind(obj.get("kind")))


def _inline_scope(obj: dict[str, Any]) -> str:
    for key in ("instrumentation_scope", "instrumentationScope", "instrumentation_info"):
        value = obj.get(key)
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            return str(value["name"])
    return ""


def jaeger_span(
    obj: dict[str, Any], file: str, where: str, notes: Notes, service: str = ""
) -> Span | None:
    """A Jaeger span object at ``where`` of ``file``; None (noted) when it has no ids."""
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
    result = Span(
        trace_id=trace,
        span_id=span,
        parent_id=parent,
        name=str(obj.get("operationName") or ""),
        start_ns=start,
        end_ns=start + duration if start is not None and duration is not None else None,
        attrs=attrs,
        events=_events(obj.get("logs")),
        error=error,
        status_message=message,
        file=file,
        where=where,
    )
    scope = attrs.get("otel.scope.name", attrs.get("otel.library.name"))
    kind = attrs.get("span.kind")
    return _classified(
        result, attrs, Origin("", service), scope if isinstance(scope, str) else "", _kind(kind)
    )


def log_record(obj: dict[str, Any], file: str, where: str) -> LogRecord:
    """An OTLP log record object at ``where`` of ``file``."""
    attrs = attributes(obj.get("attributes"))
    name = (
        pick(obj, "eventName", "event_name")
        or attrs.get("event.name")
        or attrs.get("otel.event.name")
        or ""
    )
    stamp = pick(obj, "timeUnixNano", "time_unix_nano") or pick(
        obj, "observedTimeUnixNano", "observed_time_unix_nano"
    )
    return LogRecord(
        trace_id=norm_id(pick(obj, "traceId", "trace_id"), 16),
        span_id=norm_id(pick(obj, "spanId", "span_id"), 8),
        event=Event(str(name), time_ns(stamp), _keep(attrs), any_value(obj.get("body"))),
        file=file,
        where=where,
    )
