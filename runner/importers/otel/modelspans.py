"""What a model span records: `model_call` (see `runner.importers.otel.conventions` for kinds).

System prompt, input messages, the first output message, requested and response model ids,
usage, tool definitions and error, each field from the first convention that has it
(`runner.importers.otel.messages` lists them); span events and log records tied to the span
(``gen_ai.client.inference.operation.details``, the older
``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice``,
``gen_ai.content.prompt`` / ``gen_ai.content.completion``) are read too. An attribute of the
wrong type is a warning; the value counts as absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.importers.otel.messages import (
    PLACEHOLDERS,
    Call,
    Msg,
    ToolDef,
    adk_request,
    adk_response,
    chat_message,
    flattened,
    loose_messages,
    parts_messages,
    parts_text,
    tool_def,
)
from runner.importers.otel.shapes import Event, Span
from runner.importers.otel.toolspans import Warn, attr_int, attr_str, span_error
from runner.importers.otel.values import as_dict, as_int, json_value

__all__ = ["ModelCall", "model_call"]

_DETAILS = "gen_ai.client.inference.operation.details"
_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


# Claude Code's llm_request spans name usage without the GenAI prefix (issue 50776 upstream)
_CLAUDE_CODE_IN = ("input_tokens",)
_CLAUDE_CODE_OUT = ("output_tokens",)


@dataclass
class ModelCall:
    """What a model span records (None: the span does not say)."""

    system: str | None = None
    input: list[Msg] | None = None
    output: Msg | None = None
    request_model: str | None = None
    response_model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tools: list[ToolDef] = field(default_factory=list)
    error: tuple[str, str] | None = None
    content_source: str | None = None


def _merged(span: Span) -> dict[str, Any]:
    """The span's attributes plus those of its inference-details events and log records."""
    attrs = dict(span.attrs)
    for event in [*span.events, *span.logs]:
        if event.name == _DETAILS:
            for key, value in event.attrs.items():
                attrs.setdefault(key, value)
    return attrs


def _event_body(event: Event) -> dict[str, Any] | None:
    if isinstance(event.body, dict):
        return event.body
    ok, body = json_value(event.body) if isinstance(event.body, str) else (False, None)
    if ok and isinstance(body, dict):
        return body
    raw = event.attrs.get("gen_ai.event.content")
    ok, body = json_value(raw)
    if ok and isinstance(body, dict):
        return body
    flat = {k: v for k, v in event.attrs.items() if not k.startswith("gen_ai.")}
    for key in ("tool_calls", "message", "content"):
        if isinstance(flat.get(key), str) and flat[key].lstrip()[:1] in ("[", "{"):
            ok, parsed = json_value(flat[key])
            if ok:
                flat[key] = parsed
    return flat or None


def _attribute_events(span: Span) -> list[Event]:
    """pydantic-ai's ``events`` attribute: the GenAI events as a JSON list of objects."""
    ok, value = json_value(span.attrs.get("events"))
    out: list[Event] = []
    for item in value if ok and isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("event.name"), str):
            body = {k: v for k, v in item.items() if k != "event.name"}
            out.append(Event(item["event.name"], None, {}, body))
    return out


def _event_messages(span: Span) -> tuple[list[Msg] | None, Msg | None]:
    inputs: list[Msg] = []
    output: Msg | None = None
    events = sorted([*span.events, *span.logs], key=lambda e: e.time_ns or 0)
    for event in [*events, *_attribute_events(span)]:
        name = event.name
        if name in _INPUT_EVENTS:
            body = _event_body(event) or {}
            msg = chat_message({**body, "role": _INPUT_EVENTS[name]})
            if "content" not in body and not msg.tool_calls and msg.role != "tool":
                msg.known = False
            inputs.append(msg)
        elif name == "gen_ai.choice" and output is None:
            body = _event_body(event) or {}
            if as_int(body.get("index")) in (None, 0):
                message = as_dict(body.get("message"), body)
                output = chat_message({**message, "role": "assistant"})
                if "content" not in message and not output.tool_calls:
                    output.known = False
        elif name == "gen_ai.content.prompt":
            inputs.extend(loose_messages(event.attrs.get("gen_ai.prompt"), "user") or [])
        elif name == "gen_ai.content.completion" and output is None:
            found = loose_messages(event.attrs.get("gen_ai.completion"), "assistant")
            output = found[0] if found else None
    return (inputs or None), output


def _score(messages: list[Msg] | None) -> int:
    """How much of a conversation a candidate holds: its captured non-system messages.

    A candidate with only the system prompt (a wrapper that records its instructions and
    nothing else) must not win over one that holds the user's text.
    """
    return sum(
        1
        for m in messages or []
        if m.known and m.role not in ("system", "developer") and (m.text or m.tool_calls)
    )


def _any_agent_output(value: Any, kind: Any) -> Msg | None:
    """any-agent's ``gen_ai.output``: ``[{"tool.name", "tool.args"}]`` (type json) or text."""
    ok, parsed = json_value(value)
    if kind == "json" and ok and isinstance(parsed, list):
        calls = [
            Call(None, str(c.get("tool.name")), c.get("tool.args"))
            for c in parsed
            if isinstance(c, dict) and isinstance(c.get("tool.name"), str)
        ]
        if calls or not parsed:
            return Msg("assistant", None, calls)
    if isinstance(value, str):
        return Msg("assistant", value) if value.strip() not in PLACEHOLDERS else None
    return None


def _openai_json(span: Span, key: str) -> Any:
    ok, value = json_value(span.attrs.get(key))
    return value if ok and isinstance(value, dict) else None


def model_call(span: Span, warn: Warn) -> ModelCall:
    """Read a model span (see the module docstring)."""
    attrs = _merged(span)
    info = ModelCall()
    candidates_in: list[tuple[str, list[Msg] | None]] = []
    candidates_out: list[tuple[str, list[Msg] | None]] = []
    for key, target in (
        ("gen_ai.input.messages", candidates_in),
        ("gen_ai.output.messages", candidates_out),
    ):
        if key in attrs:
            found = parts_messages(attrs[key])
            if found is None:
                warn(span, key, "is not a JSON list of messages: ignored")
            target.append(("gen_ai.messages", found))
    system_raw = attrs.get("gen_ai.system_instructions")
    if system_raw is not None:
        ok, value = json_value(system_raw)
        info.system, _ = parts_text(value if ok else system_raw)
    if "gen_ai.output" in attrs and span.family == "any-agent":
        found_out = _any_agent_output(attrs["gen_ai.output"], attrs.get("gen_ai.output.type"))
        candidates_out.append(("any-agent", [found_out] if found_out is not None else None))
    if span.family == "langsmith":
        candidates_in.append(("langsmith", loose_messages(attrs.get("gen_ai.prompt"), "user")))
        candidates_out.append(
            ("langsmith", loose_messages(attrs.get("gen_ai.completion"), "assistant"))
        )
    candidates_in.append(("openinference", flattened(attrs, "llm.input_messages")))
    candidates_out.append(("openinference", flattened(attrs, "llm.output_messages")))
    candidates_in.append(("gen_ai.prompt", flattened(attrs, "gen_ai.prompt")))
    candidates_out.append(("gen_ai.completion", flattened(attrs, "gen_ai.completion")))
    events_in, events_out = _event_messages(span)
    candidates_in.append(("events", events_in))
    candidates_out.append(("events", [events_out] if events_out is not None else None))
    request = _openai_json(span, "input.value")
    if request is not None and isinstance(request.get("messages"), list):
        candidates_in.append(
            ("input.value", [chat_message(m) for m in request["messages"] if isinstance(m, dict)])
        )
    response = _openai_json(span, "output.value")
    if response is not None and isinstance(response.get("choices"), list) and response["choices"]:
        first = response["choices"][0]
        if isinstance(first, dict) and isinstance(first.get("message"), dict):
            candidates_out.append(("output.value", [chat_message(first["message"])]))
    adk_in = adk_request(attrs.get("gcp.vertex.agent.llm_request"))
    adk_out = adk_response(attrs.get("gcp.vertex.agent.llm_response"))
    if adk_in is not None:
        candidates_in.append(("adk", adk_in[1]))
        info.system = info.system or adk_in[0]
        info.tools.extend(adk_in[2])
    if adk_out is not None and adk_out[0] is not None:
        candidates_out.append(("adk", [adk_out[0]]))
    source, chosen = _choose(candidates_in)
    info.input = chosen
    out_source, out = _choose(candidates_out)
    info.output = out[0] if out else None
    info.content_source = out_source or source
    if info.input and info.system is None:
        systems = [m for m in info.input if m.role in ("system", "developer")]
        if systems and systems[0].known:
            info.system = systems[0].text
    params = _openai_json(span, "llm.invocation_parameters") or {}
    requested = params.get("model") if isinstance(params.get("model"), str) else None
    info.request_model = (
        attr_str(span, "gen_ai.request.model", warn)
        or attr_str(span, "llm.request.model_name", warn)
        or requested
        or attr_str(span, "llm.model_name", warn)
        or (attr_str(span, "model", warn) if span.family == "claude-code" else None)
    )
    info.response_model = attr_str(span, "gen_ai.response.model", warn) or attr_str(
        span, "llm.response.model_name", warn
    )
    if info.response_model is None and response is not None:
        model = response.get("model")
        info.response_model = model if isinstance(model, str) and model else None
    if info.response_model is None and adk_out is not None:
        info.response_model = adk_out[1]
    info.tokens_in = attr_int(
        span,
        ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
        + _CLAUDE_CODE_IN * (span.family == "claude-code"),
        warn,
    )
    info.tokens_out = attr_int(
        span,
        (
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        )
        + _CLAUDE_CODE_OUT * (span.family == "claude-code"),
        warn,
    )
    if info.tokens_in is None and info.tokens_out is None and adk_out is not None:
        usage = adk_out[2]
        info.tokens_in = as_int(usage.get("prompt_token_count"))
        info.tokens_out = as_int(usage.get("candidates_token_count"))
    info.tools.extend(_tool_defs(span, attrs, warn))
    info.error = span_error(span)
    return info


def _choose(candidates: list[tuple[str, list[Msg] | None]]) -> tuple[str | None, list[Msg] | None]:
    """The candidate holding the most of the conversation (`_score`); the first on a tie."""
    present = [(s, m) for s, m in candidates if m]
    if not present:
        return None, None
    best = max(range(len(present)), key=lambda i: (_score(present[i][1]), -i))
    return present[best]


def _tool_defs(span: Span, attrs: dict[str, Any], warn: Warn) -> list[ToolDef]:
    out: list[ToolDef] = []
    raw = attrs.get("gen_ai.tool.definitions")
    if raw is not None:
        ok, value = json_value(raw)
        if ok and isinstance(value, list):
            out.extend(d for d in (tool_def(v) for v in value) if d is not None)
        else:
            warn(span, "gen_ai.tool.definitions", "is not a JSON list of tools: ignored")
    index = 0
    while f"llm.tools.{index}.tool.json_schema" in attrs:
        found = tool_def(attrs[f"llm.tools.{index}.tool.json_schema"])
        if found is None:
            warn(span, f"llm.tools.{index}.tool.json_schema", "is not a tool definition: ignored")
        else:
            out.append(found)
        index += 1
    index = 0
    while f"llm.request.functions.{index}.name" in attrs:
        prefix = f"llm.request.functions.{index}."
        ok, params = json_value(attrs.get(prefix + "parameters"))
        found = tool_def(
            {
                "name": attrs.get(prefix + "name"),
                "description": attrs.get(prefix + "description"),
                "parameters": params if ok else None,
            }
        )
        if found is not None:
            out.append(found)
        index += 1
    return out
