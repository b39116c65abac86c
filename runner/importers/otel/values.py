"""Decoding OpenTelemetry values as exporters spell them: AnyValue, ids, times, numbers, JSON text.

Exporters disagree on spelling, not on meaning. This module turns every spelling into one
Python value:

- attribute values: OTLP/JSON ``AnyValue`` (``{"stringValue": ...}``, ``intValue`` as a JSON
  number or a decimal string, ``doubleValue``, ``boolValue``, ``bytesValue`` (base64, kept as
  text), ``arrayValue.values``, ``kvlistValue.values``), the snake_case spelling of protobuf's
  JSON printer (``string_value`` ...), Jaeger tags (``{"key", "type", "value"}``) and plain
  JSON values (the Python SDK's ``to_json``);
- ids: lowercase hex, from hex (``0x`` prefix allowed), base64 (proto3's JSON mapping of
  ``bytes``) or decimal (Datadog-style uint64); all zeros or empty means "no id";
- times: integer nanoseconds since the epoch, from nanoseconds (number or string), Jaeger's
  microseconds, or ISO-8601 text;
- attributes that hold JSON as text (``gen_ai.input.messages`` written as a string) are parsed
  by `json_value`, never by ``eval``.

Invariant: a value that cannot be decoded is None (the caller names span, file and field in a
warning); nothing here raises on hostile input except `InputError` from `json_value` callers.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runner.trace.strictjson import loads as strict_loads

__all__ = [
    "any_value",
    "as_dict",
    "as_int",
    "as_list",
    "attributes",
    "json_value",
    "norm_id",
    "time_ns",
]

_HEX = re.compile(r"^[0-9a-fA-F]+\Z")
_B64 = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}\Z")
_ANY_KEYS = {
    "stringValue": "s",
    "string_value": "s",
    "intValue": "i",
    "int_value": "i",
    "doubleValue": "d",
    "double_value": "d",
    "boolValue": "b",
    "bool_value": "b",
    "bytesValue": "s",
    "bytes_value": "s",
    "arrayValue": "a",
    "array_value": "a",
    "kvlistValue": "k",
    "kvlist_value": "k",
}
MAX_DEPTH = 64
MAX_ID_CHARS = 64  # an id in no known encoding is kept as text, at most this long


def any_value(value: Any, depth: int = 0) -> Any:
    """Decode one OTLP ``AnyValue`` (or pass a plain JSON value through).

    Returns:
        str, int, float, bool, list, dict or None. An ``{}`` AnyValue (unset) is None.
    """
    if depth > MAX_DEPTH:
        return None
    if not isinstance(value, dict):
        return value
    if len(value) == 1 or (len(value) <= 2 and any(k in _ANY_KEYS for k in value)):
        for key, kind in _ANY_KEYS.items():
            if key in value:
                raw = value[key]
                if kind == "i":
                    return as_int(raw)
                if kind == "d":
                    return _as_float(raw)
                if kind == "b":
                    return raw if isinstance(raw, bool) else str(raw).lower() == "true"
                if kind == "a":
                    items = raw.get("values", []) if isinstance(raw, dict) else raw
                    return [any_value(v, depth + 1) for v in items or []]
                if kind == "k":
                    items = raw.get("values", []) if isinstance(raw, dict) else raw
                    return attributes(items, depth + 1)
                return raw
    if not value:
        return None
    return value


def attributes(raw: Any, depth: int = 0) -> dict[str, Any]:
    """Decode an attribute list (OTLP KeyValue list, Jaeger tags) or a plain object."""
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    out: dict[str, Any] = {}
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, dict) or "key" not in item:
            continue
        key = sys.intern(str(item["key"]))
        if "type" in item and "value" in item and not isinstance(item["value"], dict):
            out[key] = _jaeger_tag(item["type"], item["value"])
        else:
            out[key] = any_value(item.get("value"), depth)
    return out


def _jaeger_tag(kind: Any, value: Any) -> Any:
    kind = str(kind).lower()
    if kind in ("int64", "int"):
        return as_int(value)
    if kind in ("float64", "float", "double"):
        return _as_float(value)
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return value


def as_dict(value: Any, default: dict[str, Any] | None = None) -> dict[str, Any]:
    """``value`` when it is an object, else ``default`` (``{}`` when not given)."""
    if isinstance(value, dict):
        return value
    return default if default is not None else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An integer from a JSON number or a decimal string ("20", "20.0"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d{1,30}", text):
            return int(text)
        if re.fullmatch(r"[+-]?\d{1,30}\.0*", text):
            return int(text.split(".")[0])
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def norm_id(value: Any, size: int) -> str | None:
    """A trace id (``size`` 16 bytes) or span id (8 bytes) as lowercase hex, or None.

    Accepts hex (with or without ``0x``), base64 of the raw bytes, or a decimal integer (also
    as a JSON number). Hex wins when a text is valid as both hex and decimal (the OTLP/JSON
    rule). All zeros and the empty string mean "no id". A value that is none of these is
    returned as given (stripped, at most `MAX_ID_CHARS` characters), so that it still
    identifies the span in messages (printed through `runner.cli.render.terminal.inert`).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _zero_none(format(value, "x").rjust(size * 2, "0"))
    text = str(value).strip()
    if not text:
        return None
    if text[:2].lower() == "0x" and _HEX.match(text[2:]):
        return _zero_none(text[2:].lower().rjust(size * 2, "0"))
    if _HEX.match(text) and len(text) in (16, 32):
        return _zero_none(text.lower())
    if _B64.match(text) and not text.isdigit():
        try:
            raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=False)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) in (8, 16):
            return _zero_none(raw.hex())
    if text.isdigit() and len(text) <= 40:
        return _zero_none(format(int(text), "x").rjust(size * 2, "0"))
    if _HEX.match(text) and len(text) <= size * 2:
        return _zero_none(text.lower().rjust(size * 2, "0"))
    return text[:MAX_ID_CHARS]


def _zero_none(hexid: str) -> str | None:
    return None if not hexid.strip("0") else hexid


def time_ns(value: Any, unit: str = "ns") -> int | None:
    """Epoch nanoseconds from a number or decimal string in ``unit`` (ns, us), or ISO-8601."""
    number = as_int(value)
    if number is None and isinstance(value, float):
        number = int(value)
    if number is not None:
        return number * 1000 if unit == "us" else number
    if isinstance(value, str) and value.strip():
        text = value.strip().replace("Z", "+00:00")
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            return None
        return int(stamp.timestamp()) * 1_000_000_000 + stamp.microsecond * 1000
    return None


def json_value(value: Any) -> tuple[bool, Any]:
    """``(ok, value)``: a structured value as is, a JSON text parsed (``ok`` False if not JSON).

    Nesting deeper than the interpreter can parse is not JSON here (``ok`` False), never a
    traceback.
    """
    if not isinstance(value, str):
        return True, value
    text = value.strip()
    if not text or text[0] not in '[{"0123456789-tfn':
        return False, value
    try:
        return True, strict_loads(text)  # the one strict decoder: depth, NaN, duplicate keys
    except ValueError:
        return False, value
