"""Raw I/O calls: tools that do their HTTP through `runner.sdk.http_request`.

Standard library only, Python 3.9+. Used by the runtime (`runner.runtime.calls`) and by
record mode in a user's own process (`runner.sdk.recorder`).

The call record of a tool that made HTTP requests through the SDK helper (SPEC.md "What raw
means"):

- ``raw_io: true``; ``body``/``body_encoding`` (and ``truncated``...) hold the raw HTTP body of
  the call's first request, decoded from its content encoding, which is noted as
  ``content_encoding`` (e.g. ``gzip``); an empty body is ``""``;
- ``meta.http``: one entry per request, in order: ``{method, url, status, content_type?,
  content_encoding?}``, and for the second and later requests their own body fields;
- ``meta.result``: the tool's return value as JSON text (the tool-level value).

Serving such a record in reproduce (`served_by_code`): a ``pure`` or ``read`` tool whose code is
available runs again with the helper answering each request from ``meta.http`` in order (a
request the record does not hold, or with another method or URL, raises `UnrecordedCall`):
the tool's own parsing runs again and its result is compared with ``meta.result``. ``local``
and ``unsafe`` tools never run in reproduce: they get ``meta.result`` (`tool_level_record`).
"""

import contextlib
from typing import Any, Dict, Iterator, List, Optional

from runner import sdk
from runner.runtime.errors import UnrecordedCall
from runner.sdk import httpio
from runner.trace.format import decode_body, encode_body

RERUN_EFFECTS = ("pure", "read")
_BODY_KEYS = ("body", "body_encoding", "truncated", "original_length", "sha256")


@contextlib.contextmanager
def capture() -> Iterator[List[Dict[str, Any]]]:
    """Collect the exchanges the SDK helper makes while the block runs."""
    sink: List[Dict[str, Any]] = []
    token = httpio.HTTP_SINK.set(sink)
    try:
        yield sink
    finally:
        httpio.HTTP_SINK.reset(token)


def apply_exchanges(
    record: Dict[str, Any], exchanges: List[Dict[str, Any]], result_text: Optional[str]
) -> None:
    """Make ``record`` a raw I/O call record (see the module docstring).

    Args:
        record: the call record being built (its body fields are replaced).
        exchanges: what `capture` collected (non-empty).
        result_text: the tool's return value as JSON text, or None when it raised.
    """
    for key in (*_BODY_KEYS, "content_encoding"):
        record.pop(key, None)
    record["raw_io"] = True
    first = exchanges[0]
    record.update(encode_body(first["body"]))
    if first.get("content_encoding"):
        record["content_encoding"] = first["content_encoding"]
    entries = []
    for position, exchange in enumerate(exchanges):
        entry = {
            k: exchange[k]
            for k in ("method", "url", "status", "content_type", "content_encoding")
            if exchange.get(k) is not None
        }
        if position:
            entry.update(encode_body(exchange["body"]))
        entries.append(entry)
    meta = record.setdefault("meta", {})
    meta["http"] = entries
    if result_text is not None:
        meta["result"] = result_text


def is_raw(record: Optional[Dict[str, Any]]) -> bool:
    """True for a raw I/O call record."""
    if not record or record.get("raw_io") is not True:
        return False
    return _entries(record) is not None


def _entries(record: Dict[str, Any]) -> Optional[List[Dict[str, Any]]]:
    meta = record.get("meta")
    http = meta.get("http") if isinstance(meta, dict) else None
    if isinstance(http, list) and http and all(isinstance(e, dict) for e in http):
        return http
    if record.get("raw_io") is True and "body" in record:
        return [{}]  # a raw body without the request list (e.g. written by another recorder)
    return None


def result_text(record: Dict[str, Any]) -> Optional[str]:
    """The tool-level value of a raw I/O record (``meta.result``), or None."""
    meta = record.get("meta")
    value = meta.get("result") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def tool_level_record(record: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of a raw I/O ``record`` whose body is the tool-level value (served without code).

    The raw HTTP body is served as the value when the record has no ``meta.result``.
    """
    text = result_text(record)
    if text is None:
        return record
    served = {k: v for k, v in record.items() if k not in _BODY_KEYS}
    served.update(encode_body(text))
    return served


@contextlib.contextmanager
def served_by_code(record: Dict[str, Any], tool_id: str) -> Iterator[None]:
    """Answer the SDK helper's requests from ``record`` while the tool's code runs again.

    The tool id is added to the replay context's allowed set for the block (its code runs, its
    I/O is served).
    """
    entries = _entries(record) or []
    position = [0]

    def source(method: str, url: str) -> Dict[str, Any]:
        index = position[0]
        position[0] += 1
        if index >= len(entries):
            raise UnrecordedCall(
                "unrecorded HTTP request #{} of tool {!r}: {} {}: the call recorded {} "
                "request(s)".format(index, tool_id, method, url, len(entries)),
                tool_id=tool_id,
                args={"method": method, "url": url},
                index=record.get("index"),
            )
        entry = entries[index]
        for key, value in (("method", method), ("url", url)):
            if entry.get(key) is not None and entry[key] != value:
                raise UnrecordedCall(
                    "unrecorded HTTP request #{} of tool {!r}: {} {}: the recording has {} "
                    "{}".format(index, tool_id, method, url, entry.get("method"), entry.get("url")),
                    tool_id=tool_id,
                    args={"method": method, "url": url},
                    index=record.get("index"),
                    differing=[key],
                )
        holder = record if index == 0 else entry
        if holder.get("truncated"):
            raise UnrecordedCall(
                "recorded HTTP body #{} of tool {!r} is truncated: it cannot be served".format(
                    index, tool_id
                ),
                tool_id=tool_id,
                args={"method": method, "url": url},
                index=record.get("index"),
            )
        body = decode_body(holder) or b""
        headers = {}
        if entry.get("content_type"):
            headers["content-type"] = str(entry["content_type"])
        encoding = entry.get("content_encoding") or (
            record.get("content_encoding") if index == 0 else None
        )
        return {
            "status": entry.get("status", 200),
            "headers": headers,
            "body": body,
            "content_encoding": encoding,
        }

    allowed = sdk._active_allowed()
    token = httpio.HTTP_SOURCE.set(source)
    try:
        if allowed is None:
            yield
        else:
            with sdk.replay_context(allowed | {tool_id}):
                yield
    finally:
        httpio.HTTP_SOURCE.reset(token)
