"""Tests only: write one set of spans in every file shape `import otel` reads.

A span is given as a plain dict ``{"trace", "span", "parent"?, "name", "start", "end",
"attrs", "events"?, "error"?}`` (ids as hex, times in ns, attribute values as Python values);
`render` writes it as an OTLP/JSON document (ids hex, base64 or decimal; numbers as JSON
numbers or strings; structured attributes typed or as JSON strings), the older ``batches``
shape, a Jaeger export, a list or JSONL of span objects (OTLP-shaped or the Python SDK's
``to_json`` shape), or JSONL of OTLP documents (the Collector's file exporter).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SHAPES = (
    "otlp",
    "otlp-base64",
    "otlp-decimal",
    "otlp-strings",
    "legacy-batches",
    "jaeger",
    "span-list",
    "span-jsonl",
    "sdk-jsonl",
    "collector-jsonl",
)


def _id(hexid: str, mode: str) -> Any:
    if mode == "base64":
        return base64.b64encode(bytes.fromhex(hexid)).decode()
    if mode == "decimal":
        return str(int(hexid, 16))
    return hexid


def any_value(
    value: Any, numbers_as_strings: bool = True, json_strings: bool = False
) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value) if numbers_as_strings else value}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | dict) and json_strings:
        return {"stringValue": json.dumps(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v, numbers_as_strings) for v in value]}}
    if isinstance(value, dict):
        return {
            "kvlistValue": {
                "values": [
                    {"key": k, "value": any_value(v, numbers_as_strings)} for k, v in value.items()
                ]
            }
        }
    return {"stringValue": str(value)}


def _kv(attrs: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v, **kw)} for k, v in attrs.items()]


def otlp_span(s: dict[str, Any], ids: str = "hex", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": _id(s["trace"], ids),
        "spanId": _id(s["span"], ids),
        "name": s["name"],
        "kind": 1,
        "startTimeUnixNano": str(s["start"]) if kw.get("numbers_as_strings", True) else s["start"],
        "endTimeUnixNano": str(s["end"]) if kw.get("numbers_as_strings", True) else s["end"],
        "attributes": _kv(s["attrs"], **kw),
        "events": [
            {
                "timeUnixNano": str(e["time"]),
                "name": e["name"],
                "attributes": _kv(e.get("attrs", {}), **kw),
            }
            for e in s.get("events", [])
        ],
        "status": {"code": 2, "message": s.get("message", "")} if s.get("error") else {},
    }
    if s.get("parent"):
        out["parentSpanId"] = _id(s["parent"], ids)
    return out


def otlp_log(record: dict[str, Any], ids: str = "hex") -> dict[str, Any]:
    out: dict[str, Any] = {
        "timeUnixNano": str(record["time"]),
        "eventName": record["name"],
        "body": any_value(record["body"]),
        "attributes": [],
        "traceId": _id(record["trace"], ids),
    }
    if record.get("span"):
        out["spanId"] = _id(record["span"], ids)
    return out


def _iso(ns: int) -> str:
    stamp = datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{(ns % 1_000_000_000) // 1000:06d}Z"


def sdk_span(s: dict[str, Any]) -> dict[str, Any]:
    """The Python SDK's ``ReadableSpan.to_json`` shape."""
    return {
        "name": s["name"],
        "context": {
            "trace_id": "0x" + s["trace"],
            "span_id": "0x" + s["span"],
            "trace_state": "[]",
        },
        "kind": "SpanKind.INTERNAL",
        "parent_id": "0x" + s["parent"] if s.get("parent") else None,
        "start_time": _iso(s["start"]),
        "end_time": _iso(s["end"]),
        "status": {
            "status_code": "ERROR" if s.get("error") else "UNSET",
            "description": s.get("message"),
        },
        "attributes": {
            k: (json.dumps(v) if isinstance(v, dict | list) and not _flat_list(v) else v)
            for k, v in s["attrs"].items()
        },
        "events": [
            {"name": e["name"], "timestamp": _iso(e["time"]), "attributes": e.get("attrs", {})}
            for e in s.get("events", [])
        ],
        "links": [],
        "resource": {"attributes": {"service.name": "test"}, "schema_url": ""},
    }


def _flat_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str | int | float | bool) for v in value)


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, list | dict):
        return {"key": key, "type": "string", "value": json.dumps(value)}
    return {"key": key, "type": "string", "value": str(value)}


def jaeger_span(s: dict[str, Any]) -> dict[str, Any]:
    tags = [_tag(k, v) for k, v in s["attrs"].items()]
    if s.get("error"):
        tags += [_tag("otel.status_code", "ERROR"), _tag("error", True)]
        tags.append(_tag("otel.status_description", s.get("message", "")))
    return {
        "traceID": s["trace"],
        "spanID": s["span"],
        "operationName": s["name"],
        "references": (
            [{"refType": "CHILD_OF", "traceID": s["trace"], "spanID": s["parent"]}]
            if s.get("parent")
            else []
        ),
        "startTime": s["start"] // 1000,
        "duration": (s["end"] - s["start"]) // 1000,
        "tags": tags,
        "logs": [
            {
                "timestamp": e["time"] // 1000,
                "fields": [_tag("event", e["name"])]
                + [_tag(k, v) for k, v in e.get("attrs", {}).items()],
            }
            for e in s.get("events", [])
        ],
        "processID": "p1",
    }


def render(
    spans: list[dict[str, Any]], shape: str, path: Path, logs: list[dict[str, Any]] = ()
) -> Path:  # type: ignore[assignment]
    """Write ``spans`` (and log records, for the OTLP shapes) to ``path`` in ``shape``."""
    ids = {"otlp-base64": "base64", "otlp-decimal": "decimal"}.get(shape, "hex")
    strings = shape == "otlp-strings"
    kw = {"numbers_as_strings": shape != "otlp", "json_strings": strings}
    if shape.startswith("otlp"):
        doc: dict[str, Any] = {
            "resourceSpans": [
                {
                    "resource": {"attributes": _kv({"service.name": "test"})},
                    "scopeSpans": [
                        {"scope": {"name": "t"}, "spans": [otlp_span(s, ids, **kw) for s in spans]}
                    ],
                }
            ]
        }
        if logs:
            doc["resourceLogs"] = [
                {"scopeLogs": [{"logRecords": [otlp_log(r, ids) for r in logs]}]}
            ]
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    elif shape == "legacy-batches":
        doc = {
            "batches": [
                {
                    "resource": {"attributes": []},
                    "instrumentationLibrarySpans": [
                        {
                            "instrumentationLibrary": {"name": "t"},
                            "spans": [otlp_span(s, **kw) for s in spans],
                        }
                    ],
                }
            ]
        }
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    elif shape == "jaeger":
        traces: dict[str, list[dict[str, Any]]] = {}
        for s in spans:
            traces.setdefault(s["trace"], []).append(jaeger_span(s))
        doc = {
            "data": [
                {
                    "traceID": t,
                    "spans": ss,
                    "processes": {"p1": {"serviceName": "test", "tags": []}},
                }
                for t, ss in traces.items()
            ]
        }
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    elif shape == "span-list":
        path.write_text(json.dumps([otlp_span(s, **kw) for s in spans], indent=2), encoding="utf-8")
    elif shape == "span-jsonl":
        path.write_text(
            "".join(json.dumps(otlp_span(s, **kw)) + "\n" for s in spans), encoding="utf-8"
        )
    elif shape == "sdk-jsonl":
        path.write_text("".join(json.dumps(sdk_span(s)) + "\n" for s in spans), encoding="utf-8")
    elif shape == "collector-jsonl":
        lines = []
        for s in spans:
            doc = {
                "resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [otlp_span(s, **kw)]}]}]
            }
            lines.append(json.dumps(doc))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        raise ValueError(shape)
    return path
