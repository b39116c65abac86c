"""Episodes for the HTML report: a trace read as a stream, kept as small, capped JSON.

A trace may hold up to the policy's ``max_calls`` call lines and ``max_trace_mb`` of text, and
a report may show hundreds of episodes; the page must stay small enough to open (bench/: a
200-episode report under 5 MB). So a trace is read record by record (`TraceLines`, the
reader's own rules: strict JSON, bounded lines) and nothing of a call is kept but what the page
shows, each text capped:

- a field (arguments, request, body, error message) keeps at most `FIELD_CHARS` characters;
- an episode keeps `EPISODE_CHARS` characters of field text at full size, then each further
  field at most `SPENT_CHARS`, and past `EPISODE_HARD_CHARS` in all none (only its length); at
  most `CALLS_SHOWN` calls and `OUTBOUND_SHOWN` destinations.

A model or user turn is also read as a conversation (`runner.cli.render.html.conversation`):
the messages new since its conversation's previous turn and its reply, capped first (they are
what the page shows); its raw request and body, shown on demand as the call's raw JSON, take
what the episode's budget has left.

Every cut is said: a capped text is ``{"t": kept, "n": characters in all}`` (``n`` absent when
whole) and the page prints "truncated"; an episode says how many calls it did not keep.
Everything here comes from a trace and is untrusted: it is data for the template (autoescaped)
and for the page's script (serialised with jinja2's ``tojson``, rendered with ``textContent``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.cli.render.episode import DIVERGENCES_SHOWN
from runner.cli.render.html.conversation import History, capped_message, denial
from runner.cli.render.html.messages import reply_of, request_messages
from runner.errors import InputError
from runner.tracetools.reader import CallRecord, EndRecord, RunRecord, TraceLines

__all__ = [
    "CALLS_SHOWN",
    "EPISODE_CHARS",
    "EPISODE_HARD_CHARS",
    "FIELD_CHARS",
    "Capper",
    "read_episode",
    "source_text",
]

FIELD_CHARS = 2_000
EPISODE_CHARS = 8_000
SPENT_CHARS = 80
EPISODE_HARD_CHARS = 12_000
CALLS_SHOWN = 200
OUTBOUND_SHOWN = 50
STDERR_LINES = 20

# How a call was answered (the trace's ``source``), in the reviewer's words.
SOURCES = {
    "executed": "executed",
    "observation": "served from recording (task observation)",
    "trace": "served from recording (trace)",
    "provider": "model provider",
}


def source_text(source: str | None) -> str:
    """The trace's ``source`` of a call as the page says it."""
    if source is None:
        return "unknown"
    return SOURCES.get(source, source)


@dataclass
class Capper:
    """Caps texts for one episode: `FIELD_CHARS` each, `EPISODE_CHARS` in all, then less.

    Attributes:
        left: characters of field text the episode may still keep at full size.
        used: characters kept so far.
    """

    left: int = EPISODE_CHARS
    used: int = 0

    def text(self, value: Any) -> dict[str, Any] | None:
        """``{"t": text}`` or ``{"t": kept, "n": length}``; None for None.

        Non-strings are shown as indented JSON (keys sorted).
        """
        if value is None:
            return None
        text = (
            value
            if isinstance(value, str)
            else json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)
        )
        full, spent = self.left > 0, self.used < EPISODE_HARD_CHARS
        cap = FIELD_CHARS if full else SPENT_CHARS if spent else 0
        shown = text[:cap]
        self.left -= len(shown)
        self.used += len(shown)
        return {"t": shown} if len(shown) == len(text) else {"t": shown, "n": len(text)}


def _usage(usage: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    if not isinstance(usage, Mapping):
        return None, None

    def number(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return number("prompt_tokens"), number("completion_tokens")


def _body_usage(body: str | None) -> Mapping[str, Any] | None:
    """``usage`` of a raw model response body (bounded: bodies are at most 1 MiB)."""
    if not body or len(body) > 1 << 20:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else None


def _conversation(record: CallRecord, history: History, cap: Capper) -> dict[str, Any]:
    """A provider turn as the conversation shows it: its new messages and its reply."""
    body = record.body if record.body_encoding != "base64" else None
    reply = reply_of(body, role=record.tool)
    messages = request_messages(record.request or {}, record.api)
    ref = record.messages_from
    key = f"{record.tool}/{record.step_id}"
    new, note = history.turn(
        record.index, key, messages, (ref.call, ref.count) if ref else None, reply
    )
    conversation: dict[str, Any] = {
        "messages": [capped_message(m, cap.text) for m in new],
        "reply": capped_message(reply, cap.text) if reply else None,
    }
    if note:
        conversation["note"] = note
    return conversation


def _call(
    record: CallRecord, cap: Capper, history: History, clock_start: float | None
) -> dict[str, Any]:
    call: dict[str, Any] = {
        "index": record.index,
        "step": record.step_id,
        "tool": record.tool,
        "effect": record.effect,
        "source": record.source,  # the page says it in words (SOURCES, the same table)
        "duration_s": record.duration_s,
    }
    if record.clock is not None and clock_start is not None:
        call["at_s"] = round(record.clock - clock_start, 6)
    if record.is_provider_call:
        # the conversation first: it is what the page shows; the raw request and body after it
        # take what the episode's budget has left (`Capper`)
        spent = cap.used >= EPISODE_HARD_CHARS  # every text empty: the raw lengths say it
        conversation = _conversation(record, history, cap)  # in the history either way
        if not spent:
            call["conversation"] = conversation
        tokens_in, tokens_out = _usage(record.usage or _body_usage(record.body))
        call.update(
            kind="turn",
            model=record.model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            request=cap.text(record.request),
        )
    else:
        call.update(kind="tool", args=cap.text(record.args))
        error = record.error
        call["denied"] = denial(
            {"class": error.class_, "message": error.message} if error else None, record.meta
        )
    call = {k: v for k, v in call.items() if v is not None}
    if record.body is not None:
        body = record.body
        if record.body_encoding == "base64":
            body = f"(base64, {len(body)} characters) {body}"
        call["body"] = cap.text(body)
        if record.truncated:
            call["body_truncated_at_record"] = record.original_length
    if record.error is not None:
        call["error"] = {"class": record.error.class_, "message": cap.text(record.error.message)}
    return call


def _end(end: EndRecord, cap: Capper) -> dict[str, Any]:
    failure = end.failure.model_dump(mode="json", exclude_none=True) if end.failure else None
    meter = end.meter.model_dump(mode="json", exclude_none=True) if end.meter else None
    outbound = [o.model_dump(mode="json", exclude_none=True) for o in end.outbound]
    return {
        "status": end.status,
        "exit_code": end.exit_code,
        "failure": failure,
        "failure_signature": end.failure_signature,
        "error": (
            {"class": end.error.class_, "message": cap.text(end.error.message)}
            if end.error is not None
            else None
        ),
        "divergences": [
            {
                "kind": str(d.get("kind")),
                "index": d.get("index"),
                "tool": str(d.get("tool")),
                "message": cap.text(str(d.get("message"))),
            }
            for d in (end.divergences or [])[:DIVERGENCES_SHOWN]
            if isinstance(d, dict)
        ],
        "reason": cap.text(end.reason),
        "output": cap.text(end.output),
        "not_run": list(end.not_run),
        "outbound": outbound[:OUTBOUND_SHOWN],
        "outbound_count": len(outbound) + (end.outbound_dropped or 0),
        "meter": meter,
        "stderr_tail": cap.text("\n".join((end.stderr_tail or [])[-STDERR_LINES:]) or None),
    }


def _run(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "task_id": run.task_id,
        "workflow": f"{run.workflow.name}@{run.workflow.version}",
        "purpose": run.purpose,
        "backend": run.backend,
        "clock_start": run.clock.start,
    }


# The record of a trace that could not be read (``error`` says why): every key present.
EMPTY: dict[str, Any] = {
    "run": None,
    "calls": [],
    "calls_total": 0,
    "calls_omitted": 0,
    "end": None,
    "problems": [],
    "tokens_in": 0,
    "tokens_out": 0,
    "usd": None,
}


def read_episode(
    path: str | Path,
    *,
    usd_per_turn: Sequence[float | None] = (),
    calls_shown: int = CALLS_SHOWN,
) -> dict[str, Any]:
    """Read one trace into the page's episode record, streaming, every text capped.

    Args:
        path: the trace file.
        usd_per_turn: USD the ledger charged for each model/user turn, in order, when known.
        calls_shown: calls kept at most (the rest are counted).

    Returns:
        ``{"run", "calls": [...], "calls_total", "calls_omitted", "end" | None, "problems",
        "tokens_in", "tokens_out", "usd", "timing"}`` (``timing``: calls with a recorded
        duration and their seconds summed, ``model_calls``/``model_s`` for model and user
        turns, ``tool_calls``/``tool_s`` for tools); each call has its ``duration_s`` and
        ``at_s`` (its clock reading less the run's clock start), a turn its ``conversation``
        (`runner.cli.render.html.conversation`), a tool call ``denied`` when the policy
        refused it; an unreadable trace gives `EMPTY` with ``error``.
    """
    cap = Capper()
    history = History()
    calls: list[dict[str, Any]] = []
    turns = 0
    spent = {"turn": [0, 0.0], "tool": [0, 0.0]}  # calls, seconds
    try:
        with open(path, "rb") as stream:
            lines = TraceLines(stream, file=str(path))
            for _lineno, record in lines:
                if isinstance(record, CallRecord) and record.duration_s is not None:
                    kind = spent["turn" if record.is_provider_call else "tool"]
                    kind[0] += 1
                    kind[1] += record.duration_s
                if isinstance(record, CallRecord) and len(calls) < calls_shown:
                    start = lines.run.clock.start if lines.run is not None else None
                    call = _call(record, cap, history, start)
                    if call["kind"] == "turn":
                        call["usd"] = usd_per_turn[turns] if turns < len(usd_per_turn) else None
                        turns += 1
                    calls.append(call)
    except (OSError, InputError) as exc:
        return {**EMPTY, "error": str(exc)}
    assert lines.run is not None  # the iteration raises without one
    turn_calls = [c for c in calls if c["kind"] == "turn"]
    known_usd = [c["usd"] for c in turn_calls if c.get("usd") is not None]
    return {
        "run": _run(lines.run),
        "calls": calls,
        "calls_total": lines.calls,
        "calls_omitted": lines.calls - len(calls),
        "end": _end(lines.end, cap) if lines.end is not None else None,
        "problems": [p.message for p in lines.problems],
        "tokens_in": sum(c.get("tokens_in") or 0 for c in turn_calls),
        "tokens_out": sum(c.get("tokens_out") or 0 for c in turn_calls),
        "usd": sum(known_usd) if known_usd else None,
        "timing": {
            "model_calls": spent["turn"][0],
            "model_s": round(spent["turn"][1], 6),
            "tool_calls": spent["tool"][0],
            "tool_s": round(spent["tool"][1], 6),
        },
    }
