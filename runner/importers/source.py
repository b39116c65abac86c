"""What a source adapter reads: runs, messages and tool calls in a source-neutral shape.

`runner.importers.tau2` and `runner.importers.openai_messages` fill these; the builder
(`runner.importers.conversation`) turns them into traces. Helpers here parse source JSON (with
the one strict decoder, `runner.trace.strictjson`, as the task and trace readers do), parse
tool-call arguments without losing the model's text and derive ids that follow SPEC.md's id rules.

Invariant: values are the source's own; what a source lacks is None, never a default that
looks recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runner.domain.ids import MAX_ID_LENGTH, IdSet, id_problem, is_device_name
from runner.errors import InputError
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads

__all__ = [
    "RECORDED_USER",
    "SourceMessage",
    "SourceRun",
    "SourceToolCall",
    "as_object",
    "conversation_run",
    "derive_id",
    "iso_seconds",
    "load_json",
    "parse_arguments",
]

RECORDED_USER = (
    "the recorded user: turns are served from the trace (the source has no instructions)"
)
"""The simulated user's instructions of a source that records user turns but no instructions."""


@dataclass(frozen=True)
class SourceToolCall:
    """One tool call of an assistant message.

    Attributes:
        id: the call id the source gave (may repeat across messages), or None.
        name: the function name (tool id).
        args: the parsed arguments object ({} when the text was not a JSON object).
        arguments_text: the arguments JSON text as the model produced it.
        args_ok: False when ``arguments_text`` was not a JSON object.
        args_known: False when the source did not capture the arguments (content capture
            off): ``args`` is then ``{}`` and unknown, not empty (``meta.args_captured``).
    """

    id: str | None
    name: str
    args: dict[str, Any]
    arguments_text: str
    args_ok: bool = True
    args_known: bool = True


@dataclass(frozen=True)
class SourceMessage:
    """One message of the source conversation (system messages are taken out beforehand).

    Attributes:
        role: ``user``, ``assistant`` or ``tool``.
        content: the content as the source has it (text, parts list or None).
        where: the field path in the source file, e.g. ``simulations[3].messages[5]``.
        line: 1-based line in the source file, when known.
        tool_calls: the assistant's tool calls in order.
        tool_call_id: the id a tool message answers.
        error: the source marks this tool result as an error.
        body: the provider body object of a model/user turn (τ²'s ``raw_data``), or None.
        usage: token usage of that turn, or None.
        clock: epoch seconds of the message, or None.
        fixed: an assistant message that was not a model call.
        meta: source fields kept as annotations (turn index, cost, ...).
        model: the model id the source read from the response (recorded with
            ``model_source: response``), or None (the run's alias is recorded as config).
        duration_s: seconds the call took (span times), or None (missing).
        error_class, error_message: a failed tool result's error as the source names it
            (None: ``ToolError`` and the result text).
        call: on a ``tool`` message, the call it is the result of when no model turn asked
            for it (an executed tool call the source records without a model's request):
            written as a tool call line of its own, outside the conversation.
    """

    role: str
    content: Any
    where: str
    line: int | None = None
    tool_calls: tuple[SourceToolCall, ...] = ()
    tool_call_id: str | None = None
    error: bool = False
    body: Any = None
    usage: dict[str, Any] | None = None
    clock: float | None = None
    fixed: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    duration_s: float | None = None
    error_class: str | None = None
    error_message: str | None = None
    call: SourceToolCall | None = None


@dataclass(frozen=True)
class SourceRun:
    """One run read from the source, before it becomes a trace.

    Attributes:
        run_id, task_id: validated ids (`runner.domain.ids`).
        task_input: the task's input object.
        messages: the conversation without its leading system message(s).
        first_user_is_input: the first user message (when it opens the conversation) is the
            task input, not a simulated-user turn.
        model_settings: request keys besides messages/tools for model turns (``model`` alias
            first when known).
        user_settings: the same for simulated-user turns.
        model_alias, user_alias: configured model names (recorded with ``model_source:
            config``), or None.
        failed_reason: the source's verdict message when it judged the run failed, else None.
        clock_start: epoch seconds the run started, or None (missing).
        seed: the source's seed, or None (missing).
        usd: the source's cost of the run, or None.
        meta: source fields kept on the run line (ids, rewards, ...).
        end_meta: source fields kept on the end line (the verdict's details).
        system: the system prompt the agent was given, or None.
        user_system: the simulated user's instructions as the system message of its turns
            (the workflow's ``user`` rendered); None: the task input as canonical JSON.
        simulated_user: the run's workflow has the shape's simulated user (False: the run
            has no user turns to serve, so its agent must not ask for one).
        workflow_model: the run's own workflow ``model`` block (None: the shape's).
        request_tools: the tools as sent to the model in this run (OpenAI function format);
            None means every tool of the source.
        file: the source file (for errors).
        failure: ``(error class, message)`` of an error that ended the run (not a verdict):
            the end line's failure is the last call when that call failed with this class,
            else ``workflow`` at the last call; None: no such error.
        extra_tokens: ``(in, out)`` tokens of model calls that are not turns of the
            conversation (made inside a tool call), added to the end line's meter.
    """

    run_id: str
    task_id: str
    task_input: dict[str, Any]
    messages: tuple[SourceMessage, ...]
    file: str
    first_user_is_input: bool = False
    model_settings: dict[str, Any] = field(default_factory=dict)
    user_settings: dict[str, Any] = field(default_factory=dict)
    model_alias: str | None = None
    user_alias: str | None = None
    failed_reason: str | None = None
    clock_start: float | None = None
    seed: int | None = None
    usd: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    end_meta: dict[str, Any] = field(default_factory=dict)
    system: str | None = None
    user_system: str | None = None
    simulated_user: bool = True
    workflow_model: dict[str, Any] | None = None
    request_tools: tuple[dict[str, Any], ...] | None = None
    failure: tuple[str, str] | None = None
    extra_tokens: tuple[int, int] = (0, 0)


def conversation_run(
    run_id: str,
    messages: tuple[SourceMessage, ...],
    file: str,
    alias: str | None,
    **fields: Any,
) -> SourceRun:
    """A run of a recorded conversation served to the generic agent (Inspect, ATIF).

    The first user message is the task input ``{"message": ...}`` (and, when it opens the
    conversation, the agent's input); later user messages are the recorded user's turns,
    served with `RECORDED_USER` as instructions; the model alias (or ``replay``) is asked for
    and named by the run's workflow. ``fields`` are the run's other `SourceRun` fields.
    """
    first_user = next((m for m in messages if m.role == "user"), None)
    opens = bool(messages) and messages[0].role == "user"
    asked = {"model": alias or "replay"}
    return SourceRun(
        run_id=run_id,
        task_id=run_id,
        task_input={"message": first_user.content} if first_user is not None else {},
        messages=messages,
        file=file,
        first_user_is_input=opens,
        model_settings=asked,
        user_settings=dict(asked),
        model_alias=alias,
        user_alias=alias,
        user_system=RECORDED_USER,
        simulated_user=sum(m.role == "user" for m in messages) > (1 if opens else 0),
        workflow_model={"provider": "openai", "name": alias} if alias else {"provider": "replay"},
        **fields,
    )


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}`` (a source's optional object field)."""
    return value if isinstance(value, dict) else {}


def iso_seconds(stamp: Any) -> float | None:
    """Epoch seconds of an ISO 8601 timestamp with a zone (``Z`` allowed), else None."""
    if not isinstance(stamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def load_json(text: str, *, file: str, line: int | None = None) -> Any:
    """Decode source JSON with the one strict decoder (`runner.trace.strictjson.loads`).

    Nesting deeper than `runner.trace.strictjson.MAX_DEPTH` is refused before parsing (an input
    error naming file and line); NaN, infinities and duplicate keys are not JSON either.

    Args:
        text: the JSON text (a whole file, or one line of a JSONL file).
        file: the file named in the error.
        line: the 1-based line of ``text`` in a JSONL file (None for a whole file).

    Raises:
        InputError: nested deeper than `runner.trace.strictjson.MAX_DEPTH` (file, line).
        ValueError: otherwise not strict JSON (a `runner.trace.strictjson.StrictJSONError`; each
            caller words its own error).
    """
    try:
        return strict_loads(text)
    except StrictJSONError as exc:
        if exc.kind == "depth":
            raise InputError(exc.reason, file=file, line=line) from None
        raise


def parse_arguments(value: Any) -> tuple[dict[str, Any], str, bool]:
    """Arguments of a tool call: ``(args, arguments_text, ok)``.

    A JSON text is parsed (``ok`` False and ``args`` {} when it is not a JSON object, or nested
    too deeply to parse); an object given already parsed is kept and its text is compact JSON.
    """
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False, separators=(",", ":")), True
    if isinstance(value, str):
        try:
            parsed = strict_loads(value) if value.strip() else {}
        except ValueError:  # kept as the model's text, marked not an object
            return {}, value, False
        if isinstance(parsed, dict):
            return parsed, value, True
        return {}, value, False
    if value is None:
        return {}, "{}", True
    return {}, json.dumps(value, ensure_ascii=False), False


_FORBIDDEN_ID_CHARS = frozenset('/\\<>:"|?*')


def derive_id(text: str, taken: IdSet) -> str:
    """A valid, unused id made from ``text`` (`runner.domain.ids` rules).

    Forbidden and control characters and whitespace become ``_``; leading/trailing dots and
    spaces are dropped; a Windows device name (``con``) gets a leading ``_``; a case-insensitive
    clash with an id in ``taken`` (an `IdSet`) gets ``-2``, ``-3``, ... appended. The id is
    added to ``taken``.
    """
    cleaned = (
        "".join(
            "_" if (c in _FORBIDDEN_ID_CHARS or not c.isprintable() or c.isspace()) else c
            for c in text
        ).strip(" .")
        or "run"
    )
    cleaned = cleaned[: MAX_ID_LENGTH - 8].rstrip(" .")
    if is_device_name(cleaned):  # aux.txt would open a device on Windows; _aux.txt does not
        cleaned = f"_{cleaned}"
    if id_problem(cleaned) is not None:
        cleaned = "run"
    candidate, n = cleaned, 1
    while candidate in taken:
        n += 1
        candidate = f"{cleaned}-{n}"
    taken.add(candidate)
    return candidate
