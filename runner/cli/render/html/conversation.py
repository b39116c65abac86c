"""An episode as a conversation: each model turn's new messages and its reply, in words.

A trace stores what crossed the wire: a model turn's ``request`` (the whole conversation so far,
or its new messages after a ``messages_from`` reference) and its raw response ``body``. A
reader wants the conversation: who said what, which tools the model asked for, what came back.
This module reads those values into plain messages, whatever API carried them:

- Chat Completions (the trace's own shape, SPEC.md): ``messages`` with roles system, user,
  assistant (``tool_calls``) and tool; the reply ``choices[0].message``;
- Anthropic Messages: ``system`` and ``messages`` with ``text``, ``tool_use`` and
  ``tool_result`` blocks; the reply's ``content`` blocks;
- OpenAI Responses: ``instructions`` and ``input`` items (``message``, ``function_call``,
  ``function_call_output``); the reply's ``output`` items;
- a streamed reply (server-sent events) of any of the three, its deltas joined.

A message is ``{"role", "text", "tool_calls": [{"name", "arguments", "id"}], "ref"}`` (``ref``:
the tool call a tool result answers); the values are untrusted text, returned as they are (the
caller caps them, the page shows them as text only). Anything not understood gives None or an
empty list, never an exception: the page then shows the raw request and body as before.

`History` remembers each role's previous request (a fingerprint per message) so each turn
shows only the messages new since that turn, and drops the assistant message that merely
repeats the previous reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BODY_CHARS",
    "History",
    "Message",
    "call_view",
    "capped_message",
    "denial",
    "reply_of",
    "request_messages",
]

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
        message = choices[0].get("message")
        return _chat_message(message) if isinstance(message, Mapping) else None
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


def denial(
    error: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """``{"rule", "reason"}`` when the policy refused the call (nothing ran), else None.

    A refused call carries ``error.class`` ``runner.errors.CapabilityDenied`` (or
    ``ToolNotResolvable``) and, for an argument rule, ``meta.argument_rule`` (docs/trace-format.md).
    """
    rule = (meta or {}).get("argument_rule") if isinstance(meta, Mapping) else None
    rule = rule if isinstance(rule, Mapping) else {}
    cls = str((error or {}).get("class") or "")
    if rule.get("allowed") is False or cls.endswith(("CapabilityDenied", "ToolNotResolvable")):
        return {
            "rule": str(rule["rule"]) if rule.get("rule") is not None else None,
            "reason": str(rule.get("reason") or (error or {}).get("message") or cls),
        }
    return None


def _fingerprint(message: Message) -> str:
    text = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _same_reply(a: Message | None, b: Message) -> bool:
    if a is None:
        return False
    calls = [(c["name"], c["arguments"]) for c in a.get("tool_calls", [])]
    return a["text"] == b["text"] and calls == [
        (c["name"], c["arguments"]) for c in b.get("tool_calls", [])
    ]


@dataclass
class History:
    """Each conversation so far, to show a turn's new messages only.

    Attributes:
        seen: per call index, the fingerprints of its request's messages (references resolve
            through it).
        last: per conversation key, the call index of its previous turn.
        replies: per call index, the reply it got (to drop its echo in the next request).
    """

    seen: dict[int, list[str]] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)
    replies: dict[int, Message | None] = field(default_factory=dict)

    def turn(
        self,
        index: int,
        key: str,
        messages: list[Message],
        reference: tuple[int, int] | None,
        reply: Message | None,
    ) -> tuple[list[Message], str | None]:
        """The messages of turn ``index`` not shown by an earlier turn of ``key``, and a note.

        Args:
            index: the call's index.
            key: the conversation: the provider role and the step (``model/research``);
                each agent step holds a conversation of its own with its model.
            messages: its request's messages (`request_messages`); after a ``messages_from``
                reference, those that follow the referenced history.
            reference: ``(call, count)`` of ``messages_from``, or None.
            reply: the turn's reply (`reply_of`).

        Returns:
            ``(new messages, note)``; the note says when the history is not the previous
            turn's plus new messages (every message is then shown).
        """
        prints = [_fingerprint(m) for m in messages]
        previous = self.last.get(key)
        before = self.seen.get(previous, []) if previous is not None else []
        base = self.seen.get(reference[0], [])[: reference[1]] if reference else []
        whole = base + prints
        note = None
        if whole[: len(before)] == before and len(before) >= len(base):
            new = messages[len(before) - len(base) :]
        else:
            new = messages
            if reference is not None:
                note = f"its history is call #{reference[0]}'s first {reference[1]} messages"
            elif before and prints[:1] == before[:1]:
                # the same conversation (its first message), its history rewritten (a summary,
                # a cut): said, since the reader would expect only new messages here; a request
                # that starts anew is a new conversation and needs no note
                note = "the history differs from the previous turn's: every message shown"
        echo = new and new[0]["role"] == "assistant" and previous is not None
        if echo and _same_reply(self.replies.get(previous or 0), new[0]):
            new = new[1:]  # the previous reply, sent back: shown once, as that reply
        self.seen[index] = whole
        self.last[key] = index
        self.replies[index] = reply
        return new, note


def call_view(call: Mapping[str, Any] | None, cap: Callable[[Any], Any]) -> dict[str, Any] | None:
    """One trace call line as the conversation shows it, alone (the first difference's sides).

    Args:
        call: a trace ``call`` line (untrusted), or None for a side without one.
        cap: caps a text (`runner.cli.render.html.episodes.Capper.text`).

    Returns:
        ``{"index", "tool", "turn": bool, "args", "body", "error", "denied", "messages",
        "reply"}`` (texts capped; a turn's messages are its whole request's), or None.
    """
    if not isinstance(call, Mapping):
        return None
    tool = str(call.get("tool") or "?")
    turn = tool in ("model", "user")
    error = call.get("error") if isinstance(call.get("error"), Mapping) else None
    meta = call.get("meta") if isinstance(call.get("meta"), Mapping) else None
    view: dict[str, Any] = {"index": call.get("index"), "tool": tool, "turn": turn}
    body = call.get("body") if call.get("body_encoding") != "base64" else None
    if turn:
        request = _mapping(call.get("request"))
        api = call.get("api") if isinstance(call.get("api"), str) else None
        reply = reply_of(body if isinstance(body, str) else None, role=tool)
        view["messages"] = [capped_message(m, cap) for m in request_messages(request, api)]
        view["reply"] = capped_message(reply, cap) if reply else None
    else:
        view["args"] = cap(call.get("args"))
        view["denied"] = denial(error, meta)
    if not (turn and view["reply"]) and isinstance(call.get("body"), str):
        view["body"] = cap(call.get("body"))
    if error:
        view["error"] = {"class": str(error.get("class")), "message": cap(error.get("message"))}
    return view


def capped_message(message: Message, cap: Callable[[Any], Any]) -> dict[str, Any]:
    """``message`` with its texts (text, each tool call's arguments) passed through ``cap``."""
    shown: dict[str, Any] = {"role": message["role"], "text": cap(message["text"])}
    if message.get("ref"):
        shown["ref"] = message["ref"]
    if message.get("tool_calls"):
        shown["tool_calls"] = [
            {"name": c["name"], "arguments": cap(c["arguments"])} for c in message["tool_calls"]
        ]
    return shown
