"""Sessions → source runs and the import source: `read_otel`, the entry point.

Each session (`runner.importers.otel.sessions`) becomes one `runner.importers.source.SourceRun`:
its conversation (`runner.importers.otel.turns`), its tools (definitions the telemetry carried,
``--tools``, names seen in calls; first definition wins, a different one later is a warning),
the requested model as the workflow's alias, the earliest span start as clock start, and its
failure: a session whose agent or root span failed ends ``failed`` with that error (at the
last call when that call failed with the same class). A session that cannot be built, or has
more than `MAX_SESSION_MODEL_CALLS` model calls, is skipped with a warning naming it; the
import fails only when no session is left.

Nothing is invented: contents that were not captured stay None and are counted missing; tool
call lines carry no schema hash (OTel records none), model bodies are the reconstructed
message (``raw_io: false``), never an HTTP body.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.importers.imported import ImportSource, WorkflowShape
from runner.importers.openai_messages import read_tools_file
from runner.importers.otel.files import read_file
from runner.importers.otel.messages import ToolDef, tool_def
from runner.importers.otel.sessions import (
    LogicalCall,
    Session,
    ToolExec,
    build_sessions,
    tool_defs_of,
)
from runner.importers.otel.shapes import Notes
from runner.importers.otel.turns import Assembler, place, seconds, session_messages, tokens_of
from runner.importers.source import (
    SourceRun,
    derive_id,
)
from runner.importers.toolset import TOOL_ID, ImportedTool, check_tool_id

__all__ = ["read_otel"]

log = get_logger(__name__)

MAX_SESSION_MODEL_CALLS = 1000
"""Model calls a session may have. Every model call line holds the whole conversation so far
(the request `reproduce` matches), so a trace grows with the square of its turns: a larger
session is skipped with a warning naming it, its first span and file."""
_USER_NOTE = "the recorded user: turns are served from the trace (the source has no instructions)"


_FORBIDDEN = re.compile(r"[^A-Za-z0-9_.-]")


def _workflow_name(stem: str) -> str:
    name = _FORBIDDEN.sub("_", stem).strip("._-") or "otel"
    return f"{name[:100]}-agent"


class _Tools:
    def __init__(self, notes: Notes) -> None:
        self.by_id: dict[str, ImportedTool] = {}
        self.notes = notes
        self.from_file: list[str] = []

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
            tools.from_file.append(found.name)
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
    assembler = Assembler(session, notes)
    assembler.run()
    first = next(i for i in session.items if isinstance(i, LogicalCall))
    file = first.spans[0].file
    messages = session_messages(assembler, file)  # raises before anything of the session is kept
    defined = []
    for tool in tool_defs_of(session):
        if TOOL_ID.match(tool.name) and tool.name not in ("model", "user", "workflow"):
            defined.append(tool)
        else:
            notes.add(
                f"{file}: {place(first.spans[0])}: tool definition {tool.name!r} cannot be a "
                "tool id: left out"
            )
    for tool in defined:
        tools.add(tool, f"{file}: {place(first.spans[0])}")
    for msg in messages:
        for call in msg.tool_calls:
            description = assembler.descriptions.get(call.name, "")
            tools.add(ToolDef(call.name, description, None), f"{file}: {msg.where}")
    # the tools the requests offered; without definitions in the telemetry, those of --tools
    session_tools = [d.name for d in defined] or list(tools.from_file)
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
    earlier = [m for m in first.info.input or [] if m.role not in ("system", "developer")][:-1]
    if earlier:  # the first request already carried a history the export does not hold
        meta["history_before_first_call"] = len(earlier)
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
        clock_start=seconds(min(starts)) if starts else None,
        meta=meta,
        system=first.info.system,
        user_system=_USER_NOTE,
        simulated_user=user_turns,
        workflow_model={"provider": "openai", "name": alias} if alias else {"provider": "replay"},
        request_tools=request_tools,
        extra_tokens=tokens_of(nested),
    )
