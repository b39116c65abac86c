"""What crosses the worker pipe: message types, a tool's result, an error, raw HTTP exchanges.

Standard library only, Python 3.9+. Both ends use `runner.runtime.channel.Channel` over a pair of
pipes (whole lines, strict decoding by `runner.wire.protocol.decode`, a bounded reader); this
module holds what the runtime accepts from the worker, checked field by field: anything else is
a `WorkerProtocolError`, which the runtime records as the call's (or step's) error and names in
the episode, never as a success.
"""

import base64
from typing import Any, Dict, List, Tuple

from runner.errors import CapabilityDenied, SandboxReplayError, ToolNotResolvable
from runner.wire.errors import RecordedError, UnrecordedCall, WorkflowError, error_record

__all__ = [
    "MAX_PIPE_BYTES",
    "WorkerGone",
    "WorkerProtocolError",
    "decode_exchanges",
    "encode_exchanges",
    "error_fields",
    "error_of",
    "result_of",
]

# One line on the pipe: a tool result of the size the host channel allows (its record is cut
# at `runner.trace.format.MAX_BODY_BYTES`), JSON-escaped once more, fits.
MAX_PIPE_BYTES = 64 * 1024 * 1024
MAX_EXCHANGES = 1000
MAX_TEXT_CHARS = 4096

# Error classes the runtime rebuilds as themselves: the episode's status reads them
# (denied, unresolvable, an unrecorded read); any other class is a `RecordedError` of that name.
_KNOWN = {
    "runner.errors.CapabilityDenied": CapabilityDenied,
    "runner.errors.ToolNotResolvable": ToolNotResolvable,
    "runner.wire.errors.WorkflowError": WorkflowError,
}


class WorkerProtocolError(SandboxReplayError):
    """The worker sent something the runtime does not accept (shape, type or size)."""


class WorkerGone(SandboxReplayError):
    """The worker exited, closed its pipe or stopped answering; nothing it said is believed."""


def error_fields(exc: BaseException) -> Dict[str, Any]:
    """``{class, message, tool_id?, args?}`` of an exception raised in the worker."""
    fields: Dict[str, Any] = dict(error_record(exc))
    if isinstance(exc, UnrecordedCall):
        fields["tool_id"] = exc.tool_id
        fields["args"] = exc.args
    else:
        tool_id = getattr(exc, "fields", {}).get("tool_id") if hasattr(exc, "fields") else None
        if isinstance(tool_id, str):
            fields["tool_id"] = tool_id
    return fields


def error_of(value: Any) -> BaseException:
    """The exception the runtime raises for an ``error`` object from the worker.

    Raises:
        WorkerProtocolError: ``value`` is not ``{class: str, message: str, ...}``.
    """
    if not isinstance(value, dict):
        raise WorkerProtocolError("the worker's error is not an object")
    cls, message = value.get("class"), value.get("message")
    if not isinstance(cls, str) or not isinstance(message, str):
        raise WorkerProtocolError("the worker's error needs string 'class' and 'message'")
    cls, message = cls[:MAX_TEXT_CHARS], message[:MAX_TEXT_CHARS]
    tool_id = value.get("tool_id") if isinstance(value.get("tool_id"), str) else None
    if cls == "runner.wire.errors.UnrecordedCall":
        return UnrecordedCall(message, tool_id=tool_id or "?", args=value.get("args"))
    known = _KNOWN.get(cls)
    if known is CapabilityDenied or known is ToolNotResolvable:
        return known(message, tool_id=tool_id)
    if known is not None:
        return known(message)
    return RecordedError(cls, message)


def encode_exchanges(exchanges: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The SDK helper's exchanges (`runner.sdk.rawio.capture`) with their bodies as base64."""
    out = []
    for entry in exchanges[:MAX_EXCHANGES]:
        item = {k: v for k, v in entry.items() if k != "body"}
        item["body"] = base64.b64encode(bytes(entry.get("body") or b"")).decode("ascii")
        out.append(item)
    return out


def decode_exchanges(value: Any) -> List[Dict[str, Any]]:
    """Exchanges from the worker, checked: method/url strings, an int status, base64 bodies.

    Raises:
        WorkerProtocolError: anything else.
    """
    if not isinstance(value, list) or len(value) > MAX_EXCHANGES:
        raise WorkerProtocolError("'exchanges' must be a list of at most {}".format(MAX_EXCHANGES))
    out = []
    for entry in value:
        if not isinstance(entry, dict):
            raise WorkerProtocolError("an exchange must be an object")
        method, url, status = entry.get("method"), entry.get("url"), entry.get("status")
        if not isinstance(method, str) or not isinstance(url, str):
            raise WorkerProtocolError("an exchange needs string 'method' and 'url'")
        if isinstance(status, bool) or not isinstance(status, int):
            raise WorkerProtocolError("an exchange needs an integer 'status'")
        try:
            body = base64.b64decode(str(entry.get("body") or ""), validate=True)
        except ValueError as exc:
            raise WorkerProtocolError("an exchange's body is not base64") from exc
        item: Dict[str, Any] = {"method": method, "url": url, "status": status, "body": body}
        for key in ("content_type", "content_encoding"):
            if isinstance(entry.get(key), str):
                item[key] = entry[key]
        out.append(item)
    return out


def result_of(message: Dict[str, Any]) -> Tuple[str, List[Dict[str, Any]]]:
    """``(text, exchanges)`` of a tool's or program's ``result`` (an error is raised instead).

    Raises:
        WorkerGone: the pipe closed before the answer.
        WorkerProtocolError: a malformed answer.
        Exception: the tool's own error (`error_of`).
    """
    if message.get("gone"):
        raise WorkerGone("the worker exited or closed its pipe before answering")
    exchanges = decode_exchanges(message.get("exchanges") or [])
    if message.get("error") is not None:
        error = error_of(message["error"])
        setattr(error, "exchanges", exchanges)  # noqa: B010 - the raw bodies seen before it
        raise error
    text = message.get("text")
    if not isinstance(text, str):
        raise WorkerProtocolError("a result needs a string 'text' (the value as JSON) or 'error'")
    return text, exchanges
