"""Import OpenAI chat-message datasets: one run per conversation.

Accepted shapes (the common one of tool-calling datasets and fine-tuning files):

- JSONL, one run a line: ``{"messages": [...], "tools"?: [...], ...extra keys}`` (a line may
  also be a bare list of messages);
- a JSON array of such objects, or of bare message lists; a single such object.

Messages have ``role`` (``system``/``developer``, ``user``, ``assistant``, ``tool``),
``content``, assistant ``tool_calls`` (``{"id", "type": "function", "function": {"name",
"arguments": JSON text}}``) and tool ``tool_call_id``. ``tools`` (OpenAI function format) come
per run or once with ``--tools``; a run's own list wins. Extra keys of a run (ids, rewards,
model, ...) are kept in the run line's ``meta``.

Mapping (call shapes in `runner.importers.conversation`): run and task id ``<file stem>-<n>``
(n = 1-based record number); the leading system message is the workflow's system prompt; the
first user message, when it opens the conversation, is the task input ``{"message": ...}`` and
the workflow's ``input``; later user messages are simulated-user turns; each assistant message
is a model turn whose body is ``{"message": <the source message>}`` (not an HTTP body). A model
alias is recorded only when the run has a string ``model`` key (``model_source: config``).

Verdict: a run whose extra keys hold a number ``reward`` below 1, or ``success``/``passed``
false, is ``failed`` (error class ``task_failed``); every other run ``succeeded``.

Tool errors: the chat format has no error flag; a tool message is marked failed only when it
carries a truthy ``error`` or ``is_error`` key. Error text in plain content stays a body.

Effects: the chat format has no read/write labels, so every tool is ``unsafe`` unless mapped
(``--map``/``--map-file``), or labelled by a non-standard ``kind``/``effect`` key ``read`` or
``write`` beside the tool object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet
from runner.errors import InputError
from runner.importers.imported import ImportSource, agent_shape
from runner.importers.source import (
    RECORDED_USER,
    SourceMessage,
    SourceRun,
    SourceToolCall,
    derive_id,
    load_json,
    parse_arguments,
)
from runner.importers.toolset import ImportedTool, check_tool_id, tool_from_openai
from runner.inputfile import read_input
from runner.trace.strictjson import StrictJSONError

__all__ = ["read_openai_messages", "read_tools_file"]

_ROLES = ("system", "developer", "user", "assistant", "tool")


def _decode(path: Path) -> str:
    raw = read_input(path, "import source")  # regular files only, size-limited
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=str(path)) from None


def _array_items(text: str) -> list[tuple[int, Any]]:
    """The elements of a JSON array text with the 1-based line each starts on."""
    decoder = json.JSONDecoder()
    items: list[tuple[int, Any]] = []
    i, line = text.index("[") + 1, 1 + text.count("\n", 0, text.index("["))

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        return pos

    pos = skip(i)
    line += text.count("\n", i, pos)
    while pos < len(text) and text[pos] != "]":
        value, end = decoder.raw_decode(text, pos)
        items.append((line, value))
        nxt = skip(end)
        line += text.count("\n", pos, nxt)
        pos = nxt
    return items


def _records(path: Path) -> list[tuple[int, Any]]:
    """``(line, record)`` pairs of the file, whichever accepted shape it has."""
    text = _decode(path)
    name = str(path)
    stripped = text.strip()
    if not stripped:
        raise InputError("empty file: no runs", file=name)
    deep: InputError | None = None
    try:
        whole = load_json(stripped, file=name)
    except ValueError:
        whole = None
    except InputError as exc:  # too deep as one document: as JSONL, the line is named below
        whole, deep = None, exc
    else:
        if isinstance(whole, dict):
            return [(1 + text.count("\n", 0, len(text) - len(text.lstrip())), whole)]
        if isinstance(whole, list):
            if whole and all(isinstance(m, dict) and "role" in m for m in whole):
                return [(1, whole)]  # one bare conversation
            return _array_items(text)
    records = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            records.append((number, load_json(raw, file=name, line=number)))
        except StrictJSONError as exc:
            if deep is not None:  # not JSONL either: the one document is too deep
                raise deep from None
            raise InputError(
                f"invalid JSON: {exc.detail}", file=name, line=number, field=exc.field
            ) from None
    return records


def read_tools_file(path: Path) -> list[dict[str, Any]]:
    """Read ``--tools``: a JSON list of OpenAI function tools (or ``{"tools": [...]}``).

    Raises:
        InputError: unreadable, invalid JSON or not a list (file named).
    """
    text = _decode(path)
    try:
        data = load_json(text, file=str(path))
    except StrictJSONError as exc:  # not JSON, NaN, a duplicate key (position named)
        raise InputError(
            f"invalid JSON: {exc.detail}", file=str(path), line=exc.line, field=exc.field
        ) from None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError("must be a JSON list of tools (OpenAI function format)", file=str(path))
    return data


class _Tools:
    """The union of every run's tools; a name defined two different ways is an error."""

    def __init__(self) -> None:
        self.by_id: dict[str, ImportedTool] = {}
        self.where: dict[str, str] = {}

    def add_list(self, raw: Sequence[Any], file: str, line: int | None, field: str) -> None:
        for i, obj in enumerate(raw):
            label = None
            if isinstance(obj, dict):
                tag = obj.get("kind", obj.get("effect"))
                label = tag if isinstance(tag, str) else None
            tool = tool_from_openai(obj, label=label, file=file, line=line, field=f"{field}[{i}]")
            self.add(tool, f"{file}:{line or 0} {field}[{i}]", file, line, f"{field}[{i}]")

    def add(self, tool: ImportedTool, where: str, file: str, line: int | None, field: str) -> None:
        known = self.by_id.get(tool.id)
        if known is None or (known.schema is None and tool.schema is not None):
            self.by_id[tool.id] = tool
            self.where[tool.id] = where
        elif tool.schema is not None and (known.schema != tool.schema or known.label != tool.label):
            raise InputError(
                f"tool {tool.id!r} differs from its definition at {self.where[tool.id]}",
                file=file,
                line=line,
                field=field,
            )


def _message(msg: Any, where: str, file: str, line: int) -> SourceMessage:
    if not isinstance(msg, dict):
        raise InputError("a message must be an object", file=file, line=line, field=where)
    role = msg.get("role")
    if role not in _ROLES:
        raise InputError(
            f"role {role!r} is not one of {', '.join(_ROLES)}",
            file=file,
            line=line,
            field=f"{where}.role",
        )
    role = "system" if role == "developer" else role
    if role == "tool":
        call_id = msg.get("tool_call_id", msg.get("id"))
        return SourceMessage(
            role="tool",
            content=msg.get("content"),
            where=where,
            line=line,
            tool_call_id=call_id if isinstance(call_id, str) else None,
            error=bool(msg.get("error") or msg.get("is_error")),
        )
    calls: list[SourceToolCall] = []
    raw_calls = (msg.get("tool_calls") or []) if role == "assistant" else []
    if not isinstance(raw_calls, list):
        raise InputError("must be a list", file=file, line=line, field=f"{where}.tool_calls")
    for i, call in enumerate(raw_calls):
        here = f"{where}.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise InputError(
                "needs a 'function' object", file=file, line=line, field=f"{here}.function"
            )
        name = check_tool_id(function.get("name"), file=file, line=line, field=f"{here}.name")
        args, text, ok = parse_arguments(function.get("arguments"))
        call_id = call.get("id")
        calls.append(
            SourceToolCall(
                id=call_id if isinstance(call_id, str) else None,
                name=name,
                args=args,
                arguments_text=text,
                args_ok=ok,
            )
        )
    body = {"message": msg} if role in ("assistant", "user") else None
    return SourceMessage(
        role=role,
        content=msg.get("content"),
        where=where,
        line=line,
        tool_calls=tuple(calls),
        body=body,
    )


def _workflow_name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).strip("._-") or "chat"
    return f"{name[:100]}-agent"


def _verdict(extras: dict[str, Any]) -> str | None:
    reward = extras.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool) and reward < 1:
        return f"source verdict: reward {reward}"
    for key in ("success", "passed"):
        if extras.get(key) is False:
            return f"source verdict: {key} false"
    return None


def read_openai_messages(path: Path, tools_path: Path | None = None) -> ImportSource:
    """Read a chat-message dataset into an `ImportSource`.

    Args:
        path: the JSONL or JSON file.
        tools_path: ``--tools``: tools used for every run that has no ``tools`` of its own.

    Raises:
        InputError: unreadable file, invalid JSON, a record without ``messages``, a malformed
            message or tool, a tool defined two different ways (file, line and field named).
    """
    file = str(path)
    tools = _Tools()
    if tools_path is not None:
        tools.add_list(read_tools_file(tools_path), str(tools_path), None, "tools")
    stem = path.stem.split(".")[0] or "run"
    run_ids = IdSet("run id")
    runs: list[SourceRun] = []
    has_user_turns = False
    for n, (line, record) in enumerate(_records(path), start=1):
        if isinstance(record, list):
            record = {"messages": record}
        if not isinstance(record, dict):
            raise InputError(
                "a run must be an object with 'messages' or a list of messages",
                file=file,
                line=line,
            )
        raw_messages = record.get("messages")
        if not isinstance(raw_messages, list):
            problem = "required" if raw_messages is None else "must be a list of messages"
            raise InputError(problem, file=file, line=line, field="messages")
        extras = {k: v for k, v in record.items() if k not in ("messages", "tools")}
        request_tools: tuple[dict[str, Any], ...] | None = None
        if "tools" in record and record["tools"] is not None:
            if not isinstance(record["tools"], list):
                raise InputError("must be a list of tools", file=file, line=line, field="tools")
            tools.add_list(record["tools"], file, line, "tools")
            request_tools = tuple(t for t in record["tools"] if isinstance(t, dict))
        messages = [_message(m, f"messages[{j}]", file, line) for j, m in enumerate(raw_messages)]
        system = None
        if messages and messages[0].role == "system" and isinstance(messages[0].content, str):
            system = messages.pop(0).content
        for msg in messages:
            for call in msg.tool_calls:
                tools.add(ImportedTool(call.name, "", None, None, None), "a call", file, line, "")
        first_user = next((m for m in messages if m.role == "user"), None)
        opens = bool(messages) and messages[0].role == "user"
        user_turns = sum(m.role == "user" for m in messages) > (1 if opens else 0)
        has_user_turns |= user_turns
        alias = extras.get("model") if isinstance(extras.get("model"), str) else None
        run_id = derive_id(f"{stem}-{n}", run_ids)
        runs.append(
            SourceRun(
                run_id=run_id,
                task_id=run_id,
                task_input={"message": first_user.content} if first_user is not None else {},
                messages=tuple(messages),
                file=file,
                first_user_is_input=opens,
                model_settings={"model": alias} if alias else {},
                model_alias=alias,
                failed_reason=_verdict(extras),
                meta={"source": "openai-messages", "line": line, **extras},
                system=system,
                user_system=RECORDED_USER,
                simulated_user=user_turns,
                request_tools=request_tools,
            )
        )
    if not runs:
        raise InputError("no runs in the file", file=file)
    # A run's workflow asks for its own model alias (provider openai), or, without one, for the
    # provider's name (``replay``) as the request's ``model``, as the runtime sends it; the
    # call's model id stays absent (nothing is invented). User turns go to the same model.
    final = []
    for run in runs:
        model = (
            {"provider": "openai", "name": run.model_alias}
            if run.model_alias
            else {"provider": "replay"}
        )
        asked = {"model": run.model_alias or "replay"}
        final.append(replace(run, workflow_model=model, model_settings=asked, user_settings=asked))
    runs = final
    shape = agent_shape(
        _workflow_name(stem), f"the chat-message dataset {path.name}", runs, RECORDED_USER
    )
    return ImportSource(
        kind="openai-messages",
        backend="import:openai-messages",
        file=file,
        tools=list(tools.by_id.values()),
        runs=runs,
        shape=shape,
    )
