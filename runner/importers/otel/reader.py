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
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.importers.imported import ImportSource, agent_shape
from runner.importers.openai_messages import read_tools_file
from runner.importers.otel.explain import Explain
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
from runner.importers.source import RECORDED_USER, SourceRun, derive_id
from runner.importers.toolset import ImportedTool, as_tool_id, check_tool_id

__all__ = ["read_otel"]

log = get_logger(__name__)

MAX_SESSION_MODEL_CALLS = 1000
"""Model calls a session may have. The trace itself grows linearly (history by reference,
docs/trace-format.md), but every model call's *resolved* request holds the conversation so
far, and `reproduce` matches (and hands its sandbox) whole requests: a larger session is
skipped with a warning naming it, its first span and file."""


_FORBIDDEN = re.compile(r"[^A-Za-z0-9_.-]")


def _found(explain: Explain) -> str:
    """The span families the files held, for the error that says nothing was importable."""
    seen: Counter[str] = Counter()
    for counts in (*explain.read.values(), *explain.ignored.values()):
        seen.update(counts)
    return ", ".join(f"{k} {v}" for k, v in seen.most_common(8)) or "none"


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


def _items(paths: Sequence[Path], notes: Notes, explain: Explain) -> Iterator[Any]:
    for path in paths:
        yield from read_file(path, notes, explain)


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
    explain = Explain()
    files = [str(p) for p in paths]
    collecting = gc.isenabled()
    gc.disable()  # millions of long-lived small objects: generation scans would dominate
    try:
        sessions = build_sessions(_items(paths, notes, explain), notes, explain)
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
        units = _units(session)
        for unit in units:  # ids in order, parents first
            if len(unit.model_calls) > MAX_SESSION_MODEL_CALLS:
                first = unit.model_calls[0].spans[0]
                notes.add(
                    f"{first.file}: session {unit.session.kind} {unit.session.key} (first model "
                    f"span {first.span_id}, trace {first.trace_id}): {len(unit.model_calls)} "
                    f"model calls, more than the {MAX_SESSION_MODEL_CALLS} a session may have: "
                    "skipped"
                )
                continue
            unit.run_id = derive_id(unit.session.key, ids)
        built: dict[int, SourceRun] = {}
        for unit in reversed(units):  # sub-agents first: their parents link to their runs
            if unit.run_id is None:
                continue
            try:
                built[id(unit)] = _run(unit, tools, notes, explain)
            except InputError as exc:  # one malformed session does not hide the others
                notes.add(f"session {unit.session.kind} {unit.session.key} skipped: {exc}")
                unit.run_id = None
        runs.extend(built[id(u)] for u in units if id(u) in built)
    if not runs:
        why = "; ".join(notes.all()[-3:])
        raise InputError(
            "no agent session: no span of a known family is a model or tool call (spans "
            f"found: {_found(explain)})" + (f"; warnings: {why}" if why else ""),
            file=", ".join(files),
        )
    names = ", ".join(Path(f).name for f in files)[:200]
    shape = agent_shape(
        _workflow_name(stem), f"OpenTelemetry traces ({names})", runs, RECORDED_USER
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
        explain=explain.as_dict(),
    )


@dataclass
class _Unit:
    """One run to write: a session, or a sub-agent's conversation inside a tool call."""

    session: Session
    parent: _Unit | None = None
    tool: ToolExec | None = None
    children: list[_Unit] = field(default_factory=list)
    run_id: str | None = None

    @property
    def model_calls(self) -> list[LogicalCall]:
        return [i for i in self.session.items if isinstance(i, LogicalCall)]


def _concurrent_agents(session: Session) -> list[Session] | None:
    """The session split per agent when sibling agents ran at the same time, else None.

    Items are grouped by the agent span nearest above them. Agents that ran one after the
    other (a transfer, turns of one conversation) stay one conversation, which replays as one;
    agents whose calls overlap in time (a parallel fan-out) would interleave their turns into
    one conversation that cannot replay (a model turn before the previous one's tool results):
    each becomes a session of its own (key ``<key>/<agent>.<agent span id>``).
    """
    groups: dict[str, list[LogicalCall | ToolExec]] = {}
    names: dict[str, str | None] = {}
    for item in session.items:
        agent_id, name = item.agent if item.agent is not None else ("", None)
        groups.setdefault(agent_id, []).append(item)
        names[agent_id] = name
    if len(groups) < 2:
        return None
    spans = sorted(
        (min(i.start for i in items), max(i.end for i in items)) for items in groups.values()
    )
    if all(spans[k][1] <= spans[k + 1][0] for k in range(len(spans) - 1)):
        return None  # one after the other
    failed = session.error_span.span_id if session.error_span is not None else None
    out = []
    for agent_id, items in groups.items():
        label = f"{names[agent_id] or 'agent'}.{agent_id}" if agent_id else "agent"
        own = failed is None or failed == agent_id or failed not in groups
        out.append(
            Session(
                session.kind,
                f"{session.key}/{label}",
                items=items,
                traces=list(dict.fromkeys(_span_of(i).trace_id for i in items)),
                error=session.error if own else None,
                error_span=session.error_span if own else None,
                agents=[n for n in (names[agent_id],) if n],
            )
        )
    return out


def _span_of(item: LogicalCall | ToolExec) -> Any:
    return item.spans[0] if isinstance(item, LogicalCall) else item.span


def _units(session: Session) -> list[_Unit]:
    """The session and, depth first, every sub-agent that ran inside one of its tool calls.

    A tool call inside which a model call ran is an agent called as a tool: the model and
    tool calls directly inside its span are that agent's own conversation, a run of its own
    (session kind ``subagent``, key ``<parent key>/<tool>.<span id>``). Sibling agents that
    ran at the same time are split first (`_concurrent_agents`).
    """
    split = _concurrent_agents(session)
    if split is not None:
        return [u for part in split for u in _units(part)]
    root = _Unit(session)
    out = [root]
    stack = [root]
    while stack:
        unit = stack.pop()
        for item in unit.session.items:
            if not isinstance(item, ToolExec) or not item.is_subagent:
                continue
            name = item.info.name or "tool"
            child = _Unit(
                Session(
                    "subagent",
                    f"{unit.session.key}/{name}.{item.span.span_id}",
                    items=sorted(item.children, key=lambda i: (i.start, _order(i))),
                    traces=[item.span.trace_id],
                    error=item.error,
                    error_span=item.error_span,
                    agents=list(dict.fromkeys(item.agents)),
                ),
                parent=unit,
                tool=item,
            )
            unit.children.append(child)
            out.append(child)
            stack.append(child)
    return out


def _order(item: LogicalCall | ToolExec) -> int:
    return item.spans[0].order if isinstance(item, LogicalCall) else item.span.order


def _first_span(session: Session) -> Any:
    item = next((i for i in session.items if isinstance(i, LogicalCall)), session.items[0])
    return item.spans[0] if isinstance(item, LogicalCall) else item.span


def _run(unit: _Unit, tools: _Tools, notes: Notes, explain: Explain) -> SourceRun:
    session = unit.session
    links = {c.tool.span.span_id: c.run_id for c in unit.children if c.tool and c.run_id}
    assembler = Assembler(session, notes, links)
    assembler.run()
    first_span = _first_span(session)
    first = next((i for i in session.items if isinstance(i, LogicalCall)), None)
    file = first_span.file
    messages = session_messages(assembler, file)  # raises before anything of the session is kept
    defined = []
    for tool in tool_defs_of(session):
        tool_id = as_tool_id(tool.name)
        if tool_id is None:
            notes.add(f"{file}: {place(first_span)}: a tool definition without a name: left out")
            continue
        if tool_id != tool.name:
            notes.add(
                f"{file}: {place(first_span)}: tool {tool.name!r} is written as tool id "
                f"{tool_id!r} (calls and spans alike)"
            )
        defined.append(ToolDef(tool_id, tool.description, tool.parameters))
    for tool in defined:
        tools.add(tool, f"{file}: {place(first_span)}")
    called = [c for m in messages for c in (*m.tool_calls, *([m.call] if m.call else []))]
    for call in called:
        description = assembler.descriptions.get(call.name, "")
        tools.add(ToolDef(call.name, description, None), f"{file}: {place(first_span)}")
    # the tools the requests offered; without definitions in the telemetry, those of --tools
    session_tools = [d.name for d in defined] or list(tools.from_file)
    session_tools += [c.name for c in called if c.name not in session_tools]
    request_tools = tuple(tools.by_id[n].openai_tool or {} for n in dict.fromkeys(session_tools))
    nested = [c for i in session.items if isinstance(i, ToolExec) for c in i.nested_calls]
    assert unit.run_id is not None
    run_id = unit.run_id
    alias = first.info.request_model if first is not None else None
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
    if unit.parent is not None and unit.tool is not None:
        meta["parent_run"] = unit.parent.run_id
        meta["parent_call"] = {"span_id": unit.tool.span.span_id, "tool": unit.tool.info.name}
    if assembler.skipped_tools:
        meta["tool_spans_not_calls"] = assembler.skipped_tools
        explain.note(
            file,
            "tool spans that are no new call (a repeat of answered calls, no name)",
            assembler.skipped_tools,
        )
    if first is None:
        notes.add(
            f"{file}: session {session.kind} {session.key}: tool calls but no model call: "
            "imported as unpaired tool calls (no model turn to replay)"
        )
    info = first.info if first is not None else None
    inputs = info.input if info is not None else None
    earlier = [m for m in inputs or [] if m.role not in ("system", "developer")][:-1]
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
        system=info.system if info is not None else None,
        user_system=RECORDED_USER,
        simulated_user=user_turns,
        workflow_model={"provider": "openai", "name": alias} if alias else {"provider": "replay"},
        request_tools=request_tools,
        extra_tokens=tokens_of(nested),
    )
