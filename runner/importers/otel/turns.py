"""A session's items → the conversation of its trace (`runner.importers.source` messages).

- the first model call's last user message is the task input (``{"message": ...}``); a later
  user message is a simulated-user turn only where the conversation waits for the user (the
  previous model call gave a final answer) and its text differs from the last user text;
  user-role messages a framework inserts inside a tool loop (ADK's "For context:") are not
  turns. Without captured input, a new trace after a final answer counts as a user turn whose
  text is missing;
- each logical model call is a model turn: its first output message (text, tool calls), its
  usage, its response model id (``model_source: response``; only a requested model is the
  config alias), its span start as clock and span duration;
- an executed tool span is the source of truth for a call: it answers the latest model
  turn's open call with its id, else the first open call of its name (name and order, ids
  or not); a tool span that answers no call is still a tool call, never dropped: it is added
  to that turn's calls (marked ``tool_calls_from_spans``: the model's output did not show it,
  e.g. smolagents' code actions or a framework's own tool), or, before any model call of its
  session, written as a tool call of its own (``meta.unpaired``); ADK's ``(merged tools)``
  span, which repeats answered calls, and a second span of an answered call id are not new
  calls. An open call with no tool span takes its result from the next model call's input (a
  ``tool`` message with its id, else by position);
- tool names that are not tool ids (``Read File``, ``fs/read``) become tool ids the same way
  in the model's calls, the tool spans and the definitions (`as_tool_id`), so they pair;
- a tool call that ran an agent (a model call inside the tool span) links to that
  sub-agent's own run (``meta.subagent_run``; `runner.importers.otel.reader`).

Nothing is invented: contents that were not captured stay None and are counted missing; tool
call lines carry no schema hash (OTel records none), model bodies are the reconstructed
message (``raw_io: false``), never an HTTP body.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runner.importers.otel.messages import Msg
from runner.importers.otel.sessions import LogicalCall, Session, ToolExec
from runner.importers.otel.shapes import Notes
from runner.importers.otel.values import json_value
from runner.importers.source import SourceMessage, SourceToolCall, parse_arguments
from runner.importers.toolset import as_tool_id, check_tool_id

__all__ = ["Assembler", "duration", "place", "seconds", "session_messages", "tokens_of"]


@dataclass
class _Call:
    id: str | None
    name: str
    arguments: Any
    args_known: bool
    from_span: bool = False
    result: SourceMessage | None = None
    unpaired: bool = False


@dataclass
class _Turn:
    role: str
    text: str | None
    known: bool
    where: str
    call: LogicalCall | None = None
    calls: list[_Call] = field(default_factory=list)
    trace: str | None = None
    clock: float | None = None


def seconds(ns: int | None) -> float | None:
    """Epoch nanoseconds as seconds (None stays None)."""
    return ns / 1e9 if ns is not None else None


def duration(start: int | None, end: int | None) -> float | None:
    """Seconds from ``start`` to ``end`` (ns), or None when either is unknown or reversed."""
    if start is None or end is None or end < start:
        return None
    return (end - start) / 1e9


def place(span: Any) -> str:
    """Where a span is, for messages: its place in the file and its id."""
    return f"{span.where} (span {span.span_id})"


def _last_user(messages: list[Msg] | None) -> Msg | None:
    if not messages:
        return None
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    users = [m for m in messages[last_assistant + 1 :] if m.role == "user"]
    return users[-1] if users else None


class Assembler:
    """Walks a session's items in order and keeps its turns (see the module docstring)."""

    def __init__(
        self, session: Session, notes: Notes, subagents: dict[str, str] | None = None
    ) -> None:
        self.session = session
        self.notes = notes
        self.turns: list[_Turn] = []
        self.first_user: _Turn | None = None
        self.last_user_text: str | None = None
        self.descriptions: dict[str, str] = {}
        self.subagents: dict[str, str] = dict(subagents or {})
        self.skipped_tools = 0

    def last_assistant(self) -> _Turn | None:
        """The latest model turn, or None before the first."""
        return next((t for t in reversed(self.turns) if t.role == "assistant"), None)

    def run(self) -> None:
        """Walk every item of the session."""
        for item in self.session.items:
            if isinstance(item, LogicalCall):
                self.model(item)
            else:
                self.tool(item)

    def model(self, call: LogicalCall) -> None:
        """A logical model call: results from its input, a user turn if one, its output."""
        info, span = call.info, call.spans[0]
        previous = self.last_assistant()
        if previous is not None:
            self._results_from_input(previous, info.input or [])
        waiting = previous is None or not previous.calls
        if waiting:
            user = _last_user(info.input)
            if previous is None:
                text = user.text if user is not None else None
                self.first_user = _Turn("user", text, user is not None and user.known, place(span))
                self.last_user_text = text
            elif user is not None and user.known and user.text != self.last_user_text:
                self.turns.append(
                    _Turn("user", user.text, True, place(span), clock=seconds(span.start_ns))
                )
                self.last_user_text = user.text
            elif (user is None or not user.known) and previous.trace != span.trace_id:
                self.turns.append(
                    _Turn("user", None, False, place(span), clock=seconds(span.start_ns))
                )
        out = info.output
        turn = _Turn(
            "assistant",
            out.text if out is not None else None,
            out is not None and out.known,
            place(span),
            call=call,
            trace=span.trace_id,
            clock=seconds(span.start_ns),
        )
        if out is not None:
            for c in out.tool_calls:
                turn.calls.append(
                    _Call(
                        c.id,
                        as_tool_id(c.name) or c.name,
                        c.arguments,
                        out.known and c.arguments is not None,
                    )
                )
        self.turns.append(turn)

    def _results_from_input(self, turn: _Turn, messages: list[Msg]) -> None:
        open_calls = [c for c in turn.calls if c.result is None]
        if not open_calls:
            return
        last_assistant = max(
            (i for i, m in enumerate(messages) if m.role == "assistant"), default=-1
        )
        for msg in messages[last_assistant + 1 :]:
            if msg.role != "tool" or not open_calls:
                continue
            chosen = next(
                (c for c in open_calls if msg.tool_call_id and c.id == msg.tool_call_id), None
            )
            chosen = chosen or open_calls[0]
            open_calls.remove(chosen)
            chosen.result = SourceMessage(
                role="tool",
                content=msg.text,
                where=turn.where,
                tool_call_id=chosen.id,
                meta={"result_from": "next_model_input"},
            )

    def tool(self, item: ToolExec) -> None:
        """An executed tool span: the answer to a call of the latest model turn, or a new call."""
        span, info = item.span, item.info
        name = as_tool_id(info.name) if info.name else None
        turn = self.last_assistant()
        if turn is not None and _aggregate_of_answered(info.result, turn):
            self.skipped_tools += 1
            return  # ADK's "(merged tools)" span: the parallel calls' results once more
        if name is None:
            self.notes.add(f"{span.file}: {place(span)}: tool span without a tool name: ignored")
            self.skipped_tools += 1
            return
        chosen = None
        if turn is not None:
            chosen = _pair(turn, info.call_id, name)
            if (
                chosen is None
                and info.call_id is not None
                and any(c.id == info.call_id and c.result is not None for c in turn.calls)
            ):
                self.notes.add(
                    f"{span.file}: {place(span)}: a second span of tool call {info.call_id!r} "
                    "(already answered): not a new call"
                )
                self.skipped_tools += 1
                return
        if chosen is None:
            chosen = _Call(info.call_id, name, info.arguments, info.args_known, from_span=True)
            if turn is None:  # before any model call: a tool call of its own
                chosen.unpaired = True
                self.turns.append(
                    _Turn("tool", None, True, place(span), calls=[chosen], trace=span.trace_id)
                )
            else:
                turn.calls.append(chosen)
        if info.description:
            self.descriptions.setdefault(name, info.description)
        chosen.id = chosen.id or info.call_id
        if not chosen.args_known and info.args_known:
            chosen.arguments, chosen.args_known = info.arguments, True
        meta: dict[str, Any] = {"span_id": span.span_id, "trace_id": span.trace_id}
        nested = item.nested_calls
        if nested:
            meta["nested_model_calls"] = len(nested)
            meta["nested_tokens"] = list(tokens_of(nested))
        if item.nested_tools:
            meta["nested_tool_calls"] = item.nested_tools
        subagent = self.subagents.get(span.span_id)
        if subagent is not None:
            meta["subagent_run"] = subagent
        if chosen.from_span and turn is not None:
            meta["tool_call_from_span"] = True
        if chosen.unpaired:
            meta["unpaired"] = True
        error = info.error
        chosen.result = SourceMessage(
            role="tool",
            content=info.result if info.result_known else None,
            where=place(span),
            tool_call_id=chosen.id,
            error=error is not None,
            clock=seconds(span.start_ns),
            duration_s=duration(span.start_ns, span.end_ns),
            error_class=error[0] if error else None,
            error_message=error[1] if error else None,
            meta=meta,
        )


def _pair(turn: _Turn, call_id: str | None, name: str) -> _Call | None:
    """The open call of ``turn`` a tool span answers: by id, then by name and order."""
    open_calls = [c for c in turn.calls if c.result is None]
    if call_id is not None:
        found = next((c for c in open_calls if c.id == call_id), None)
        if found is not None:
            return found
    return next((c for c in open_calls if c.name == name), None)


def _aggregate_of_answered(result: str | None, turn: _Turn) -> bool:
    """The result is a list of ``{"id", ...}`` naming only calls of ``turn`` already answered."""
    ok, value = json_value(result)
    answered = {c.id for c in turn.calls if c.result is not None and c.id is not None}
    return bool(
        ok
        and isinstance(value, list)
        and value
        and all(isinstance(v, dict) and v.get("id") in answered for v in value)
    )


def tokens_of(calls: Sequence[LogicalCall]) -> tuple[int, int]:
    """``(in, out)`` tokens of ``calls`` together."""
    return sum(c.tokens[0] for c in calls), sum(c.tokens[1] for c in calls)


def _source_call(call: _Call, file: str, where: str) -> SourceToolCall:
    name = check_tool_id(as_tool_id(call.name) or call.name, file=file, field=where)
    if not call.args_known:
        return SourceToolCall(call.id, name, {}, "", args_ok=False, args_known=False)
    args, text, ok = parse_arguments(call.arguments)
    return SourceToolCall(call.id, name, args, text, ok)


def session_messages(a: Assembler, file: str) -> list[SourceMessage]:
    """The conversation as `runner.importers.source` messages, tool results after each turn.

    Raises:
        InputError: a tool call whose name cannot be a tool id (file and place named).
    """
    out: list[SourceMessage] = []
    if a.first_user is not None:
        out.append(SourceMessage(role="user", content=a.first_user.text, where=a.first_user.where))
    for turn in a.turns:
        if turn.role == "tool":  # executed before any model call: a tool call of its own
            for c in turn.calls:
                if c.result is not None:
                    source = _source_call(c, file, f"{turn.where}.tool")
                    out.append(replace(c.result, call=source))
            continue
        if turn.role == "user":
            body = {"message": {"role": "user", "content": turn.text}} if turn.known else None
            out.append(
                SourceMessage(
                    role="user", content=turn.text, where=turn.where, body=body, clock=turn.clock
                )
            )
            continue
        call = turn.call
        assert call is not None
        calls = [_source_call(c, file, f"{turn.where}.tool_calls") for c in turn.calls]
        meta: dict[str, Any] = {
            "span_ids": [s.span_id for s in call.spans],
            "trace_id": call.spans[0].trace_id,
        }
        if call.info.content_source:
            meta["content_source"] = call.info.content_source
        if call.info.request_model:
            meta["request_model"] = call.info.request_model
        if call.info.error:
            meta["error"] = {"class": call.info.error[0], "message": call.info.error[1]}
        from_spans = any(c.from_span for c in turn.calls)
        body = None
        if turn.known or from_spans:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if calls:
                message["tool_calls"] = [
                    {
                        **({"id": c.id} if c.id is not None else {}),
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_text},
                    }
                    for c in calls
                ]
            body = {"message": message}
            if from_spans:
                meta["tool_calls_from_spans"] = True
            if not turn.known:
                meta["output_text_captured"] = False
        usage = None
        if call.has_tokens:
            usage = {"prompt_tokens": call.tokens[0], "completion_tokens": call.tokens[1]}
        out.append(
            SourceMessage(
                role="assistant",
                content=turn.text,
                where=turn.where,
                tool_calls=tuple(calls),
                body=body,
                usage=usage,
                clock=turn.clock,
                model=call.info.response_model,
                duration_s=duration(call.spans[0].start_ns, call.spans[0].end_ns),
                meta=meta,
            )
        )
        for c in turn.calls:
            if c.result is not None:
                out.append(c.result)
    return out
