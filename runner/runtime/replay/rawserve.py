"""Serving a raw I/O call record again in reproduce: the SDK helper answers from the record.

Standard library only, Python 3.9+. The record's shape is `runner.sdk.rawio`'s; a request the
record does not hold, or with another method or URL, raises `UnrecordedCall`.
"""

import contextlib
from typing import Any, Dict, Iterator, Optional

from runner import sdk
from runner.runtime.registry import RuntimeTool
from runner.sdk import httpio, rawio
from runner.trace.format import decode_body
from runner.trace.jsonform import json_form
from runner.wire.errors import UnrecordedCall

__all__ = ["run_here", "served_by_code"]


@contextlib.contextmanager
def served_by_code(record: Dict[str, Any], tool_id: str) -> Iterator[None]:
    """Answer the SDK helper's requests from ``record`` while the tool's code runs again.

    The tool id is added to the replay context's allowed set for the block (its code runs, its
    I/O is served).
    """
    entries = rawio.entries_of(record) or []
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


def run_here(
    tool: RuntimeTool,
    args: Dict[str, Any],
    record: Dict[str, Any],
    served: Optional[Dict[str, Any]],
) -> Any:
    """Run ``tool`` in this process (tests; the runtime runs tools in its worker instead)."""
    assert tool.func is not None

    def to_text(value: Any) -> str:
        text, encoding = json_form(value)
        if encoding is not None:
            record["encoding"] = encoding
        return text

    if served is None:
        return rawio.run_capturing(tool.func, args, record, to_text)
    with served_by_code(served, tool.id):
        return rawio.run_capturing(tool.func, args, record, to_text)
