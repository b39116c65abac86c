"""The call lines of one imported conversation: model, simulated-user and tool lines.

`LineBuilder` is fed the messages of one `runner.importers.source.SourceRun` in order by
`runner.importers.conversation.build_run`, whose docstring states the shapes written (the
contract with ``reproduce``); this module holds the per-message work: each provider turn's
reconstructed request, each tool call line and its observation, tool results matched to calls
by position.
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
from runner.trace.format import TRACE_VERSION, encode_body

__all__ = ["STEP_ID", "LineBuilder", "Pending", "RunCounts", "ToolIndex", "assistant_chat"]

STEP_ID = "agent"
TOOL_ERROR_CLASS = "ToolError"


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


def _text(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def assistant_chat(msg: SourceMessage) -> dict[str, Any]:
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
class Pending:
    """A tool call of the latest assistant message, answered or not yet."""

    call: SourceToolCall
    message: SourceMessage
    answered: bool = False


class LineBuilder:
    """Builds the call lines and observations of one run, message by message (`build_run`)."""

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
        self.pending: list[Pending] = []
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
        """Add the call line of a model (``role`` ``model``) or simulated-user turn."""
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
        """Answer a pending call with a tool message: its call line and observation.

        Raises:
            InputError: a tool result with no call before it (file and field named).
        """
        if msg.call is not None:  # an executed call no model turn asked for
            self._tool_line(msg.call, msg)
            return
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
        if not call.args_known:
            meta["args_captured"] = False
            self.counts.missing["tool.args"] += 1
        elif not call.args_ok:
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
        """Write the calls left unanswered (no result recorded) and clear the pending list."""
        for p in self.pending:
            if not p.answered:
                self._tool_line(p.call, None)
        self.pending = []
