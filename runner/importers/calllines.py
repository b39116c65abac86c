"""The call lines of one imported conversation: model, simulated-user and tool lines.

`LineBuilder` is fed the messages of one `runner.importers.source.SourceRun` in order by
`runner.importers.conversation.build_run`, whose docstring states the shapes written (the
contract with ``reproduce``); this module holds the per-message work: each provider turn's
reconstructed request, each tool call line and its observation, tool results matched to calls
by position.

Linear output: a turn's request holds the whole conversation so far, so
writing it whole makes a trace grow with the square of its turns (a 2.3 MB τ² file made an
887 MB trace). Each provider turn after the first of its role is written with its history
by reference instead: ``messages_from: {"call", "count"}`` names the previous turn of the
same role and how many of its request messages come first, and ``request.messages`` holds
only the messages after them (docs/trace-format.md, "History by reference";
`runner.tracetools.reader.read_trace` resolves it). The conversation and the simulated
user's view of it are kept append-only, so each message is copied and written once.
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
from runner.trace.strictjson import dumps_value

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


def _tool_message(msg: SourceMessage) -> Any:
    """The tool message the next request carries for a result, as the runtime writes it.

    The source's content, verbatim; for a failed call that recorded no content, the text the
    generic agent hands the model when a served call raises its recorded error,
    ``{"error": {"class", "message"}}`` (`runner.runtime.steps.agent`, `dumps_value`), so
    that a replay's next request matches the recording.
    """
    if msg.content is not None or not msg.error:
        return msg.content
    message = msg.error_message if msg.error_message is not None else ""
    record = {"class": msg.error_class or TOOL_ERROR_CLASS, "message": message[:4096]}
    return dumps_value({"error": record})


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
        self.history: list[dict[str, Any]] = []  # append-only: see `push`
        self.user_seen: list[dict[str, Any]] = []  # the simulated user's view, append-only
        self.last_turn: dict[str, tuple[int, int]] = {}  # role -> (call index, messages)
        if system is not None:
            self.push({"role": "system", "content": system})
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

    def push(self, message: dict[str, Any]) -> None:
        """Append a message to the conversation (and to the simulated user's view of it).

        The user sees the text messages with roles swapped (tool traffic left out), as
        `runner.runtime.steps.agent` builds a user turn.
        """
        self.history.append(message)
        if message.get("role") in ("assistant", "user") and message.get("content"):
            swapped = "user" if message["role"] == "assistant" else "assistant"
            self.user_seen.append({"role": swapped, "content": message["content"]})

    def _user_system(self) -> dict[str, Any]:
        system = self.run.user_system
        if system is None:
            system = canonical_json(self.run.task_input)
        return {"role": "system", "content": system}

    def _messages(self, role: str, record: dict[str, Any], index: int) -> list[dict[str, Any]]:
        """This turn's request messages: whole for a role's first turn, else by reference."""
        whole = self.history if role == "model" else self.user_seen
        offset = 0 if role == "model" else 1  # the user's system message comes first
        total = len(whole) + offset
        previous = self.last_turn.get(role)
        self.last_turn[role] = (index, total)
        if previous is None:
            head = [] if role == "model" else [self._user_system()]
            return head + [dict(m) for m in whole]
        record["messages_from"] = {"call": previous[0], "count": previous[1]}
        return [dict(m) for m in whole[previous[1] - offset :]]

    def provider_turn(self, role: str, msg: SourceMessage) -> None:
        """Add the call line of a model (``role`` ``model``) or simulated-user turn."""
        record: dict[str, Any] = {"tool": role}
        index = len(self.calls)
        if role == "model":
            request: dict[str, Any] = dict(self.run.model_settings)
            request["messages"] = self._messages(role, record, index)
            if self.offered:
                request["tools"] = [dict(t) for t in self.offered]
            alias = self.run.model_alias
        else:
            request = dict(self.run.user_settings)
            request["messages"] = self._messages(role, record, index)
            alias = self.run.user_alias
        record["request"] = request
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
        self.push(
            {
                "role": "tool",
                "tool_call_id": chosen.call.id,
                "content": _tool_message(msg),
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
