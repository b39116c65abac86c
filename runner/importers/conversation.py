"""One recorded conversation (OpenAI-style messages) → trace lines and task observations.

Source adapters (`runner.importers.tau2`, `runner.importers.openai_messages`) read their files
into `SourceRun` values; `build_run` turns each into the lines of one trace of this project
(docs/internals.md, docs/trace.schema.json) plus the task's observations (SPEC.md call
records). The shapes it writes are the contract with ``reproduce``:

- model turn (``tool: "model"``): ``request = {"model", "messages", "tools"?, **settings}``,
  built as `runner.runtime.steps.agent` builds it so that ``reproduce`` can match it: ``messages`` =
  ``system`` (the workflow's system prompt), the fixed messages, then the turns in order;
  ``tools`` = the run's offered tools exactly as the runtime offers them
  (`runner.runtime.registry.RuntimeTool.function_spec` of their manifest entries: the function
  name is `runner.sdk.function_name` of the id, dots as ``__``), never a tool the source did
  not define (it is the workflow's ``unlisted_tools``); ``meta.request_tools_rewritten`` says
  when that differs from the tools as the source wrote them;
  an assistant message is the provider body's own ``message`` verbatim (normalised to
  ``{"role", "content", "tool_calls"?}`` when the source has no body); a tool result is
  ``{"role": "tool", "tool_call_id": <the call's id>, "content": <the source's content,
  verbatim>}``. ``body`` is what the source has (τ²: the provider's *choice*
  object; chat datasets: ``{"message": ...}``), never the HTTP body: ``raw_io: false`` and
  ``meta.body_shape: "choice"``. ``model`` is the configured alias with ``model_source:
  "config"`` (absent when the source has none). The request is a reconstruction
  (``meta.request_reconstructed: true``): sources keep the messages, not the request sent.
- simulated-user turn (``tool: "user"``): ``request = {"model", "messages", **settings}`` with
  ``messages`` = the user's instructions as system message (``SourceRun.user_system``, else
  the task input as canonical JSON), then the non-empty assistant/user texts so far with
  roles swapped, tool traffic left out; the body is the simulator's own reply.
- tool call (``tool`` = the function name): ``args`` parsed from the JSON arguments text;
  ``body`` = the tool message's content (a tool-level value, ``raw_io: false``); a result the
  source marks as an error also carries ``error: {"class": "ToolError", "message"}``.
- assistant messages that were not model calls (no usage, no provider body) before the first
  call are the workflow's fixed messages, not calls.
- ``end``: ``succeeded`` (exit 0), or ``failed`` with the source's verdict: failure = (last
  call index, ``workflow``, ``task_failed``, 1) and its `failure_signature`. ``output`` is the
  content of the last model turn, as the runtime's agent step returns it (None after a turn
  of tool calls only). The outbound log and its coverage are absent: the source did not
  record destinations.

Tool results are matched to calls *by position*: a tool message answers the earliest
unanswered call of the latest assistant message with the same id, or, if none has that id, the
earliest unanswered one. Ids may be reused by later calls. Nothing is invented: a missing value
stays absent and is counted in `RunCounts.missing`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.errors import InputError
from runner.importers.source import SourceMessage, SourceRun, SourceToolCall
from runner.sdk import canonical_json
from runner.trace.format import (
    TRACE_VERSION,
    encode_body,
    episode_exit_code,
    failure_signature,
)

__all__ = [
    "STEP_ID",
    "BuiltRun",
    "RunCounts",
    "ToolIndex",
    "build_run",
]

STEP_ID = "agent"
TOOL_ERROR_CLASS = "ToolError"
FAILED_CLASS = "task_failed"


@dataclass(frozen=True)
class ToolIndex:
    """What the builder needs of the manifest: effects, schema hashes, offered function specs.

    Attributes:
        effects: tool id -> effect class.
        hashes: tool id -> schema hash.
        specs: tool id -> the tool as the runtime offers it to a model (function format).
    """

    effects: Mapping[str, str]
    hashes: Mapping[str, str]
    specs: Mapping[str, dict[str, Any]]
    call_schema_hashes: bool = True  # False: the source records none at call time (missing)


@dataclass
class RunCounts:
    """Counts of one run for the import report."""

    calls: Counter[str] = field(default_factory=Counter)
    tool_errors: int = 0
    fixed_messages: int = 0
    id_mismatches: int = 0
    missing: Counter[str] = field(default_factory=Counter)


@dataclass
class BuiltRun:
    """The result of `build_run`: trace lines, observations, fixed messages and counts."""

    calls: list[dict[str, Any]]
    end: dict[str, Any]
    observations: list[dict[str, Any]]
    fixed_messages: list[dict[str, Any]]
    counts: RunCounts


def _text(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _assistant_chat(msg: SourceMessage) -> dict[str, Any]:
    """The assistant message as the next request carries it.

    The provider body's own ``message`` verbatim when the source has one (what an agent loop
    appends after a turn), else ``{"role", "content", "tool_calls"?}`` built from the source.
    """
    if isinstance(msg.body, dict) and isinstance(msg.body.get("message"), dict):
        verbatim = dict(msg.body["message"])
        verbatim.setdefault("role", "assistant")
        return verbatim
    out: dict[str, Any] = {"role": "assistant", "content": msg.content}
    if msg.tool_calls:
        calls = []
        for call in msg.tool_calls:
            entry: dict[str, Any] = {"id": call.id} if call.id is not None else {}
            entry.update(
                type="function", function={"name": call.name, "arguments": call.arguments_text}
            )
            calls.append(entry)
        out["tool_calls"] = calls
    return out


@dataclass
class _Pending:
    call: SourceToolCall
    message: SourceMessage
    answered: bool = False


class _Builder:
    def __init__(
        self, run: SourceRun, tools: ToolIndex, system: str | None, offered: Sequence[str]
    ) -> None:
        self.run = run
        self.tools = tools
        self.offered = [tools.specs[t] for t in offered]
        self.rewritten = run.request_tools is not None and canonical_json(
            list(run.request_tools)
        ) != canonical_json(self.offered)
        self.history: list[dict[str, Any]] = []
        if system is not None:
            self.history.append({"role": "system", "content": system})
        self.calls: list[dict[str, Any]] = []
        self.observations: list[dict[str, Any]] = []
        self.fixed: list[dict[str, Any]] = []
        self.pending: list[_Pending] = []
        self.counts = RunCounts()
        self.tokens = [0, 0]
        self.output: Any = None

    def _call(
        self, record: dict[str, Any], clock: float | None, duration_s: float | None = None
    ) -> dict[str, Any]:
        line: dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": len(self.calls),
            "step_id": STEP_ID,
        }
        line.update(record)
        if clock is not None:
            line["clock"] = clock
        else:
            self.counts.missing["call.clock"] += 1
        if duration_s is not None:
            line["duration_s"] = duration_s
        else:
            self.counts.missing["call.duration_s"] += 1
        self.calls.append(line)
        return line

    def _user_view(self) -> list[dict[str, Any]]:
        """The conversation as the simulated user sees it.

        Its instructions as the system message, then the text messages with roles swapped
        (tool traffic left out), as `runner.runtime.steps.agent` builds a user turn.
        """
        system = self.run.user_system
        if system is None:
            system = canonical_json(self.run.task_input)
        seen: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for m in self.history:
            if m.get("role") in ("assistant", "user") and m.get("content"):
                swapped = "user" if m["role"] == "assistant" else "assistant"
                seen.append({"role": swapped, "content": m["content"]})
        return seen

    def provider_turn(self, role: str, msg: SourceMessage) -> None:
        if role == "model":
            request: dict[str, Any] = dict(self.run.model_settings)
            request["messages"] = [dict(m) for m in self.history]
            if self.offered:
                request["tools"] = [dict(t) for t in self.offered]
            alias = self.run.model_alias
        else:
            request = dict(self.run.user_settings)
            request["messages"] = self._user_view()
            alias = self.run.user_alias
        record: dict[str, Any] = {"tool": role, "request": request}
        meta: dict[str, Any] = {"request_reconstructed": True, **msg.meta}
        if role == "model" and self.rewritten:
            meta["request_tools_rewritten"] = True
        if msg.body is not None:
            record.update(encode_body(json.dumps(msg.body, ensure_ascii=False)))
            meta["body_shape"] = "choice"
        else:
            record["body"] = None
            self.counts.missing[f"{role}.body"] += 1
        self.counts.missing[f"{role}.raw_http_body"] += 1
        if msg.model is not None:
            record.update(model=msg.model, model_source="response")
        else:
            if alias is not None:
                record.update(model=alias, model_source="config")
            self.counts.missing[f"{role}.model_id_from_response"] += 1
        if msg.usage is not None:
            record["usage"] = msg.usage
            for slot, key in ((0, "prompt_tokens"), (1, "completion_tokens")):
                value = msg.usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.tokens[slot] += value
        record["source"] = "provider"
        record["raw_io"] = False
        record["meta"] = meta
        self._call(record, msg.clock, msg.duration_s)
        self.counts.calls[role] += 1

    def tool_result(self, msg: SourceMessage) -> None:
        open_calls = [p for p in self.pending if not p.answered]
        if not open_calls:
            raise InputError(
                "tool result with no unanswered tool call before it",
                file=self.run.file,
                line=msg.line,
                field=msg.where,
            )
        chosen = next((p for p in open_calls if p.call.id == msg.tool_call_id), None)
        by_position = chosen is None
        if chosen is None:
            chosen = open_calls[0]
            self.counts.id_mismatches += 1
        chosen.answered = True
        self._tool_line(chosen.call, msg, by_position)
        self.history.append(
            {
                "role": "tool",
                "tool_call_id": chosen.call.id,
                "content": msg.content,
            }
        )

    def _tool_line(
        self, call: SourceToolCall, msg: SourceMessage | None, by_position: bool = False
    ) -> None:
        record: dict[str, Any] = {
            "tool": call.name,
            "effect": self.tools.effects.get(call.name, "unsafe"),
            "args": call.args,
        }
        observation: dict[str, Any] = {"tool": call.name, "args": call.args}
        text = _text(msg.content) if msg is not None else None
        body = encode_body(text) if text is not None else {"body": None}
        record.update(body)
        observation.update(body)
        if text is None:
            self.counts.missing["tool.result" if msg is None else "tool.body"] += 1
        if self.tools.call_schema_hashes:
            record["schema_hash"] = self.tools.hashes[call.name]
        else:
            self.counts.missing["tool.schema_hash"] += 1
        meta: dict[str, Any] = {"call_id": call.id} if call.id is not None else {}
        if not call.args_ok:
            meta["arguments_text"] = call.arguments_text
            self.counts.missing["tool.args_json"] += 1
        if by_position and msg is not None:
            meta["result_id"] = msg.tool_call_id
            meta["matched_by"] = "position"
        if msg is not None and msg.error:
            error = {
                "class": msg.error_class or TOOL_ERROR_CLASS,
                "message": msg.error_message if msg.error_message is not None else (text or ""),
            }
            record["error"] = error
            observation["error"] = error
            self.counts.tool_errors += 1
        record.update(source="executed", raw_io=False)
        if msg is not None:
            meta.update(msg.meta)
        if meta:
            record["meta"] = meta
        self._call(
            record,
            msg.clock if msg is not None else None,
            msg.duration_s if msg is not None else None,
        )
        self.counts.calls["tool"] += 1
        if msg is not None:
            self.observations.append(observation)

    def flush_pending(self) -> None:
        for p in self.pending:
            if not p.answered:
                self._tool_line(p.call, None)
        self.pending = []


def build_run(run: SourceRun, tools: ToolIndex, offered: Sequence[str]) -> BuiltRun:
    """Turn one source run into call lines, an end line and the task's observations.

    Args:
        run: the source run.
        tools: effects, schema hashes and function specs of the manifest's tools.
        offered: ids of the tools the run's model requests list, in order.

    Returns:
        The built run; its ``fixed_messages`` go into the run's workflow (before the first turn).

    Raises:
        InputError: a tool result with no call before it, or a call of a tool that is not in
            ``tools`` (file and field named).
    """
    b = _Builder(run, tools, run.system, offered)
    started = False
    input_taken = not run.first_user_is_input
    for msg in run.messages:
        if msg.role != "tool":
            b.flush_pending()
        if msg.role == "assistant":
            if msg.fixed and not started:
                fixed = {"role": "assistant", "content": msg.content}
                b.fixed.append(fixed)
                b.history.append(fixed)
                b.counts.fixed_messages += 1
                continue
            for call in msg.tool_calls:
                if call.name not in tools.hashes:
                    raise InputError(
                        f"call of tool {call.name!r}, which the toolset lacks",
                        file=run.file,
                        line=msg.line,
                        field=msg.where,
                    )
            b.provider_turn("model", msg)
            started = True
            b.history.append(_assistant_chat(msg))
            b.pending = [_Pending(call, msg) for call in msg.tool_calls]
            b.output = _assistant_chat(msg).get("content")  # the agent step's output rule
        elif msg.role == "user":
            if not input_taken and not started:
                input_taken = True
                b.history.append({"role": "user", "content": msg.content})
                continue
            b.provider_turn("user", msg)
            started = True
            b.history.append({"role": "user", "content": msg.content})
        elif msg.role == "tool":
            b.tool_result(msg)
        else:
            raise InputError(
                f"unknown role {msg.role!r} (system, user, assistant, tool)",
                file=run.file,
                line=msg.line,
                field=f"{msg.where}.role",
            )
    b.flush_pending()
    return BuiltRun(
        calls=b.calls,
        end=_end_line(run, b),
        observations=b.observations,
        fixed_messages=b.fixed,
        counts=b.counts,
    )


def _end_line(run: SourceRun, b: _Builder) -> dict[str, Any]:
    failed = run.failed_reason is not None or run.failure is not None
    status = "failed" if failed else "succeeded"
    code = episode_exit_code(status)
    end: dict[str, Any] = {"v": TRACE_VERSION, "type": "end", "status": status, "exit_code": code}
    if run.failure is not None and run.failed_reason is None:
        cls, message = run.failure
        last = len(b.calls) - 1
        tool = "workflow"
        if b.calls and (b.calls[-1].get("error") or {}).get("class") == cls:
            tool = b.calls[-1]["tool"]
        end["failure"] = {"call_index": last, "tool": tool, "error_class": cls, "exit_code": code}
        end["failure_signature"] = failure_signature(last, tool, cls, code)
        end["error"] = {"class": cls, "message": message}
    elif run.failed_reason is not None:
        last = len(b.calls) - 1
        end["failure"] = {
            "call_index": last,
            "tool": "workflow",
            "error_class": FAILED_CLASS,
            "exit_code": code,
        }
        end["failure_signature"] = failure_signature(last, "workflow", FAILED_CLASS, code)
        end["error"] = {"class": FAILED_CLASS, "message": run.failed_reason}
    else:
        end["failure"] = None
        end["failure_signature"] = None
    end["output"] = b.output
    end["not_run"] = []
    meter: dict[str, Any] = {
        "tokens_in": b.tokens[0] + run.extra_tokens[0],
        "tokens_out": b.tokens[1] + run.extra_tokens[1],
    }
    if run.usd is not None:
        meter["usd"] = run.usd
    end["meter"] = meter
    b.counts.missing["end.outbound"] += 1
    if run.end_meta:
        end["meta"] = dict(run.end_meta)
    return end
