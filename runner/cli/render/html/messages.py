"""Model requests and replies read as plain messages, whatever API carried them.

A trace stores what crossed the wire: a model turn's ``request`` and its raw response ``body``.
This module reads those values into messages:

- Chat Completions (the trace's own shape, SPEC.md): ``messages`` with roles system, user,
  assistant (``tool_calls``) and tool; the reply ``choices[0].message`` (or a choice alone:
  ``{"message", "finish_reason"}``, as the τ² importer records it);
- Anthropic Messages: ``system`` and ``messages`` with ``text``, ``tool_use`` and
  ``tool_result`` blocks; the reply's ``content`` blocks;
- OpenAI Responses: ``instructions`` and ``input`` items (``message``, ``function_call``,
  ``function_call_output``); the reply's ``output`` items;
- a streamed reply (server-sent events) of any of the three, its deltas joined.

A message is ``{"role", "text", "tool_calls": [{"name", "arguments", "id"}], "ref"}`` (``ref``:
the tool call a tool result answers; empty fields left out); the values are untrusted text,
returned as they are (the caller caps them, the page shows them as text only). Anything not
understood gives None or an empty list, never an exception: the page then shows the raw
request and body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BODY_CHARS", "Message", "reply_of", "request_messages"]

BODY_CHARS = 1 << 20  # a body longer than this is not parsed (the raw body is still shown)

Message = dict[str, Any]


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (untrusted shapes)."""
    return value if isinstance(value, Mapping) else {}


def _text_of(content: Any) -> str:
    """The text of a content value: a string, or a list of parts/blocks (text joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif kind in ("tool_result", "tool_use", "function_call", "function_call_output"):
                continue  # carried as tool calls / results, not text
            else:
                parts.append(f"[{kind or 'part'}]")  # an image, a file, audio: named only
    return "\n".join(parts)


def _arguments(value: Any) -> str:
    """Tool-call arguments as text: a JSON string stays as written, an object is dumped."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _message(role: Any, text: str = "", **extra: Any) -> Message:
    message: Message = {"role": str(role or "?"), "text": text}
    message.update({k: v for k, v in extra.items() if v})
    return message


def _chat_tool_calls(calls: Any) -> list[dict[str, Any]]:
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = _mapping(call.get("function")) or call
        out.append(
            {
                "name": str(function.get("name") or "?"),
                "arguments": _arguments(function.get("arguments", "")),
                "id": str(call.get("id") or ""),
            }
        )
    return out


def _chat_message(item: Mapping[str, Any]) -> Message:
    return _message(
        item.get("role"),
        _text_of(item.get("content")) or str(item.get("refusal") or ""),
        tool_calls=_chat_tool_calls(item.get("tool_calls")),
        ref=str(item.get("tool_call_id") or ""),
    )


def _anthropic_messages(item: Mapping[str, Any]) -> list[Message]:
    """One Messages-API message; its tool results become tool messages of their own."""
    content = item.get("content")
    blocks = content if isinstance(content, list) else []
    out = []
    for block in blocks:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            out.append(
                _message("tool", _text_of(block.get("content")), ref=str(block.get("tool_use_id")))
            )
    calls = [
        {"name": str(b.get("name") or "?"), "arguments": _arguments(b.get("input", {})), "id": ""}
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "tool_use"
    ]
    text = _text_of(content)
    if text or calls or not out:
        out.append(_message(item.get("role"), text, tool_calls=calls))
    return out


def _responses_item(item: Any) -> Message | None:
    if isinstance(item, str):
        return _message("user", item)
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "function_call":
        call = {
            "name": str(item.get("name") or "?"),
            "arguments": _arguments(item.get("arguments")),
        }
        return _message("assistant", "", tool_calls=[{**call, "id": str(item.get("call_id"))}])
    if kind == "function_call_output":
        return _message("tool", _text_of(item.get("output")), ref=str(item.get("call_id") or ""))
    if kind == "reasoning":
        return None  # an encrypted or summarised chain of thought: not part of the conversation
    return _message(item.get("role") or "assistant", _text_of(item.get("content")))


def request_messages(request: Mapping[str, Any], api: str | None = None) -> list[Message]:
    """The conversation a model request carries, as messages, in order.

    Args:
        request: the trace's ``request`` object (untrusted).
        api: the call's ``api`` (``chat_completions``, ``responses``, ``messages``), or None:
            then read from the request's shape.

    Returns:
        The messages (empty when the request holds none this reader understands).
    """
    out: list[Message] = []
    if api == "responses" or (api is None and "input" in request and "messages" not in request):
        if request.get("instructions"):
            out.append(_message("system", _text_of(request.get("instructions"))))
        items = request.get("input")
        for item in items if isinstance(items, list) else [items]:
            message = _responses_item(item)
            if message is not None:
                out.append(message)
        return out
    messages = request.get("messages")
    if not isinstance(messages, list):
        return out
    if api == "messages" or (api is None and "system" in request):
        if request.get("system"):
            out.append(_message("system", _text_of(request.get("system"))))
        for item in messages:
            if isinstance(item, Mapping):
                out += _anthropic_messages(item)
        return out
    return [_chat_message(item) for item in messages if isinstance(item, Mapping)]


def _reply_from_json(data: Any) -> Message | None:
    if not isinstance(data, Mapping):
        return None
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        data = choices[0]
    if isinstance(data.get("message"), Mapping):  # a choice (τ² imports record the choice alone)
        return _chat_message(data["message"])
    if isinstance(data.get("content"), list):  # Anthropic Messages
        return _anthropic_messages({"role": data.get("role") or "assistant", **data})[-1]
    if isinstance(data.get("output"), list):  # Responses
        items = [m for m in map(_responses_item, data["output"]) if m is not None]
        text = "\n".join(m["text"] for m in items if m["text"])
        calls = [c for m in items for c in m.get("tool_calls", [])]
        return _message("assistant", text, tool_calls=calls)
    return None


def _sse_events(body: str) -> list[Any]:
    events = []
    for line in body.splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload and payload != "[DONE]":
                try:
                    events.append(json.loads(payload))
                except ValueError:
                    continue
    return events


def _reply_from_stream(events: Sequence[Any]) -> Message | None:
    """A streamed reply's deltas joined (Chat Completions chunks, Messages or Responses events)."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for event in events:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("type")
        if kind in ("response.completed", "response.incomplete"):
            return _reply_from_json(event.get("response"))
        if kind == "response.output_text.delta":
            text.append(str(event.get("delta") or ""))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                calls[int(event.get("index") or 0)] = {
                    "name": str(block.get("name")),
                    "arguments": "",
                }
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta":
                text.append(str(delta.get("text") or ""))
            elif isinstance(delta, Mapping) and delta.get("type") == "input_json_delta":
                call = calls.setdefault(
                    int(event.get("index") or 0), {"name": "?", "arguments": ""}
                )
                call["arguments"] += str(delta.get("partial_json") or "")
        elif isinstance(event.get("choices"), list) and event["choices"]:
            delta = (
                event["choices"][0].get("delta") if isinstance(event["choices"][0], Mapping) else {}
            )
            if not isinstance(delta, Mapping):
                continue
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                if not isinstance(part, Mapping):
                    continue
                call = calls.setdefault(int(part.get("index") or 0), {"name": "", "arguments": ""})
                function = _mapping(part.get("function"))
                call["name"] += str(function.get("name") or "")
                call["arguments"] += str(function.get("arguments") or "")
    if not text and not calls:
        return None
    tool_calls = [{**calls[k], "id": ""} for k in sorted(calls)]
    return _message("assistant", "".join(text), tool_calls=tool_calls)


def reply_of(body: str | None, *, role: str = "model") -> Message | None:
    """The reply a raw response body holds (JSON or a stream), as one message; None if unread.

    Args:
        body: the call's raw response body (text); longer than `BODY_CHARS`: not read.
        role: the provider role (``model``: the reply is the assistant's; ``user``: the
            simulated user's).
    """
    if not body or len(body) > BODY_CHARS:
        return None
    stripped = body.lstrip()
    if stripped.startswith("{"):
        try:
            message = _reply_from_json(json.loads(stripped))
        except ValueError:
            message = None
    elif stripped.startswith(("data:", "event:")):
        message = _reply_from_stream(_sse_events(stripped))
    else:
        message = None
    if message is not None and role == "user":
        message["role"] = "user"
    return message
