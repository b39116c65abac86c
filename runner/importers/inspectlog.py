"""Import Inspect AI evaluation logs (``.eval`` archives, or ``.json`` logs): one run per sample.

Inspect (UK AISI, github.com/UKGovernmentBEIS/inspect_ai, ``inspect_ai/log/_log.py``) writes
an ``.eval`` log as a zip archive of JSON: ``header.json`` (``eval``: task, model, ...;
``status``), ``samples/<id>_epoch_<n>.json`` (one `EvalSample` each), summaries and a
journal; older versions and ``--log-format json`` write one JSON document holding
``samples``. The archive is read by `runner.importers.ziplog` (bounded, strict; inspect-ai is
not imported), every member with the strict JSON decoder.

Mapping (call shapes in `runner.importers.conversation`), per sample and epoch:

- run and task id ``<task>-<sample id>[-e<epoch>]``; the leading system message is the
  workflow's system prompt; the first user message is the task input ``{"message": ...}``
  (the sample's ``target``, when a string, is the task's ``expected.output_contains``);
- each assistant message is a model turn: its text (text parts joined; reasoning parts are
  not the answer and are dropped, counted in ``meta``), its tool calls (``function``,
  ``arguments`` object, ``id``); usage and the model id from the ``model`` event whose
  output is that message (``output.model``, as the provider's response named it:
  ``model_source: response``; ``output.usage`` ``input_tokens`` / ``output_tokens``), its
  time from that event; the body is ``{"message": ...}`` (not an HTTP body);
- each tool message answers its call (``tool_call_id``): content as text, ``error``
  (``{type, message}``) as the error ``{class: type, message}``; its time from the ``tool``
  event of that call;
- verdict: a sample with an ``error`` ends ``failed`` with it (class ``SampleError``); a
  sample whose first score is incorrect (``I``, 0, false) ends ``failed`` by the source's
  verdict (error class ``task_failed``); a sample cut by a ``limit`` ends ``failed`` with
  class ``SampleLimitExceeded``;
- tools: the first model event's ``tools`` (name, description, JSON Schema parameters);
  ``--tools`` adds definitions the log lacks; every tool is ``unsafe`` until mapped.

Nothing is invented: what the log lacks (raw HTTP bodies, a model id in a message that no
model event names, clocks) stays absent and is counted, so that ``lint`` reports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
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
from runner.importers.ziplog import ZipLog, is_zip
from runner.inputfile import read_input
from runner.trace.strictjson import StrictJSONError

__all__ = ["read_inspect"]


_INCORRECT = ("I", "incorrect", "F", "fail", "failed")
_SAMPLE = re.compile(r"^samples/[^/]+\.json\Z")


def _json(data: bytes, file: str, member: str) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=file, field=member) from None
    try:
        return load_json(text, file=file)
    except StrictJSONError as exc:
        raise InputError(
            f"invalid JSON: {exc.detail}", file=file, line=exc.line, field=member
        ) from None


def _documents(path: Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict[str, Any]]]]:
    """``(eval header, samples)`` of a log, each sample with where it is in the file."""
    file = str(path)
    if is_zip(path):
        archive = ZipLog(path)
        names = archive.names
        head_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
        header = _json(archive.read(head_name), file, head_name) if head_name else {}

        def samples() -> Iterator[tuple[str, dict[str, Any]]]:
            with archive:
                for name in names:
                    if _SAMPLE.match(name):
                        yield name, _json(archive.read(name), file, name)

        return (header if isinstance(header, dict) else {}), samples()
    doc = _json(read_input(path, "import source"), file, "log")
    if not isinstance(doc, dict) or not isinstance(doc.get("samples"), list):
        raise InputError(
            "neither an .eval archive nor a JSON log with 'samples' (Inspect AI)", file=file
        )

    def listed() -> Iterator[tuple[str, dict[str, Any]]]:
        for i, sample in enumerate(doc["samples"]):
            yield f"samples[{i}]", sample

    return doc, listed()


def _text(content: Any) -> tuple[str | None, int]:
    """``(text, reasoning parts)`` of a message's content: a string, or its text parts."""
    if content is None or isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return None, 0
    texts, reasoning = [], 0
    for part in content:
        if isinstance(part, dict):
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "reasoning":
                reasoning += 1
    return ("".join(texts) if texts else ""), reasoning


class _Events:
    """A sample's model and tool events, by the message or call they produced."""

    def __init__(self, events: Any) -> None:
        self.model: dict[str, dict[str, Any]] = {}
        self.tool: dict[str, dict[str, Any]] = {}
        self.tools: list[Any] = []
        for event in events if isinstance(events, list) else []:
            if not isinstance(event, dict):
                continue
            if event.get("event") == "model":
                if not self.tools and isinstance(event.get("tools"), list):
                    self.tools = event["tools"]
                output = as_object(event.get("output"))
                for choice in output.get("choices") or []:
                    message = choice.get("message") if isinstance(choice, dict) else None
                    if isinstance(message, dict) and isinstance(message.get("id"), str):
                        self.model.setdefault(message["id"], event)
            elif event.get("event") == "tool" and isinstance(event.get("id"), str):
                self.tool.setdefault(event["id"], event)


def _assistant(msg: dict[str, Any], where: str, file: str, events: _Events) -> SourceMessage:
    text, reasoning = _text(msg.get("content"))
    calls: list[SourceToolCall] = []
    chat_calls = []
    for i, call in enumerate(msg.get("tool_calls") or []):
        here = f"{where}.tool_calls[{i}]"
        if not isinstance(call, dict):
            raise InputError("a tool call must be an object", file=file, field=here)
        raw = call.get("function")
        name = check_tool_id(
            as_tool_id(raw) if isinstance(raw, str) else raw, file=file, field=f"{here}.function"
        )
        args, arguments_text, ok = parse_arguments(call.get("arguments"))
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        calls.append(SourceToolCall(call_id, name, args, arguments_text, ok))
        chat_calls.append(
            {
                **({"id": call_id} if call_id else {}),
                "type": "function",
                "function": {"name": name, "arguments": arguments_text},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if chat_calls:
        message["tool_calls"] = chat_calls
    event = events.model.get(str(msg.get("id")))
    output = as_object((event or {}).get("output"))
    usage_raw = output.get("usage") if isinstance(output.get("usage"), dict) else None
    usage = None
    if usage_raw is not None:
        usage = {
            "prompt_tokens": usage_raw.get("input_tokens"),
            "completion_tokens": usage_raw.get("output_tokens"),
        }
    model = output.get("model") if isinstance(output.get("model"), str) else None
    started = iso_seconds((event or {}).get("timestamp"))
    ended = iso_seconds((event or {}).get("completed"))
    meta: dict[str, Any] = {"message_id": msg.get("id")}
    if reasoning:
        meta["reasoning_parts"] = reasoning
    if event is None:
        meta["model_event"] = False
    return SourceMessage(
        role="assistant",
        content=text,
        where=where,
        tool_calls=tuple(calls),
        body={"message": message},
        usage=usage,
        clock=started,
        duration_s=ended - started if started is not None and ended is not None else None,
        model=model,
        meta=meta,
    )


def _tool(msg: dict[str, Any], where: str, events: _Events) -> SourceMessage:
    text, _ = _text(msg.get("content"))
    error = msg.get("error") if isinstance(msg.get("error"), dict) else None
    call_id = msg.get("tool_call_id") if isinstance(msg.get("tool_call_id"), str) else None
    event = events.tool.get(call_id or "") or {}
    started, ended = iso_seconds(event.get("timestamp")), iso_seconds(event.get("completed"))
    duration = ended - started if started is not None and ended is not None else None
    return SourceMessage(
        role="tool",
        content=text,
        where=where,
        tool_call_id=call_id,
        error=error is not None,
        error_class=str(error.get("type") or "ToolError") if error else None,
        error_message=str(error.get("message") or "") if error else None,
        clock=started,
        duration_s=duration if duration is None or duration >= 0 else None,
    )


def _verdict(sample: dict[str, Any]) -> tuple[str | None, tuple[str, str] | None]:
    """``(failed reason, failure)``: the source's verdict, or an error that ended the sample."""
    error = sample.get("error")
    if isinstance(error, dict) and error.get("message"):
        return None, ("SampleError", str(error["message"])[:4096])
    limit = sample.get("limit")
    if isinstance(limit, dict) and limit.get("type"):
        return None, ("SampleLimitExceeded", f"{limit.get('type')} limit {limit.get('limit')}")
    scores = sample.get("scores")
    if isinstance(scores, dict) and scores:
        name, score = next(iter(scores.items()))
        value = score.get("value") if isinstance(score, dict) else None
        if value in _INCORRECT or value is False or value in (0, 0.0):
            return f"source verdict: score {name} = {value!r}", None
    return None, None


def _tools(raw: list[Any], file: str) -> list[ImportedTool]:
    out = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict):
            continue
        function = {
            "name": tool.get("name"),
            "description": tool.get("description") or "",
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        out.append(
            tool_from_openai(
                {"type": "function", "function": function}, file=file, field=f"tools[{i}]"
            )
        )
    return out


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip("._-")[:100] or "inspect"


def read_inspect(path: Path, tools_path: Path | None = None) -> ImportSource:
    """Read an Inspect AI log into an `ImportSource`: one run per sample and epoch.

    Args:
        path: the ``.eval`` archive or ``.json`` log.
        tools_path: ``--tools``: definitions (OpenAI function format) the log lacks.

    Raises:
        InputError: not a log, an unreadable or hostile archive (`runner.importers.ziplog`),
            invalid JSON, a malformed message, no samples (file and member named).
    """
    file = str(path)
    header, samples = _documents(path)
    spec = as_object(header.get("eval"))
    task = _name(str(spec.get("task") or path.stem.split("_")[-2:][0]))
    alias = spec.get("model") if isinstance(spec.get("model"), str) else None
    tools: dict[str, ImportedTool] = {}
    if tools_path is not None:
        for i, raw in enumerate(read_tools_file(tools_path)):
            tool = tool_from_openai(raw, file=str(tools_path), field=f"[{i}]")
            tools[tool.id] = tool
    ids = IdSet("run id")
    runs: list[SourceRun] = []
    expected: dict[str, dict[str, Any]] = {}
    for member, sample in samples:
        if not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
            raise InputError("a sample without 'messages'", file=file, field=member)
        events = _Events(sample.get("events"))
        for tool in _tools(events.tools, file):
            if tools.get(tool.id) is None or tools[tool.id].schema is None:
                tools[tool.id] = tool
        messages: list[SourceMessage] = []
        system = None
        for j, msg in enumerate(sample["messages"]):
            where = f"{member}.messages[{j}]"
            if not isinstance(msg, dict):
                raise InputError("a message must be an object", file=file, field=where)
            role = msg.get("role")
            if role == "system" and not messages and system is None:
                system, _ = _text(msg.get("content"))
            elif role == "assistant":
                messages.append(_assistant(msg, where, file, events))
            elif role == "tool":
                messages.append(_tool(msg, where, events))
            elif role == "user":
                text, _ = _text(msg.get("content"))
                body = {"message": {"role": "user", "content": text}}
                messages.append(SourceMessage("user", text, where, body=body))
            else:
                raise InputError(f"role {role!r} is not read", file=file, field=f"{where}.role")
        for msg in messages:
            for call in msg.tool_calls:
                tools.setdefault(call.name, ImportedTool(call.name, "", None, None, None))
        epoch = sample.get("epoch")
        label = f"{task}-{sample.get('id')}" + (f"-e{epoch}" if epoch not in (None, 1) else "")
        run_id = derive_id(label, ids)
        failed_reason, failure = _verdict(sample)
        target = sample.get("target")
        if isinstance(target, str) and target:
            expected[run_id] = {"output_contains": target}
        starts = [m.clock for m in messages if m.clock is not None]
        runs.append(
            conversation_run(
                run_id,
                tuple(messages),
                file,
                alias,
                failed_reason=failed_reason,
                failure=failure,
                clock_start=min(starts) if starts else None,
                meta={
                    "source": "inspect",
                    "member": member,
                    "sample_id": sample.get("id"),
                    "epoch": epoch,
                    "scores": sample.get("scores"),
                },
                system=system,
            )
        )
    if not runs:
        raise InputError("no samples in the log", file=file)
    shape = agent_shape(f"{task}-agent", f"the Inspect AI log {path.name}", runs, RECORDED_USER)
    return ImportSource(
        kind="inspect",
        backend="import:inspect",
        file=file,
        tools=list(tools.values()),
        runs=runs,
        shape=shape,
        expected=expected,
    )
