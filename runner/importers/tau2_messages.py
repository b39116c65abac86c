"""One τ² simulation message → a `runner.importers.source.SourceMessage` (`runner.importers.tau2`).

The message's role, content, tool calls (each call's exact argument text taken from the
provider's choice in ``raw_data`` when it parses to the same arguments), its clock, usage and
body; an assistant message with no usage, no ``raw_data`` and no calls is a fixed message (τ²'s
greeting). A missing or mistyped required field is an `InputError` naming file and field.
"""

from __future__ import annotations

from typing import Any

from runner.domain.tasks import parse_clock_start
from runner.errors import InputError
from runner.importers.source import SourceMessage, SourceToolCall, parse_arguments
from runner.importers.toolset import check_tool_id

__all__ = ["clock_of", "message", "need"]


def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str, file: str) -> Any:
    """``obj[key]`` of type ``kind``; ``where`` is the field path of ``obj`` in ``file``.

    Raises:
        InputError: ``obj`` is no object, or ``key`` is missing or of another type.
    """
    if not isinstance(obj, dict):
        raise InputError("must be an object", file=file, field=where)
    if key not in obj:
        raise InputError("required", file=file, field=f"{where}.{key}" if where else key)
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InputError(
            f"must be {names}, not {type(value).__name__}",
            file=file,
            field=f"{where}.{key}" if where else key,
        )
    return value


def clock_of(value: Any) -> float | None:
    """A τ² timestamp as epoch seconds, or None when absent or unreadable."""
    try:
        return parse_clock_start(value) if value is not None else None
    except ValueError:
        return None


def _tool_calls(msg: dict[str, Any], where: str, file: str) -> tuple[SourceToolCall, ...]:
    raw = msg.get("tool_calls") or []
    if not isinstance(raw, list):
        raise InputError("must be a list", file=file, field=f"{where}.tool_calls")
    sent: list[Any] = []
    raw_data = msg.get("raw_data")
    if isinstance(raw_data, dict) and isinstance(raw_data.get("message"), dict):
        sent = raw_data["message"].get("tool_calls") or []
    calls = []
    for i, call in enumerate(raw):
        here = f"{where}.tool_calls[{i}]"
        name = check_tool_id(need(call, "name", str, here, file), file=file, field=f"{here}.name")
        args, text, ok = parse_arguments(call.get("arguments"))
        # the exact text the model produced, when the provider's choice has it at this position
        if i < len(sent) and isinstance(sent[i], dict):
            function = sent[i].get("function") or {}
            if function.get("name") == name and isinstance(function.get("arguments"), str):
                parsed, exact, exact_ok = parse_arguments(function["arguments"])
                if exact_ok and parsed == args:
                    text = exact
        call_id = call.get("id")
        calls.append(
            SourceToolCall(
                id=call_id if isinstance(call_id, str) else None,
                name=name,
                args=args,
                arguments_text=text,
                args_ok=ok,
            )
        )
    return tuple(calls)


def message(msg: Any, where: str, file: str) -> SourceMessage:
    """The source message of ``msg`` at field path ``where`` of ``file``.

    Raises:
        InputError: a missing or mistyped role or tool call name (file and field named).
    """
    role = need(msg, "role", str, where, file)
    meta = {k: msg[k] for k in ("turn_idx", "cost") if msg.get(k) is not None}
    clock = clock_of(msg.get("timestamp"))
    usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else None
    body = msg.get("raw_data")
    if role == "tool":
        call_id = msg.get("id")
        return SourceMessage(
            role="tool",
            content=msg.get("content"),
            where=where,
            tool_call_id=call_id if isinstance(call_id, str) else None,
            error=bool(msg.get("error")),
            clock=clock,
            meta=meta,
        )
    calls = _tool_calls(msg, where, file) if role == "assistant" else ()
    fixed = role == "assistant" and usage is None and body is None and not calls
    return SourceMessage(
        role=role,
        content=msg.get("content"),
        where=where,
        tool_calls=calls,
        body=body,
        usage=usage,
        clock=clock,
        fixed=fixed,
        meta=meta,
    )
