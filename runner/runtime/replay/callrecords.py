"""Helpers of call records: JSON bodies, tool ids, model response bodies, body comparison.

Standard library only, Python 3.9+. Pure functions used by `runner.runtime.replay.calls` (and the
agent loop); no state.
"""

import base64
import json
import re
from typing import Any, Dict, Optional

from runner.sdk import rawio
from runner.trace.format import decode_body
from runner.trace.strictjson import dumps_value
from runner.wire.errors import ModelCallError


def to_json_text(value: Any) -> str:
    """A tool's return value as the JSON text its call body holds (key order as returned).

    Raises:
        TypeError: the value is not JSON-serialisable.
        ValueError: it holds NaN or an infinity, or nests deeper than
            `runner.trace.strictjson.MAX_VALUE_DEPTH` (64): the call fails here, in the sandbox,
            rather than its value making a line the host's readers refuse.
    """
    return dumps_value(value)


_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")


def safe_tool_id(name: str) -> str:
    """``name`` when it is a valid tool id, else a sanitised form (invalid characters as ``_``)."""
    if len(name) <= 128 and _TOOL_ID.match(name):
        return name
    cleaned = ".".join(
        re.sub(r"[^A-Za-z0-9_-]", "_", part) or "_" for part in name[:128].split(".")
    )
    return cleaned or "unknown"


def raw_body(response: Dict[str, Any]) -> Optional[bytes]:
    """The raw body bytes of a ``model_response`` (base64 when ``body_encoding`` says so)."""
    body = response.get("body")
    if body is None:
        return None
    if response.get("body_encoding") == "base64":
        return base64.b64decode(str(body))
    return str(body).encode("utf-8", "surrogatepass")


def message_of(raw: Optional[bytes], role: str) -> Dict[str, Any]:
    """``choices[0].message`` of a chat completion body (its ``model`` kept as ``_model``).

    A bare choice object ``{"message": {...}, ...}`` (a source that kept only the choice, not
    the HTTP body) is accepted too; it carries no model id.

    Raises:
        ModelCallError: no body, not JSON, or no ``choices[0].message`` object.
    """
    if raw is None:
        raise ModelCallError("{} response has no body".format(role))
    try:
        completion = json.loads(raw.decode("utf-8"))
        if isinstance(completion, dict) and "choices" not in completion and "message" in completion:
            # a bare choice object (what τ² keeps as ``raw_data``): no envelope, no model id
            message = completion["message"]
            completion = {}
        else:
            message = completion["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelCallError(
            "{} response body is not a chat completion with choices[0].message: {}: {}".format(
                role, type(exc).__name__, exc
            )
        ) from exc
    if not isinstance(message, dict):
        raise ModelCallError("{} response choices[0].message is not an object".format(role))
    message = dict(message)
    model = completion.get("model") if isinstance(completion, dict) else None
    if isinstance(model, str):
        message["_model"] = model
    return message


def same_text(a: str, b: str) -> bool:
    """True when two JSON texts are equal as text or as parsed values."""
    if a == b:
        return True
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


def same_body(recorded: Dict[str, Any], record: Dict[str, Any]) -> bool:
    """True when a call record has the recorded result (raw I/O records: their tool-level value)."""
    if rawio.is_raw(recorded) or rawio.is_raw(record):
        mine = rawio.result_text(record) if rawio.is_raw(record) else record.get("body")
        theirs = rawio.result_text(recorded) if rawio.is_raw(recorded) else recorded.get("body")
        return mine is not None and theirs is not None and same_text(str(theirs), str(mine))
    if recorded.get("body") == record.get("body") and recorded.get(
        "body_encoding", "text"
    ) == record.get("body_encoding", "text"):
        return True
    try:
        return bool(json.loads(str(recorded.get("body"))) == json.loads(str(record.get("body"))))
    except ValueError:
        return False


def brief(record: Dict[str, Any]) -> str:
    """A short description of a record's result (its error, or its body) for messages."""
    if record.get("error"):
        return "error {}: {}".format(record["error"].get("class"), record["error"].get("message"))
    text = str(record.get("body"))
    return text if len(text) <= 120 else text[:120] + "..."


def body_text(record: Dict[str, Any]) -> Optional[str]:
    """A recording's text body verbatim, or None (no body, truncated, not UTF-8 text)."""
    if record.get("body") is None or record.get("truncated"):
        return None
    try:
        raw = decode_body(record)
    except ValueError:
        return None
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
