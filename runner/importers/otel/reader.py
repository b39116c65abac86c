"""Sessions → source runs: the conversation of each session, its tools, and the import source.

A session's items (logical model calls and tool calls, in start order) become one
conversation (`runner.importers.source` shapes, built into a trace by
`runner.importers.conversation`):

- the first model call's last user message is the task input (``{"message": ...}``); a later
  user message is a simulated-user turn only where the conversation waits for the user (the
  previous model call gave a final answer) and its text differs from the last user text;
  user-role messages a framework inserts inside a tool loop (ADK's "For context:") are not
  turns. Without captured input, a new trace after a final answer counts as a user turn whose
  text is missing;
- each logical model call is a model turn: its first output message (text, tool calls), its
  usage, its response model id (``model_source: response``; only a requested model is the
  config alias), its span start as clock and span duration;
- a tool span answers the model's tool call with its id, else the first open call of its
  name (name and order); a tool span the model's output does not show is added to that
  output only when the output was not captured (marked ``tool_calls_from_spans``), otherwise
  ignored with a warning; an open call with no tool span takes its result from the next model
  call's input (a ``tool`` message with its id, else by position);
- a session whose agent or root span failed ends ``failed`` with that error (at the last call
  when that call failed with the same class).

Nothing is invented: contents that were not captured stay None and are counted missing; tool
call lines carry no schema hash (OTel records none), model bodies are the reconstructed
message (``raw_io: false``), never an HTTP body.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from runner.domain.ids import IdSet
from runner.errors import InputError
from runner.importers.openai_messages import read_tools_file
from runner.importers.otel.messages import Msg, ToolDef, tool_def
from runner.importers.otel.sessions import (
    LogicalCall,
    Session,
    ToolExec,
    build_sessions,
    tool_defs_of,
)
from runner.importers.otel.shapes import Notes, read_file
from runner.importers.otel.values import json_value
from runner.importers.output import ImportSource, WorkflowShape
from runner.importers.source import (
    SourceMessage,
    SourceRun,
    SourceToolCall,
    derive_id,
    parse_arguments,
)
from runner.importers.toolset import TOOL_ID, ImportedTool, check_tool_id

__all__ = ["read_otel"]

log = structlog.get_logger(__name__)

MAX_SESSION_MODEL_CALLS = 1000
"""Model calls a session may have. Every model call line holds the whole conversation so far
(the request `reproduce` matches), so a trace grows with the square of its turns: a larger
session is skipped with a warning naming it, its first span and file."""
_USER_NOTE = "the recorded user: turns are served from the trace (the source has no instructions)"


@dataclass
class _Call:
    id: str | None
    name: str
    arguments: Any
    args_known: bool
    from_span: bool = False
    result: SourceMessage | None = None


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


def _seconds(ns: int | None) -> float | None:
    return ns / 1e9 if ns is not None else None


def _duration(start: int | None, end: int | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return (end - start) / 1e9


def _place(span: Any) -> str:
    return f"{span.where} (span {span.span_id})"


def _last_user(messages: list[Msg] | None) -> Msg | None:
    if not messages:
        return None
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    users = [m for m in messages[last_assistant + 1 :] if m.role == "user"]
    return users[-1] if users else None


class _Assembler:
    def __init__(self, session: Session, notes: Notes) -> None:
        self.session = session
        self.notes = notes
        self.turns: list[_Turn] = []
        self.first_user: _Turn | None = None
        self.last_user_text: str | None = None
        self.descriptions: dict[str, str] = {}

    def last_assistant(self) -> _Turn | None:
        return next((t for t in reversed(self.turns) if t.role == "assistant"), None)

    def run(self) -> None:
        for item in self.session.items:
            if isinstance(item, LogicalCall):
                self.model(item)
            else:
                self.tool(item)

    def model(self, call: LogicalCall) -> None:
        info, span = call.info, call.spans[0]
        previous = self.last_assistant()
        if previous is not None:
            self._results_from_input(previous, info.input or [])
        waiting = previous is None or not previous.calls
        if waiting:
            user = _last_user(info.input)
            if previous is None:
                text = user.text if user is not None else None
                self.first_user = _Turn("user", text, user is not None and user.known, _place(span))
                self.last_user_text = text
            elif user is not None and user.known and user.text != self.last_user_text:
                self.turns.append(
                    _Turn("user", user.text, True, _place(span), clock=_seconds(span.start_ns))
                )
                self.last_user_text = user.text
            elif (user is None or not user.known) and previous.trace != span.trace_id:
                self.turns.append(
                    _Turn("user", None, False, _place(span), clock=_seconds(span.start_ns))
                )
        out = info.output
        turn = _Turn(
            "assistant",
            out.text if out is not None else None,
            out is not None and out.known,
            _place(span),
            call=call,
            trace=span.trace_id,
            clock=_seconds(span.start_ns),
        )
        if out is not None:
            for c in out.tool_calls:
                turn.calls.append(
                    _Call(c.id, c.name, c.arguments, out.known and c.arguments is not None)
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
        span, info = item.span, item.info
        turn = self.last_assistant()
        name = info.name
        if name is None:
            self.notes.add(f"{span.file}: {_place(span)}: tool span without a tool name: ignored")
            return
        if turn is None:
            self.notes.add(
                f"{span.file}: {_place(span)}: tool {name!r} ran before any model call of its "
                "session (not a model's tool call): ignored"
            )
            return
        open_calls = [c for c in turn.calls if c.result is None]
        chosen = None
        if info.call_id is not None:
            chosen = next((c for c in open_calls if c.id == info.call_id), None)
        if chosen is None:
            chosen = next(
                (
                    c
                    for c in open_calls
                    if c.name == name and (c.id is None or info.call_id is None)
                ),
                None,
            )
        if chosen is None and _aggregate_of_answered(info.result, turn):
            return  # ADK's "(merged tools)" span: the parallel calls' results once more
        if chosen is None:
            if turn.known and turn.call is not None and turn.call.info.output is not None:
                self.notes.add(
                    f"{span.file}: {_place(span)}: tool {name!r} answers no open tool call of "
                    f"the model turn before it ({turn.where}): ignored"
                )
                return
            if not TOOL_ID.match(name):
                self.notes.add(
                    f"{span.file}: {_place(span)}: tool span named {name!r}, which cannot be a "
                    "tool id: ignored"
                )
                return
            chosen = _Call(info.call_id, name, info.arguments, info.args_known, from_span=True)
            turn.calls.append(chosen)
        if info.description:
            self.descriptions.setdefault(name, info.description)
        chosen.id = chosen.id or info.call_id
        if not chosen.args_known and info.args_known:
            chosen.arguments, chosen.args_known = info.arguments, True
        meta: dict[str, Any] = {"span_id": span.span_id, "trace_id": span.trace_id}
        if item.nested_calls:
            meta["nested_model_calls"] = len(item.nested_calls)
            meta["nested_tokens"] = list(_tokens(item.nested_calls))
        if item.nested_tools:
            meta["nested_tool_calls"] = item.nested_tools
        error = info.error
        chosen.result = SourceMessage(
            role="tool",
            content=info.result if info.result_known else None,
            where=_place(span),
            tool_call_id=chosen.id,
            error=error is not None,
            clock=_seconds(span.start_ns),
            duration_s=_duration(span.start_ns, span.end_ns),
            error_class=error[0] if error else None,
            error_message=error[1] if error else None,
            meta=meta,
        )


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


def _tokens(calls: Sequence[LogicalCall]) -> tuple[int, int]:
    return sum(c.tokens[0] for c in calls), sum(c.tokens[1] for c in calls)


def _source_call(call: _Call, file: str, where: str) -> SourceToolCall:
    name = check_tool_id(call.name, file=file, field=where)
    if not call.args_known:
        return SourceToolCall(call.id, name, {}, "", args_ok=False)
    args, text, ok = parse_arguments(call.arguments)
    return SourceToolCall(call.id, name, args, text, ok)


def _messages(a: _Assembler, file: str) -> list[SourceMessage]:
    out: list[SourceMessage] = []
    if a.first_user is not None:
        out.append(SourceMessage(role="user", content=a.first_user.text, where=a.first_user.where))
    for turn in a.turns:
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
                duration_s=_duration(call.spans[0].start_ns, call.spans[0].end_ns),
                meta=meta,
            )
        )
        for c in turn.calls:
            if c.result is not None:
                out.append(c.result)
    return out


_FORBIDDEN = re.compile(r"[^A-Za-z0-9_.-]")


def _workflow_name(stem: str) -> str:
    name = _FORBIDDEN.sub("_", stem).strip("._-") or "otel"
    return f"{name[:100]}-agent"


class _Tools:
    def __init__(self, notes: Notes) -> None:
        self.by_id: dict[str, ImportedTool] = {}
        self.notes = notes

    def add(self, tool: ToolDef, where: str) -> None:
        check_tool_id(tool.name, field=where)
        known = self.by_id.get(tool.name)
        if known is not None and known.schema is not None:
            if tool.parameters is not None and tool.parameters != known.schema:
                self.notes.add(
                    f"{where}: tool {tool.name!r} defined with another schema: first kept"
                )
            return
        if known is not None and tool.parameters is None:
            return
        description = tool.description or (known.description if known else "")
        self.by_id[tool.name] = ImportedTool(
            id=tool.name,
            description=description,
            schema=tool.parameters,
            label=None,
            openai_tool=_openai(tool.name, description, tool.parameters),
        )


def _openai(name: str, description: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema or {}},
    }


def _items(paths: Sequence[Path], notes: Notes) -> Iterator[Any]:
    for path in paths:
        yield from read_file(path, notes)


def read_otel(paths: Sequence[Path], tools_path: Path | None = None) -> ImportSource:
    """Read OpenTelemetry files into an `ImportSource`: one run per agent session.

    Args:
        paths: the telemetry files (shapes in `runner.importers.otel.shapes`).
        tools_path: ``--tools``: tool definitions (OpenAI function format) used where the
            telemetry carries none.

    Raises:
        InputError: an unreadable file, invalid or truncated JSON, a tool name that cannot be
            a tool id (file, line or span named), or no session with a model call.
    """
    notes = Notes()
    files = [str(p) for p in paths]
    collecting = gc.isenabled()
    gc.disable()  # millions of long-lived small objects: generation scans would dominate
    try:
        sessions = build_sessions(_items(paths, notes), notes)
    finally:
        if collecting:
            gc.enable()
    tools = _Tools(notes)
    if tools_path is not None:
        for i, raw in enumerate(read_tools_file(tools_path)):
            found = tool_def(raw)
            if found is None:
                raise InputError("not a tool definition", file=str(tools_path), field=f"[{i}]")
            tools.add(found, f"{tools_path}[{i}]")
    stem = Path(files[0]).stem.split(".")[0] if files else "otel"
    ids = IdSet("run id")
    runs: list[SourceRun] = []
    for session in sessions:
        model_calls = [i for i in session.items if isinstance(i, LogicalCall)]
        if not model_calls:
            notes.add(
                f"session {session.kind} {session.key}: tool calls but no model call: skipped"
            )
            continue
        if len(model_calls) > MAX_SESSION_MODEL_CALLS:
            first = model_calls[0].spans[0]
            notes.add(
                f"{first.file}: session {session.kind} {session.key} (first model span "
                f"{first.span_id}, trace {first.trace_id}): {len(model_calls)} model calls, more "
                f"than the {MAX_SESSION_MODEL_CALLS} a session may have (each call's line holds "
                "the whole conversation so far): skipped"
            )
            continue
        try:
            runs.append(_run(session, tools, ids, notes))
        except InputError as exc:  # one malformed session does not hide the others
            notes.add(f"session {session.kind} {session.key} skipped: {exc}")
    if not runs:
        why = "; ".join(notes.all()[-3:])
        raise InputError(
            "no agent session with a model call (no GenAI or OpenInference model spans)"
            + (f"; warnings: {why}" if why else ""),
            file=", ".join(files),
        )
    shape = WorkflowShape(
        name=_workflow_name(stem),
        version="1",
        header=(
            f"Imported from OpenTelemetry traces ({', '.join(Path(f).name for f in files)[:200]}): "
            "the generic tool-calling agent.\nTools are manifest-only (no code): every call is "
            "served from a recording."
        ),
        model=None,
        input_template="${task.message}",
        user=_USER_NOTE if any(r.simulated_user for r in runs) else None,
        user_turn_limit=True,
        max_turns=max(1, max(sum(m.role == "assistant" for m in r.messages) for r in runs)),
    )
    log.info("otel_sessions_read", files=len(files), sessions=len(runs), warnings=len(notes.items))
    return ImportSource(
        kind="otel",
        backend="import:otel",
        file=", ".join(files),
        tools=list(tools.by_id.values()),
        runs=runs,
        shape=shape,
        notes=notes.all(),
        call_schema_hashes=False,
    )


def _run(session: Session, tools: _Tools, ids: IdSet, notes: Notes) -> SourceRun:
    assembler = _Assembler(session, notes)
    assembler.run()
    first = next(i for i in session.items if isinstance(i, LogicalCall))
    file = first.spans[0].file
    messages = _messages(assembler, file)  # raises before anything of the session is kept
    defined = []
    for tool in tool_defs_of(session):
        if TOOL_ID.match(tool.name) and tool.name not in ("model", "user", "workflow"):
            defined.append(tool)
        else:
            notes.add(
                f"{file}: {_place(first.spans[0])}: tool definition {tool.name!r} cannot be a "
                "tool id: left out"
            )
    for tool in defined:
        tools.add(tool, f"{file}: {_place(first.spans[0])}")
    for msg in messages:
        for call in msg.tool_calls:
            description = assembler.descriptions.get(call.name, "")
            tools.add(ToolDef(call.name, description, None), f"{file}: {msg.where}")
    session_tools = [d.name for d in defined]
    session_tools += [c.name for m in messages for c in m.tool_calls if c.name not in session_tools]
    request_tools = tuple(tools.by_id[n].openai_tool or {} for n in dict.fromkeys(session_tools))
    nested = [c for i in session.items if isinstance(i, ToolExec) for c in i.nested_calls]
    run_id = derive_id(session.key, ids)
    alias = first.info.request_model
    starts = [
        s.start_ns
        for i in session.items
        for s in (i.spans if isinstance(i, LogicalCall) else [i.span])
        if s.start_ns is not None
    ]
    user_turns = sum(m.role == "user" for m in messages) > 1
    failure = None
    if session.error is not None:
        failure = session.error
    first_user = assembler.first_user
    meta: dict[str, Any] = {
        "source": "otel",
        "session_key": {"kind": session.kind, "value": session.key},
        "traces": session.traces,
        "files": sorted(
            {
                s.file
                for i in session.items
                for s in (i.spans if isinstance(i, LogicalCall) else [i.span])
            }
        ),
        "logical_model_calls": sum(isinstance(i, LogicalCall) for i in session.items) + len(nested),
        "nested_model_calls": len(nested),
    }
    if session.agents:
        meta["agents"] = session.agents
    if session.error_span is not None:
        meta["failed_span"] = session.error_span.span_id
    return SourceRun(
        run_id=run_id,
        task_id=run_id,
        task_input={"message": first_user.text}
        if first_user is not None and first_user.known
        else {},
        messages=tuple(messages),
        file=file,
        first_user_is_input=first_user is not None,
        model_settings={"model": alias or "replay"},
        user_settings={"model": alias or "replay"},
        model_alias=alias,
        user_alias=alias,
        failure=failure,
        clock_start=_seconds(min(starts)) if starts else None,
        meta=meta,
        system=first.info.system,
        user_system=_USER_NOTE,
        simulated_user=user_turns,
        workflow_model={"provider": "openai", "name": alias} if alias else {"provider": "replay"},
        request_tools=request_tools,
        extra_tokens=_tokens(nested),
    )
