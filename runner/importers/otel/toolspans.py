"""What a tool span records (`tool_call`), and the attribute readers every span reader shares.

`tool_call` reads a span that `runner.importers.otel.conventions` classified as a tool call:
its name, call id, arguments, result and error, each from the first family's attribute that
has it (GenAI ``gen_ai.tool.*``; any-agent ``gen_ai.tool.args`` / ``gen_ai.output``;
OpenInference ``tool.name`` / ``input.value`` / ``output.value``; OpenLLMetry
``traceloop.entity.*``; LangSmith ``gen_ai.prompt`` / ``gen_ai.completion``; pydantic-ai
``tool_arguments`` / ``tool_response``; ADK ``gcp.vertex.agent.tool_call_args`` /
``tool_response``; Claude Code ``tool_name`` / ``tool_input`` and its ``tool.output`` event).
Errors come from span status ``ERROR``, ``error.type`` and the ``exception`` event.

An attribute of the wrong type (usage that is not an integer, messages that are not JSON) is
a warning naming span, file and attribute; the value counts as absent. Arguments that were
not captured stay unknown (``args_known`` False), never ``{}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.importers.otel.messages import PLACEHOLDERS
from runner.importers.otel.shapes import Span
from runner.importers.otel.values import as_int, json_value

__all__ = [
    "ToolCall",
    "Warn",
    "attr_int",
    "attr_str",
    "span_error",
    "tool_call",
    "unwrap_arguments",
]

Warn = Callable[[Span, str, str], None]

# Where each family keeps a tool call's parts, first present (and captured) wins.
_NAME_KEYS = (
    "gen_ai.tool.name",  # GenAI, any-agent, pydantic-ai, Claude Platform
    "tool.name",  # OpenInference
    "tool_call.function.name",  # OpenInference (newer TOOL spans)
    "tool_name",  # Claude Code claude_code.tool
)
_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.id", "tool_use_id")
_ARG_KEYS = (
    "gen_ai.tool.call.arguments",  # GenAI
    "gen_ai.tool.args",  # any-agent
    "tool_call.function.arguments",  # OpenInference
    "tool_arguments",  # pydantic-ai
    "input.value",  # OpenInference (smolagents: {"args", "kwargs"})
    "traceloop.entity.input",  # OpenLLMetry
    "gcp.vertex.agent.tool_call_args",  # ADK
    "tool_input",  # Claude Code (OTEL_LOG_TOOL_DETAILS)
    "gen_ai.prompt",  # LangSmith (the run's inputs)
)
_RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "gen_ai.output",  # any-agent
    "tool_response",  # pydantic-ai
    "output.value",
    "traceloop.entity.output",
    "gcp.vertex.agent.tool_response",
    "tool_output",  # Claude Code
    "gen_ai.completion",  # LangSmith (the run's outputs)
)
_NAME_PREFIXES = ("execute_tool ", "anthropic.tool_use ", "running tool ")
_DESCRIPTION_KEYS = ("gen_ai.tool.description", "tool.description")
_WRAPPER_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


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
    ``SpanError``; the message is the exception's, else the status message, else Claude
    Code's ``error`` attribute (its tool spans say ``success: false``).
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
    success = span.attrs.get("success")
    failed = success is False or (isinstance(success, str) and success.lower() == "false")
    if not span.error and not error_type and exc_type is None and not failed:
        return None
    cls = error_type if isinstance(error_type, str) and error_type else exc_type or "SpanError"
    detail = span.attrs.get("error")
    message = exc_message or span.status_message or (detail if isinstance(detail, str) else "")
    return cls, message


def unwrap_arguments(value: Any) -> Any:
    """Arguments as a tool received them, out of a framework's call record.

    smolagents (through OpenInference) and OpenLLMetry's ``@tool`` record the Python call,
    ``{"args": [], "kwargs": {...}}`` (smolagents adds ``sanitize_inputs_outputs``): with no
    positional arguments, the keyword arguments are the tool's arguments. LangChain tools
    under OpenLLMetry record ``{"inputs": {...}, ...}``. Anything else is returned as given.
    """
    ok, parsed = json_value(value)
    if not ok or not isinstance(parsed, dict):
        return value
    if set(parsed) <= _WRAPPER_KEYS and isinstance(parsed.get("kwargs"), dict):
        if not parsed.get("args"):
            return parsed["kwargs"]
        return value
    if isinstance(parsed.get("inputs"), dict) and "input_str" in parsed:
        return parsed["inputs"]
    return value


def _tool_name(span: Span, warn: Warn) -> str | None:
    for key in _NAME_KEYS:
        name = attr_str(span, key, warn)
        if name is not None:
            return name
    if span.attrs.get("traceloop.span.kind") == "tool":
        name = attr_str(span, "traceloop.entity.name", warn)
        if name is not None:
            return name
    for prefix in _NAME_PREFIXES:
        if span.name.startswith(prefix):
            return span.name[len(prefix) :].strip() or None
    if span.family in ("openinference", "smolagents", "langsmith", "openllmetry"):
        return span.name.strip() or None
    return None


def tool_call(span: Span, warn: Warn) -> ToolCall:
    """Read a tool span (see the module docstring)."""
    info = ToolCall()
    info.name = _tool_name(span, warn)
    for key in _DESCRIPTION_KEYS:
        info.description = info.description or attr_str(span, key, warn)
    for key in _ID_KEYS:
        info.call_id = info.call_id or attr_str(span, key, warn)
    for key in _ARG_KEYS:
        if key in span.attrs:
            value = span.attrs[key]
            if isinstance(value, str) and value.strip() in PLACEHOLDERS:
                continue
            info.arguments, info.args_known = unwrap_arguments(value), True
            break
    for key in _RESULT_KEYS:
        if key in span.attrs:
            value = span.attrs[key]
            if _placeholder_result(value):
                continue
            info.result = value if isinstance(value, str) else _dumps(value)
            info.result_known = True
            break
    if not info.result_known:
        for event in span.events:  # Claude Code: the output as a ``tool.output`` event
            if event.name == "tool.output":
                value = event.attrs.get("output", event.attrs.get("content"))
                if isinstance(value, str) and not _placeholder_result(value):
                    info.result, info.result_known = value, True
                    break
    message = _tool_message(info.result)
    if message is not None:  # a LangChain ToolMessage (OpenInference's LangChain output.value)
        info.result, message_id = message
        info.call_id = info.call_id or message_id
    if span.family == "langsmith":  # a run's inputs and outputs, in their wrappers
        info.arguments = _single(info.arguments, "input")
        if info.result is not None:
            inner = _single(info.result, "output")
            info.result = inner if isinstance(inner, str) else _dumps(inner)
    info.error = span_error(span)
    if info.error is None and span.family == "adk":
        info.error = _adk_error_response(info.result, span)
    return info


def _adk_error_response(result: str | None, span: Span) -> tuple[str, str] | None:
    """ADK's error response ``{"error": "<Class>: <message>"}`` as the call's error.

    ADK turns a tool's exception into that response (its default error callback); some of its
    telemetry modes record the response without an error status. The class is ``error.type``
    when the span has one, else the text before ``:``.
    """
    ok, parsed = json_value(result)
    if not ok or not isinstance(parsed, dict) or list(parsed) != ["error"]:
        return None
    text = parsed["error"]
    if not isinstance(text, str) or not text:
        return None
    declared = span.attrs.get("error.type")
    head, _, rest = text.partition(":")
    if isinstance(declared, str) and declared:
        return declared, text
    if rest and head.strip().replace(".", "").replace("_", "").isalnum():
        return head.strip(), rest.strip()
    return "ToolError", text


def _tool_message(result: str | None) -> tuple[str, str | None] | None:
    """``(content, tool_call_id)`` of a result that is a serialised LangChain ``ToolMessage``.

    The model was handed the message's content, not the message: the content is the result.
    """
    ok, parsed = json_value(result)
    if not ok or not isinstance(parsed, dict) or parsed.get("type") != "tool":
        return None
    if "content" not in parsed or "tool_call_id" not in parsed:
        return None
    content = parsed["content"]
    call_id = parsed.get("tool_call_id")
    text = content if isinstance(content, str) else _dumps(content)
    return text, call_id if isinstance(call_id, str) and call_id else None


def _single(value: Any, key: str) -> Any:
    """The value of ``{key: X}``, a run's only input or output (LangSmith), else ``value``."""
    ok, parsed = json_value(value)
    if ok and isinstance(parsed, dict) and list(parsed) == [key]:
        inner = parsed[key]
        ok_inner, inner_parsed = json_value(inner)
        return inner_parsed if ok_inner and isinstance(inner_parsed, dict) else inner
    return value


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
