"""Raw I/O calls: tools that do their HTTP through `runner.sdk.http_request`.

Standard library only, Python 3.9+. Used by the runtime (`runner.runtime.replay.calls`) and by
record mode in a user's own process (`runner.sdk.recorder`); serving a raw record again in
reproduce is the runtime's (`runner.runtime.replay.rawserve`).

The call record of a tool that made HTTP requests through the SDK helper (SPEC.md "What raw
means"):

- ``raw_io: true``; ``body``/``body_encoding`` (and ``truncated``...) hold the raw HTTP body of
  the call's first request, decoded from its content encoding, which is noted as
  ``content_encoding`` (e.g. ``gzip``); an empty body is ``""``;
- ``meta.http``: one entry per request, in order: ``{method, url, status, content_type?,
  content_encoding?}``, and for the second and later requests their own body fields;
- ``meta.result``: the tool's return value as JSON text (the tool-level value).

Serving such a record in reproduce (`runner.runtime.replay.rawserve.served_by_code`): a ``pure``
or ``read`` tool whose code is
available runs again with the helper answering each request from ``meta.http`` in order (a
request the record does not hold, or with another method or URL, raises `UnrecordedCall`):
the tool's own parsing runs again and its result is compared with ``meta.result``. ``local``
and ``unsafe`` tools never run in reproduce: they get ``meta.result`` (`tool_level_record`).
"""

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional

from runner.sdk import httpio
from runner.trace.format import encode_body

RERUN_EFFECTS = ("pure", "read")
BODY_KEYS = ("body", "body_encoding", "truncated", "original_length", "sha256")


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
    for key in (*BODY_KEYS, "content_encoding"):
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
    return entries_of(record) is not None


def entries_of(record: Dict[str, Any]) -> Optional[List[Dict[str, Any]]]:
    """The ``meta.http`` entries of a raw I/O ``record`` (None when it has none)."""
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
    served = {k: v for k, v in record.items() if k not in BODY_KEYS}
    served.update(encode_body(text))
    return served


def run_capturing(
    func: Callable[..., Any],
    args: Dict[str, Any],
    record: Dict[str, Any],
    to_text: Callable[[Any], str],
) -> Any:
    """Call ``func(**args)``; ``record``'s body is its value as JSON, or its raw HTTP bodies.

    Args:
        func: the tool function.
        args: its keyword arguments.
        record: the call record being built (body fields set here).
        to_text: the tool's return value as JSON text (raises on a value JSON cannot hold).

    Returns:
        The tool's return value (its exception propagates, with the raw bodies recorded).
    """
    with capture() as exchanges:
        try:
            value = func(**args)
        except BaseException:
            if exchanges:
                apply_exchanges(record, exchanges, None)
            raise
    text = to_text(value)
    if exchanges:
        apply_exchanges(record, exchanges, text)
    else:
        record.update(encode_body(text))
    return value
