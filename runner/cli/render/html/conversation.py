"""An episode as a conversation: each turn's new messages and its reply, a refusal's reason.

A model turn's request holds the whole conversation so far (or its new messages after a
``messages_from`` reference); showing each request whole repeats every earlier message.
`History` remembers each conversation's previous request (a fingerprint per message) so each
turn shows only the messages new since that turn of the same conversation (the provider role
and the step: each agent step talks to its model on its own), and drops the assistant message
that merely repeats the previous reply. `call_view` shows one call alone (reproduce's first
difference); `denial` reads a policy refusal. The messages come from
`runner.cli.render.html.messages`; every value is untrusted text, capped by the caller.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.cli.render.html.messages import Message, reply_of, request_messages

__all__ = ["History", "call_view", "capped_message", "denial"]


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
        request = call["request"] if isinstance(call.get("request"), Mapping) else {}
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
