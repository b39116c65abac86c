"""What one span says under the conventions: its kind, and the model or tool call it records.

Kinds (`span_kind`), first match wins:

- ``tool``: ``gen_ai.operation.name`` = ``execute_tool``, or ``openinference.span.kind`` =
  ``TOOL``;
- ``agent``: ``gen_ai.operation.name`` in ``invoke_agent`` / ``create_agent`` /
  ``invoke_workflow``, or OpenInference ``AGENT``;
- ``model``: ``gen_ai.operation.name`` in ``chat`` / ``text_completion`` / ``generate_content``
  / ``completion``, OpenInference ``LLM``, or (no operation name) a span carrying a requested
  model together with messages or usage (framework wrappers such as ADK's ``call_llm``);
- otherwise None (chains, HTTP spans, roots without attributes): structure only.

A model span is read by `runner.importers.otel.modelspans.model_call`. `tool_call` reads a
tool span: name, call id, arguments, result, error (span status ``ERROR``, ``error.type``,
the ``exception`` event).

An attribute of the wrong type (usage that is not an integer, messages that are not JSON) is
a warning naming span, file and attribute; the value counts as absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.importers.otel.messages import (
    PLACEHOLDERS,
)
from runner.importers.otel.shapes import Span
from runner.importers.otel.values import as_int, json_value

__all__ = ["ToolCall", "Warn", "attr_int", "attr_str", "span_error", "span_kind", "tool_call"]

Warn = Callable[[Span, str, str], None]

_MODEL_OPS = frozenset({"chat", "text_completion", "generate_content", "completion", "responses"})
_AGENT_OPS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
_DETAILS = "gen_ai.client.inference.operation.details"
_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _op(span: Span) -> str | None:
    op = span.attrs.get("gen_ai.operation.name")
    return op.lower() if isinstance(op, str) else None


def span_kind(span: Span) -> str | None:
    """``model``, ``tool``, ``agent`` or None (see the module docstring)."""
    op = _op(span)
    oi = span.attrs.get("openinference.span.kind")
    oi = oi.upper() if isinstance(oi, str) else None
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op in _AGENT_OPS or oi == "AGENT":
        return "agent"
    if op in _MODEL_OPS or oi == "LLM":
        return "model"
    if op is None and oi is None:
        a = span.attrs
        requested = "gen_ai.request.model" in a or "llm.model_name" in a
        content = any(
            k in a
            for k in (
                "gen_ai.input.messages",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.prompt_tokens",
                "gcp.vertex.agent.llm_request",
                "gen_ai.prompt.0.role",
                "gen_ai.prompt.0.content",
            )
        )
        if requested and content:
            return "model"
    return None


@dataclass
class ToolCall:
    """What a tool span records. ``result_known`` False: the result was not captured."""

    name: str | None = None
    call_id: str | None = None
    arguments: Any = None
    args_known: bool = False
    result: str | None = None
    result_known: bool = False
    error: tuple[str, str] | None = None
    description: str | None = None


def attr_str(span: Span, key: str, warn: Warn) -> str | None:
    """The span's text attribute ``key`` stripped; None when absent, empty or a placeholder.

    A value of another type is a warning (`Warn`) and counts as absent.
    """
    value = span.attrs.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        warn(span, key, f"must be a string, not {type(value).__name__}: ignored")
        return None
    value = value.strip()
    return value if value and value not in PLACEHOLDERS else None


def attr_int(span: Span, keys: tuple[str, ...], warn: Warn) -> int | None:
    """The first of ``keys`` holding a non-negative integer; others are warnings, None if none."""
    for key in keys:
        if key not in span.attrs:
            continue
        value = as_int(span.attrs[key])
        if value is None or value < 0:
            warn(span, key, f"must be a non-negative integer, not {span.attrs[key]!r}: ignored")
            continue
        return value
    return None


def span_error(span: Span) -> tuple[str, str] | None:
    """``(error class, message)`` of a span that failed, else None.

    The class is ``error.type``, else the ``exception`` event's ``exception.type``, else
    ``SpanError``; the message is the exception's, else the status message.
    """
    error_type = span.attrs.get("error.type")
    exc_type: str | None = None
    exc_message: str | None = None
    for event in span.events:
        if event.name == "exception":
            t = event.attrs.get("exception.type")
            m = event.attrs.get("exception.message")
            exc_type = exc_type or (t if isinstance(t, str) else None)
            exc_message = exc_message or (m if isinstance(m, str) else None)
    if not span.error and not error_type and exc_type is None:
        return None
    cls = error_type if isinstance(error_type, str) and error_type else exc_type or "SpanError"
    message = exc_message or span.status_message or ""
    return cls, message


def tool_call(span: Span, warn: Warn) -> ToolCall:
    """Read a tool span (see the module docstring)."""
    info = ToolCall()
    name = attr_str(span, "gen_ai.tool.name", warn) or attr_str(span, "tool.name", warn)
    if name is None and span.name.startswith("execute_tool "):
        name = span.name[len("execute_tool ") :].strip() or None
    if name is None and span.attrs.get("openinference.span.kind") == "TOOL":
        name = span.name or None
    info.name = name
    info.description = attr_str(span, "gen_ai.tool.description", warn) or attr_str(
        span, "tool.description", warn
    )
    info.call_id = (
        attr_str(span, "gen_ai.tool.call.id", warn)
        or attr_str(span, "tool_call.id", warn)
        or attr_str(span, "tool.id", warn)
    )
    for key in ("gen_ai.tool.call.arguments", "input.value", "gcp.vertex.agent.tool_call_args"):
        if key in span.attrs:
            value = span.attrs[key]
            if isinstance(value, str) and value.strip() in PLACEHOLDERS:
                continue
            info.arguments, info.args_known = value, True
            break
    for key in ("gen_ai.tool.call.result", "output.value", "gcp.vertex.agent.tool_response"):
        if key in span.attrs:
            value = span.attrs[key]
            if _placeholder_result(value):
                continue
            info.result = value if isinstance(value, str) else _dumps(value)
            info.result_known = True
            break
    info.error = span_error(span)
    return info


def _placeholder_result(value: Any) -> bool:
    if isinstance(value, str) and value.strip() in PLACEHOLDERS:
        return True
    ok, parsed = json_value(value)
    # ADK writes {"result": "<not specified>"} when the tool raised (no result)
    return bool(
        ok
        and isinstance(parsed, dict)
        and list(parsed) == ["result"]
        and isinstance(parsed["result"], str)
        and parsed["result"].strip() in PLACEHOLDERS
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
