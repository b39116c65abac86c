"""Tell another tool's trace from a broken one: the hint that names the ``import`` reading it.

A file given to ``reproduce`` or ``lint`` whose first line has no format version ``v``, or is
not one JSON object at all, may be a valid file of another tool. `foreign_hint` recognises the
shapes the importers read (`runner.importers`), from the first line's object or, when that
did not decode (a pretty-printed JSON document, a zip archive), from the file's first bytes:

- Inspect AI logs: a zip archive named ``*.eval``, or a JSON document with ``eval`` and
  ``samples``/``results``/``status`` → ``import inspect``;
- OpenTelemetry: OTLP/JSON (``resourceSpans``, ``resource_spans``, ``batches``), Jaeger
  (``data`` of ``traceID`` and ``spans``) or span objects (trace and span ids; the Python
  SDK's ``context``) → ``import otel``;
- OpenAI chat exports: ``messages`` (a list of objects with a ``role``), or one message
  (``role`` and ``content``) → ``import openai-messages``;
- τ²-bench results: ``simulations`` → ``import tau2``;
- Harbor ATIF trajectories: ``schema_version`` ``ATIF-v1.x`` → ``import atif``.

Only key names are read; nothing of the file is printed but its name (made inert by the
caller's error output).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["foreign_hint"]

_ZIP = b"PK\x03\x04"
_OTEL_KEYS = ("resourceSpans", "resource_spans", "resourceLogs", "resource_logs", "batches")
# Key names sought in the first bytes of a file whose first line did not decode.
_TEXT_RULES = (  # in order: the first that matches names the importer
    ("atif", re.compile(rb'"schema_version"\s*:\s*"ATIF-')),
    ("tau2", re.compile(rb'"(simulations|user_info)"\s*:')),
    ("inspect", re.compile(rb'"eval"\s*:\s*\{')),
    (
        "otel",
        re.compile(
            rb'"(resourceSpans|resource_spans|resourceLogs|batches|traceID|trace_id|traceId)"\s*:'
        ),
    ),
    ("openai-messages", re.compile(rb'"role"\s*:\s*"(system|developer|user|assistant|tool)"')),
)
_WHAT = {
    "inspect": "an Inspect AI log",
    "otel": "OpenTelemetry spans",
    "openai-messages": "an OpenAI chat-messages export",
    "tau2": "τ²-bench results",
    "atif": "a Harbor ATIF trajectory",
}


def _kind_of(obj: Mapping[str, Any]) -> str | None:
    """The importer for a decoded first line, or None."""
    if any(key in obj for key in _OTEL_KEYS):
        return "otel"
    context = obj.get("context")
    ids = ({"traceId", "trace_id", "traceID"} & obj.keys()) and (
        {"spanId", "span_id", "spanID"} & obj.keys()
    )
    if ids or (isinstance(context, Mapping) and "trace_id" in context):
        return "otel"
    data = obj.get("data")
    if isinstance(data, list) and data and isinstance(data[0], Mapping) and "spans" in data[0]:
        return "otel"
    if "eval" in obj and ({"samples", "results", "status"} & obj.keys()):
        return "inspect"
    version = obj.get("schema_version")
    if isinstance(version, str) and version.startswith("ATIF-"):
        return "atif"
    if "simulations" in obj:
        return "tau2"
    messages = obj.get("messages")
    if isinstance(messages, list) and any(isinstance(m, Mapping) and "role" in m for m in messages):
        return "openai-messages"
    if "role" in obj and "content" in obj:
        return "openai-messages"
    return None


def foreign_hint(
    file: str, *, obj: Mapping[str, Any] | None = None, head: bytes = b""
) -> str | None:
    """A sentence naming the import command for another tool's file, or None.

    Args:
        file: the file's path as the user gave it (put in the suggested command).
        obj: the first line decoded, when it decoded to an object.
        head: the file's first bytes (up to 64 KiB), when the first line did not decode.

    Returns:
        e.g. ``"this looks like OpenTelemetry spans, not a sandbox-replay trace: `sandbox-replay
        import otel FILE --out DIR` reads it"``; None when no importer's shape is recognised.
    """
    kind: str | None = None
    if obj is not None:
        kind = _kind_of(obj)
    elif head.startswith(_ZIP):
        kind = "inspect" if file.endswith(".eval") else None
    else:
        kind = next((name for name, rule in _TEXT_RULES if rule.search(head)), None)
    if kind is None:
        return None
    return (
        f"this looks like {_WHAT[kind]}, not a sandbox-replay trace:"
        f" `sandbox-replay import {kind} {file} --out DIR` reads it"
    )
