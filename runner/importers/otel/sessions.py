"""Spans → agent sessions: the span tree, logical model calls, tool calls, session keys.

Rules:

- **Roles.** Each span's role (model, tool, agent, ignore) is its classification by the
  conventions table (`runner.importers.otel.conventions`), made when it was read.
- **Tree.** Spans are keyed by (trace id, span id); a second span with the same key is a
  warning (the first is kept). A parent that was never exported, a trace without a root and a
  cycle in parent links are warnings naming span, trace and file; the span whose parent is
  missing (for a cycle: the earliest span of the cycle) becomes a root. Log records attach to
  the span they name; one naming no span attaches to the one model span (of its trace, when
  it names one) that was open at its time, and only when exactly one was: with several open
  at once (concurrent calls) the record is ambiguous, a warning, never guessed.
- **Logical model calls.** A model span and the model spans below it, down to the next tool
  or agent span, are *one* call (a framework wrapper and the provider span inside it; the
  Claude SDK's span and the Claude API's span under it). Its tokens are the provider's: a
  span counts its model children's usage when any has one, else its own (`_usage`).
  Contents come from the innermost span that captured them.
- **Nesting.** A tool span's own children belong to that tool call (`ToolExec.children`):
  when a model call ran inside it, it is an agent called as a tool, whose own conversation
  becomes a run of its own (`runner.importers.otel.reader`); its calls and tokens are also
  counted in the session's meter, not turned into turns of the parent's conversation.
- **Failures.** A failed span fails its session only when it is the agent's own step: an
  agent span, or a root span of no known family (the application's entry point). Transport
  spans (HTTP, RPC, databases, a2a) and model or tool spans never do: a tool error handed
  back to the model is an observation. A failed agent span inside a tool call is that
  sub-agent's failure.
- **Sessions.** An item (logical call or tool call) belongs to the outermost
  ``gen_ai.conversation.id`` above it, else the outermost session attribute (``session.id``,
  ``langfuse.session.id``, ADK's ``gcp.vertex.agent.session_id``), else its trace id; a
  trace-keyed item of a trace whose other items carry exactly one key joins that key. Items
  are ordered by start time (then file order), so a conversation spread over several traces
  stays one session.

The walk is iterative: a session of 100,000 spans needs no recursion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from runner.importers.otel.explain import Explain
from runner.importers.otel.messages import PLACEHOLDERS, Msg, ToolDef
from runner.importers.otel.modelspans import ModelCall, model_call
from runner.importers.otel.shapes import LogRecord, Notes, Span
from runner.importers.otel.spantree import Key, attach_logs, index_spans, span_tree, where
from runner.importers.otel.toolspans import ToolCall, Warn, span_error, tool_call

__all__ = ["LogicalCall", "Session", "ToolExec", "build_sessions"]

_SESSION_ATTRS = ("session.id", "langfuse.session.id", "gcp.vertex.agent.session_id")


@dataclass
class LogicalCall:
    """One logical model call: its spans (outermost first) and what they say, merged."""

    spans: list[Span]
    parents: dict[str, str | None]
    info: ModelCall = field(default_factory=ModelCall)
    tokens: tuple[int, int] = (0, 0)
    has_tokens: bool = False
    agent: tuple[str, str | None] | None = None  # nearest agent span above: (id, name)
    prompt: str | None = None  # the user prompt its agent span recorded (Claude Code)

    @property
    def end(self) -> int:
        """End of the outermost span (ns; its start when unknown)."""
        return self.spans[0].end_ns or self.start

    @property
    def start(self) -> int:
        """Start of the outermost span (ns; 0 when unknown)."""
        return self.spans[0].start_ns or 0


@dataclass
class ToolExec:
    """One tool span, and what ran inside it.

    Attributes:
        span, info: the span and what it records.
        children: the model calls and tool calls directly inside it (a sub-agent's own
            conversation when it holds a model call), in start order.
        error: the failure of an agent span inside it (the sub-agent's own failure).
        agents: names of the agents that ran inside it.
    """

    span: Span
    info: ToolCall
    children: list[LogicalCall | ToolExec] = field(default_factory=list)
    error: tuple[str, str] | None = None
    error_span: Span | None = None
    agents: list[str] = field(default_factory=list)
    agent: tuple[str, str | None] | None = None  # nearest agent span above: (id, name)

    @property
    def start(self) -> int:
        """Start of the span (ns; 0 when unknown)."""
        return self.span.start_ns or 0

    @property
    def end(self) -> int:
        """End of the span (ns; its start when unknown)."""
        return self.span.end_ns or self.start

    @property
    def nested_calls(self) -> list[LogicalCall]:
        """Every logical model call inside this tool call, at any depth."""
        out: list[LogicalCall] = []
        stack: list[LogicalCall | ToolExec] = list(reversed(self.children))
        while stack:
            item = stack.pop()
            if isinstance(item, LogicalCall):
                out.append(item)
            else:
                stack.extend(reversed(item.children))
        return out

    @property
    def nested_tools(self) -> int:
        """Tool calls inside this tool call, at any depth."""
        count = 0
        stack: list[LogicalCall | ToolExec] = list(self.children)
        while stack:
            item = stack.pop()
            if isinstance(item, ToolExec):
                count += 1
                stack.extend(item.children)
        return count

    @property
    def is_subagent(self) -> bool:
        """A model call ran inside it: an agent called as a tool, with its own conversation."""
        return bool(self.nested_calls)


@dataclass
class Session:
    """One agent session: its key and its items in order."""

    kind: str
    key: str
    items: list[LogicalCall | ToolExec] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    error: tuple[str, str] | None = None
    error_span: Span | None = None
    agents: list[str] = field(default_factory=list)


def _own_keys(span: Span) -> tuple[str | None, str | None]:
    conv = span.attrs.get("gen_ai.conversation.id")
    conv = conv if isinstance(conv, str) and conv.strip() else None
    sess = None
    for attr in _SESSION_ATTRS:
        value = span.attrs.get(attr)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            sess = str(value)
            break
    return conv, sess


def _usage(call: LogicalCall, info: dict[str, ModelCall]) -> tuple[int, int, bool]:
    """``(in, out, found)`` tokens of a logical call: the provider's count, not a wrapper's.

    Each span counts its model children's usage when any of them has one (the provider span
    inside a framework wrapper; retries inside a wrapper add up), else its own: an outer
    wrapper's figure, which some frameworks accumulate over the whole agent run (5-10x the
    provider's), is used only when no span inside it says. Iterative (hostile nesting).
    """
    kids: dict[str, list[str]] = defaultdict(list)
    for span in call.spans[1:]:
        parent = call.parents.get(span.span_id)
        if parent is not None:
            kids[parent].append(span.span_id)
    totals: dict[str, tuple[int, int, bool]] = {}
    for span in reversed(call.spans):  # pre-order reversed: children before their parent
        inner = [totals[k] for k in kids.get(span.span_id, []) if totals[k][2]]
        if inner:
            totals[span.span_id] = (sum(i[0] for i in inner), sum(i[1] for i in inner), True)
            continue
        own = info[span.span_id]
        found = own.tokens_in is not None or own.tokens_out is not None
        totals[span.span_id] = (own.tokens_in or 0, own.tokens_out or 0, found)
    return totals[call.spans[0].span_id]


def _merge(call: LogicalCall, warn: Warn) -> None:
    infos = {s.span_id: model_call(s, warn) for s in call.spans}
    inner_first = [infos[s.span_id] for s in reversed(call.spans)]
    merged = ModelCall()
    for info in inner_first:
        if info.input is not None and (
            merged.input is None or (not _has_content(merged.input) and _has_content(info.input))
        ):
            merged.input = info.input
        if info.output is not None and (
            merged.output is None or (not _msg_content(merged.output) and _msg_content(info.output))
        ):
            merged.output = info.output
            merged.content_source = info.content_source
        merged.system = merged.system or info.system
        merged.request_model = merged.request_model or info.request_model
        merged.response_model = merged.response_model or info.response_model
        names = {t.name for t in merged.tools}
        merged.tools.extend(t for t in info.tools if t.name not in names)
    merged.error = infos[call.spans[0].span_id].error
    if call.prompt is not None and not _has_content(merged.input):
        # the spans of the call hold no conversation (Claude Code's llm_request): the prompt
        # its agent span recorded is the user's message it answered
        merged.input = [*(merged.input or []), Msg("user", call.prompt)]
    tin, tout, found = _usage(call, infos)
    merged.tokens_in, merged.tokens_out = (tin, tout) if found else (None, None)
    call.info, call.tokens, call.has_tokens = merged, (tin, tout), found


def _has_content(messages: object) -> bool:
    """Captured conversation beyond the system prompt (a system-only input holds none)."""
    return isinstance(messages, list) and any(
        _msg_content(m) and getattr(m, "role", "") not in ("system", "developer") for m in messages
    )


def _msg_content(msg: object) -> bool:
    return bool(
        getattr(msg, "known", False)
        and (getattr(msg, "text", None) or getattr(msg, "tool_calls", None))
    )


@dataclass
class _Frame:
    span: Span
    conv: str | None
    sess: str | None
    group: LogicalCall | None
    owner: ToolExec | None
    agent: tuple[str, str | None] | None = None
    prompt: str | None = None


def build_sessions(
    items: Iterable[Span | LogRecord], notes: Notes, explain: Explain | None = None
) -> list[Session]:
    """Group spans and log records into sessions (see the module docstring).

    Args:
        items: spans and log records of every input file, in file order.
        notes: receives every warning (span id, trace and file named).
        explain: counts what was decided about spans (wrappers merged), when given.

    Returns:
        The sessions in order of their first item; sessions without any model or tool call
        are left out (a warning says how many traces held none).
    """

    def warn(span: Span, attr: str, problem: str) -> None:
        notes.add(f"{where(span)}: attribute {attr} {problem}")

    spans, logs = index_spans(items, notes)
    attach_logs(spans, logs, notes)
    roots, children = span_tree(spans, notes)
    keyed: list[tuple[Key, LogicalCall | ToolExec, str]] = []
    calls: list[LogicalCall] = []
    errors: list[tuple[Key | None, Span, str]] = []
    agents: dict[str, list[str]] = defaultdict(list)
    stack = [_Frame(r, None, None, None, None) for r in reversed(roots)]
    while stack:
        frame = stack.pop()
        span = frame.span
        conv, sess = _own_keys(span)
        conv, sess = frame.conv or conv, frame.sess or sess
        key: Key = (
            ("conversation", conv)
            if conv
            else ("session", sess)
            if sess
            else ("trace", span.trace_id)
        )
        kind = span.role
        group, owner, agent, prompt = frame.group, frame.owner, frame.agent, frame.prompt
        if kind == "model":
            if group is None:
                group = LogicalCall([span], {span.span_id: None}, agent=agent, prompt=prompt)
                calls.append(group)
                if owner is not None:
                    owner.children.append(group)
                else:
                    keyed.append((key, group, span.trace_id))
            else:
                group.parents[span.span_id] = _parent_in(group, span)
                group.spans.append(span)
        elif kind == "tool":
            group = None
            tool = ToolExec(span, tool_call(span, warn), agent=agent)
            if owner is not None:
                owner.children.append(tool)
            else:
                keyed.append((key, tool, span.trace_id))
            owner = tool
        elif kind == "agent":
            group = None
            name = _agent_name(span)
            agent = (span.span_id, name)
            prompt = _agent_prompt(span) or prompt
            if owner is None and name is not None:
                agents[_key_text(key)].append(name)
            elif owner is not None and name is not None:
                owner.agents.append(name)
        if span.error and _own_step(span):
            if owner is None:
                errors.append((key, span, span.trace_id))
            elif owner.error is None and kind == "agent":
                owner.error, owner.error_span = span_error(span), span
        for child in reversed(children.get((span.trace_id, span.span_id), [])):
            stack.append(_Frame(child, conv, sess, group, owner, agent, prompt))
    for call in calls:
        _merge(call, warn)
        if explain is not None and len(call.spans) > 1:
            explain.note(
                call.spans[0].file,
                "model spans merged into the call around them (wrapper and provider, SDK and API)",
                len(call.spans) - 1,
            )
    sessions = _sessions(keyed, errors, agents, notes)
    for span in spans.values():  # what the conventions said is read: free the raw attributes
        span.attrs, span.events, span.logs = {}, [], []
    return sessions


def _agent_name(span: Span) -> str | None:
    for key in ("gen_ai.agent.name", "agent.name", "agent_name"):
        name = span.attrs.get(key)
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


def _agent_prompt(span: Span) -> str | None:
    """The user's prompt an agent span recorded (Claude Code's ``claude_code.interaction``)."""
    value = span.attrs.get("user_prompt")
    if isinstance(value, str) and value.strip() and value.strip() not in PLACEHOLDERS:
        return value
    return None


def _own_step(span: Span) -> bool:
    """A span whose failure is the agent's own: an agent span, or the application's root.

    Transport spans (HTTP, RPC, databases, agent-to-agent plumbing), model calls and tool
    calls never fail the run by themselves: a tool error handed back to the model is an
    observation, and kagent's routine ``GET /api/tasks/<id>`` 404 is not the agent failing.
    A root span of no known family is the application's own entry point.
    """
    if span.role == "agent":
        return True
    return span.parent_id is None and span.family.startswith("unknown:")


def _parent_in(group: LogicalCall, span: Span) -> str | None:
    return span.parent_id if span.parent_id in group.parents else group.spans[0].span_id


def _key_text(key: Key) -> str:
    return f"{key[0]}:{key[1]}"


def _sessions(
    keyed: list[tuple[Key, LogicalCall | ToolExec, str]],
    errors: list[tuple[Key | None, Span, str]],
    agents: dict[str, list[str]],
    notes: Notes,
) -> list[Session]:
    by_trace: dict[str, set[Key]] = defaultdict(set)
    for key, _, trace in keyed:
        if key[0] != "trace":
            by_trace[trace].add(key)
    sessions: dict[Key, Session] = {}
    for key, item, trace in keyed:
        if key[0] == "trace" and len(by_trace.get(trace, ())) == 1:
            key = next(iter(by_trace[trace]))
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = Session(key[0], key[1])
        session.items.append(item)
        if trace not in session.traces:
            session.traces.append(trace)
    for session in sessions.values():
        session.items.sort(key=lambda i: (i.start, _order(i)))
        session.agents = list(dict.fromkeys(agents.get(_key_text((session.kind, session.key)), [])))
    for err_key, span, trace in sorted(errors, key=lambda e: (e[1].start_ns or 0, e[1].order)):
        target = sessions.get(err_key) if err_key is not None else None
        if target is None:
            target = next((s for s in sessions.values() if trace in s.traces), None)
        if target is not None and target.error is None:
            target.error = span_error(span)
            target.error_span = span
    return sorted(sessions.values(), key=lambda s: (s.items[0].start, _order(s.items[0])))


def _order(item: LogicalCall | ToolExec) -> int:
    return item.spans[0].order if isinstance(item, LogicalCall) else item.span.order


def tool_defs_of(session: Session) -> list[ToolDef]:
    """Every tool definition the session's model calls carried, first definition wins."""
    seen: dict[str, ToolDef] = {}
    for item in session.items:
        if isinstance(item, LogicalCall):
            for tool in item.info.tools:
                seen.setdefault(tool.name, tool)
    return list(seen.values())
