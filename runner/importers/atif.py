"""Import Harbor ATIF trajectories (Agent Trajectory Interchange Format): one run each.

ATIF (Harbor, github.com/laude-institute/harbor ``docs/rfcs/0001-trajectory-format.md``,
versions ATIF-v1.0 to v1.7) is one JSON object per trajectory: ``schema_version``,
``session_id``, ``agent`` ``{name, version, model_name?}``, ``steps`` and optional ``notes``,
``final_metrics``, ``extra``. A step has ``step_id``, ``source`` (``system``, ``user`` or
``agent``), ``message``, optional ``timestamp`` (ISO 8601), and for agent steps
``model_name``, ``reasoning_content``, ``tool_calls`` (``{tool_call_id, function_name,
arguments}``), ``observation`` (``{results: [{source_call_id, content,
subagent_trajectory_ref}]}``) and ``metrics`` (``prompt_tokens``, ``completion_tokens``, ...).

Accepted files: one trajectory, a JSON list of them, or JSONL (one a line). Mapping (call
shapes in `runner.importers.conversation`):

- run and task id from ``session_id``; the first ``system`` step is the workflow's system
  prompt; the first ``user`` step the task input ``{"message": ...}``; later user steps are
  simulated-user turns;
- each ``agent`` step is a model turn: ``message`` as its text (``reasoning_content`` is not
  the answer: dropped, counted in ``meta``), its ``tool_calls``; usage from ``metrics``; the
  step's ``model_name`` as the model id it recorded (the agent's ``model_name`` alone is only
  the configured alias, ``model_source: config``); the step's timestamp as its clock;
- each observation result answers the call its ``source_call_id`` names, in the step's
  order; a result that names no call of its step is not a tool result (an action outside
  tool calling, a system event): left out and counted in ``--explain``; a result with
  ``extra.is_error`` true or ``extra.status`` ``error`` is a failed call;
- ``subagent_trajectory_ref`` links the tool call to the sub-agent's own run
  (``meta.subagent_run``) when that trajectory is imported with it (else its session id is
  kept as ``meta.subagent_session``);
- verdict: a numeric ``extra.reward`` below 1 is the source's ``failed`` verdict
  (``task_failed``); ATIF records no other outcome.

Nothing is invented: the raw HTTP body, a model id read from a response and clock readings
the trajectory lacks stay absent and are counted, so that ``lint`` reports them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet
from runner.errors import InputError
from runner.importers.imported import ImportSource, agent_shape
from runner.importers.openai_messages import read_tools_file
from runner.importers.source import (
    RECORDED_USER,
    SourceMessage,
    SourceRun,
    SourceToolCall,
    as_object,
    conversation_run,
    derive_id,
    iso_seconds,
    load_json,
    parse_arguments,
)
from runner.importers.toolset import ImportedTool, as_tool_id, check_tool_id, tool_from_openai
from runner.inputfile import read_input
from runner.trace.strictjson import StrictJSONError

__all__ = ["read_atif"]


_VERSION = re.compile(r"^ATIF-v1\.\d+\Z")


def _documents(path: Path) -> list[tuple[int | None, str, Any]]:
    """``(line, where, trajectory)`` of a file: one object, a list, or JSONL."""
    file = str(path)
    raw = read_input(path, "import source")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=file) from None
    try:
        doc = load_json(text, file=file)
    except StrictJSONError:
        doc = None
    if isinstance(doc, dict):
        return [(None, "trajectory", doc)]
    if isinstance(doc, list):
        return [(None, f"[{i}]", d) for i, d in enumerate(doc)]
    out: list[tuple[int | None, str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((number, "trajectory", load_json(line, file=file, line=number)))
        except StrictJSONError as exc:
            raise InputError(f"invalid JSON: {exc.detail}", file=file, line=number) from None
    return out


def _check(doc: Any, file: str, line: int | None, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise InputError("a trajectory must be an object", file=file, line=line, field=where)
    version = doc.get("schema_version")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise InputError(
            f"schema_version {version!r} is not ATIF-v1.x",
            file=file,
            line=line,
            field=f"{where}.schema_version",
        )
    if not isinstance(doc.get("steps"), list):
        raise InputError("required: a list", file=file, line=line, field=f"{where}.steps")
    return doc


class _Reader:
    """The state of one import: tools, ids, counts of what was left out."""

    def __init__(self, tools_path: Path | None) -> None:
        self.tools: dict[str, ImportedTool] = {}
        if tools_path is not None:
            for i, raw in enumerate(read_tools_file(tools_path)):
                tool = tool_from_openai(raw, file=str(tools_path), field=f"[{i}]")
                self.tools[tool.id] = tool
        self.ids = IdSet("run id")
        self.by_session: dict[str, str] = {}
        self.left_out: dict[str, Counter[str]] = {}

    def run(self, doc: dict[str, Any], file: str, line: int | None, where: str) -> SourceRun:
        """One trajectory as a source run (see the module docstring)."""
        agent = as_object(doc.get("agent"))
        alias = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
        session = str(doc.get("session_id") or f"{Path(file).stem}-{line or 1}")
        run_id = derive_id(f"atif-{session}", self.ids)
        self.by_session.setdefault(session, run_id)
        left = self.left_out.setdefault(file, Counter())
        system = None
        messages: list[SourceMessage] = []
        for i, step in enumerate(doc["steps"]):
            here = f"{where}.steps[{i}]"
            if not isinstance(step, dict):
                raise InputError("a step must be an object", file=file, line=line, field=here)
            source = step.get("source")
            text = step.get("message")
            text = text if isinstance(text, str) else None
            clock = iso_seconds(step.get("timestamp"))
            if source == "system":
                if system is None and not messages:
                    system = text
                else:
                    left["system steps after the start"] += 1
            elif source == "user":
                body = {"message": {"role": "user", "content": text}}
                messages.append(SourceMessage("user", text, here, line, body=body, clock=clock))
            elif source == "agent":
                messages.extend(self._agent(step, here, file, line, clock, left))
            else:
                raise InputError(
                    f"source {source!r} is not system, user or agent",
                    file=file,
                    line=line,
                    field=f"{here}.source",
                )
        extra = as_object(doc.get("extra"))
        reward = extra.get("reward")
        failed = None
        if isinstance(reward, int | float) and not isinstance(reward, bool) and reward < 1:
            failed = f"source verdict: reward {reward}"
        starts = [m.clock for m in messages if m.clock is not None]
        meta: dict[str, Any] = {
            "source": "atif",
            "schema_version": doc.get("schema_version"),
            "session_id": session,
            "agent": {k: agent.get(k) for k in ("name", "version") if k in agent},
        }
        for key in ("final_metrics", "notes"):
            if doc.get(key) is not None:
                meta[key] = doc[key]
        return conversation_run(
            run_id,
            tuple(messages),
            file,
            alias,
            failed_reason=failed,
            clock_start=min(starts) if starts else None,
            meta=meta,
            system=system,
        )

    def _agent(
        self,
        step: dict[str, Any],
        here: str,
        file: str,
        line: int | None,
        clock: float | None,
        left: Counter[str],
    ) -> list[SourceMessage]:
        calls: list[SourceToolCall] = []
        chat_calls = []
        for j, call in enumerate(step.get("tool_calls") or []):
            field = f"{here}.tool_calls[{j}]"
            if not isinstance(call, dict):
                raise InputError("a tool call must be an object", file=file, line=line, field=field)
            raw = call.get("function_name")
            name = check_tool_id(
                as_tool_id(raw) if isinstance(raw, str) else raw,
                file=file,
                line=line,
                field=f"{field}.function_name",
            )
            args, arguments_text, ok = parse_arguments(call.get("arguments"))
            call_id = (
                call.get("tool_call_id") if isinstance(call.get("tool_call_id"), str) else None
            )
            calls.append(SourceToolCall(call_id, name, args, arguments_text, ok))
            chat_calls.append(
                {
                    **({"id": call_id} if call_id else {}),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments_text},
                }
            )
            self.tools.setdefault(name, ImportedTool(name, "", None, None, None))
        text = step.get("message") if isinstance(step.get("message"), str) else None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if chat_calls:
            message["tool_calls"] = chat_calls
        metrics = as_object(step.get("metrics"))
        usage = None
        if "prompt_tokens" in metrics or "completion_tokens" in metrics:
            usage = {
                "prompt_tokens": metrics.get("prompt_tokens"),
                "completion_tokens": metrics.get("completion_tokens"),
            }
        meta: dict[str, Any] = {"step_id": step.get("step_id")}
        if step.get("reasoning_content"):
            meta["reasoning_content_dropped"] = True
        model = step.get("model_name") if isinstance(step.get("model_name"), str) else None
        out = [
            SourceMessage(
                role="assistant",
                content=text,
                where=here,
                line=line,
                tool_calls=tuple(calls),
                body={"message": message},
                usage=usage,
                clock=clock,
                model=model,
                meta=meta,
            )
        ]
        observation = as_object(step.get("observation"))
        ids = {c.id for c in calls if c.id is not None}
        for k, result in enumerate(observation.get("results") or []):
            where = f"{here}.observation.results[{k}]"
            if not isinstance(result, dict) or result.get("source_call_id") not in ids:
                left["observation results tied to no tool call of their step"] += 1
                continue
            out.append(self._result(result, where, line, clock))
        return out

    def _result(
        self, result: dict[str, Any], where: str, line: int | None, clock: float | None
    ) -> SourceMessage:
        extra = as_object(result.get("extra"))
        failed = extra.get("is_error") is True or extra.get("status") == "error"
        content = result.get("content")
        content = content if isinstance(content, str) or content is None else str(content)
        meta: dict[str, Any] = {}
        refs = result.get("subagent_trajectory_ref")
        sessions = [
            str(r.get("session_id"))
            for r in refs or []
            if isinstance(r, dict) and r.get("session_id")
        ]
        if sessions:
            meta["subagent_session"] = sessions
        return SourceMessage(
            role="tool",
            content=content if content is not None else ("" if sessions else None),
            where=where,
            line=line,
            tool_call_id=str(result["source_call_id"]),
            error=failed,
            error_class="ToolError" if failed else None,
            clock=clock,
            meta=meta,
        )


def read_atif(paths: list[Path], tools_path: Path | None = None) -> ImportSource:
    """Read ATIF trajectory files into an `ImportSource`: one run per trajectory.

    Args:
        paths: trajectory files (one object, a list, or JSONL).
        tools_path: ``--tools``: tool definitions (OpenAI function format); ATIF records none.

    Raises:
        InputError: unreadable file, invalid JSON, not ATIF-v1.x, a malformed step (file,
            line and field named), no trajectory at all.
    """
    reader = _Reader(tools_path)
    runs: list[SourceRun] = []
    for path in paths:
        for line, where, doc in _documents(path):
            runs.append(reader.run(_check(doc, str(path), line, where), str(path), line, where))
    if not runs:
        raise InputError("no trajectory", file=", ".join(str(p) for p in paths))
    runs = [_link(run, reader.by_session) for run in runs]
    files = [str(p) for p in paths]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(files[0]).stem).strip("._-")[:100] or "atif"
    shape = agent_shape(
        f"{stem}-agent",
        f"ATIF trajectories ({', '.join(Path(f).name for f in files)[:200]})",
        runs,
        RECORDED_USER,
    )
    explain: dict[str, Any] = {}
    for run in runs:
        entry = explain.setdefault(
            run.file, {"read": Counter(), "ignored": {}, "log_records": {}, "decided": {}}
        )
        entry["read"]["trajectories"] += 1
        for msg in run.messages:
            entry["read"][f"{msg.role} messages"] += 1
    for file, counts in reader.left_out.items():
        entry = explain.setdefault(
            file, {"read": Counter(), "ignored": {}, "log_records": {}, "decided": {}}
        )
        entry["ignored"] = {
            k: {"count": v, "why": "ATIF gives it no tool call"} for k, v in counts.items()
        }
        entry["read"] = dict(entry["read"])
    return ImportSource(
        kind="atif",
        backend="import:atif",
        file=", ".join(files),
        tools=list(reader.tools.values()),
        runs=runs,
        shape=shape,
        explain=explain,
    )


def _link(run: SourceRun, by_session: dict[str, str]) -> SourceRun:
    """The run with each sub-agent reference linked to that trajectory's run, when imported."""
    changed = False
    messages = []
    for msg in run.messages:
        sessions = msg.meta.get("subagent_session") if msg.role == "tool" else None
        if sessions and all(s in by_session for s in sessions):
            linked = [by_session[s] for s in sessions]
            meta = {k: v for k, v in msg.meta.items() if k != "subagent_session"}
            meta["subagent_run"] = linked[0] if len(linked) == 1 else linked
            msg = replace(msg, meta=meta)
            changed = True
        messages.append(msg)
    if not changed:
        return run
    return replace(run, messages=tuple(messages))
