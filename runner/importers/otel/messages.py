"""Message contents as each convention records them, read into one shape (`Msg`, `Call`).

Readers (each returns None when its attributes are absent, so that the next one is tried):

- OTel GenAI (current): ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON text or
  structured): ``[{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id",
  "name", "arguments"}, {"type": "tool_call_response", "id", "response" | "result"}],
  "finish_reason"}]``; ``gen_ai.system_instructions`` (parts) — `parts_messages`;
- OpenAI chat messages (``{"role", "content", "tool_calls", "tool_call_id"}``), the shape of
  the older GenAI events' bodies and of OpenInference ``input.value`` JSON — `chat_message`;
- OpenInference flattened lists: ``llm.input_messages.N.message.role`` / ``.content`` /
  ``.contents.M.message_content.text`` / ``.tool_calls.M.tool_call.{id, function.name,
  function.arguments}`` / ``.tool_call_id`` — `flattened` with the OpenInference keys;
- the older flattened GenAI attributes ``gen_ai.prompt.N.{role, content, tool_call_id,
  tool_calls.M.{id, name, arguments}}`` and ``gen_ai.completion.N...`` — `flattened`;
- Google ADK's own request/response JSON (``gcp.vertex.agent.llm_request`` / ``llm_response``:
  ``contents[].parts[]`` with ``text``, ``function_call``, ``function_response``) — `adk_*`.

Placeholders that instrumentations write when content capture is off (``<elided>``,
``<not specified>``) are "not captured" (None), never text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.importers.otel.values import as_dict, as_list, json_value

__all__ = [
    "PLACEHOLDERS",
    "Call",
    "Msg",
    "ToolDef",
    "adk_request",
    "adk_response",
    "chat_message",
    "flattened",
    "loose_messages",
    "parts_messages",
    "parts_text",
    "tool_def",
]

PLACEHOLDERS = frozenset({"<elided>", "<not specified>", "<redacted>", "<REDACTED>"})
_ROLE = {
    "model": "assistant",
    "ai": "assistant",
    "human": "user",
    "function": "tool",
    "aimessage": "assistant",
    "humanmessage": "user",
    "systemmessage": "system",
    "toolmessage": "tool",
    "aimessagechunk": "assistant",
}


@dataclass(slots=True)
class Call:
    """A tool call the model asked for. ``arguments``: JSON text or object; None: not captured."""

    id: str | None
    name: str
    arguments: Any


@dataclass(slots=True)
class Msg:
    """One message. ``text`` None: no text, or not captured (``known`` False)."""

    role: str
    text: str | None
    tool_calls: list[Call] = field(default_factory=list)
    tool_call_id: str | None = None
    known: bool = True
    name: str | None = None


@dataclass(slots=True)
class ToolDef:
    """A tool definition seen in a request: name, description, JSON Schema of its parameters."""

    name: str
    description: str
    parameters: dict[str, Any] | None


def _captured(value: Any) -> bool:
    return not (isinstance(value, str) and value.strip() in PLACEHOLDERS)


def _role(value: Any) -> str:
    text = str(value or "").lower()
    return _ROLE.get(text, text or "user")


def _id(value: Any) -> str | None:
    if value is None or not _captured(value):
        return None
    text = str(value).strip()
    return text or None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def parts_text(parts: Any) -> tuple[str | None, bool]:
    """``(text, known)`` of a content value: a string, or a list of text parts joined.

    A Gemini ``Content`` object (``{"role", "parts": [{"text"}]}``) or a single part object
    (``{"type": "text", "text"}``) in the place of the content is read as its parts.
    """
    if isinstance(parts, str):
        return (parts, True) if _captured(parts) else (None, False)
    if isinstance(parts, dict):
        if isinstance(parts.get("parts"), list):
            return parts_text(parts["parts"])
        if isinstance(parts.get("text"), str) or isinstance(parts.get("content"), str):
            return parts_text([parts])
        return None, False
    if not isinstance(parts, list):
        return None, parts is None
    texts: list[str] = []
    known = True
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, dict)
            and part.get("type", "text") in ("text", "input_text", "output_text")
            and not part.get("thought")
        ):
            value = part.get("content", part.get("text"))
            if isinstance(value, str):
                if _captured(value):
                    texts.append(value)
                else:
                    known = False
    return ("".join(texts) if texts else None), known


def parts_messages(value: Any) -> list[Msg] | None:
    """GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (or chat messages)."""
    ok, value = json_value(value)
    if not ok or not isinstance(value, list):
        return None
    out: list[Msg] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        if "parts" not in item:
            out.append(chat_message(item))
            continue
        role = _role(item.get("role"))
        parts = as_list(item.get("parts"))
        text, known = parts_text([p for p in parts if isinstance(p, dict)])
        calls = []
        responses = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "tool_call":
                calls.append(
                    Call(_id(part.get("id")), str(part.get("name") or ""), part.get("arguments"))
                )
            elif kind == "tool_call_response":
                result = part.get("response", part.get("result"))
                responses.append((part.get("id"), result))
        if responses:
            for rid, result in responses:
                captured = _captured(result)
                out.append(
                    Msg("tool", _as_text(result) if captured else None, [], _id(rid), captured)
                )
            continue
        out.append(Msg(role, text, calls, None, known, item.get("name")))
    return out


def chat_message(obj: Mapping[str, Any]) -> Msg:
    """An OpenAI chat message (or an older GenAI event body) as a `Msg`."""
    message: Mapping[str, Any] = as_dict(obj.get("message"), dict(obj))
    role = _role(message.get("role") or obj.get("role") or message.get("type") or "assistant")
    text, known = parts_text(message.get("content"))
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = as_dict(call.get("function"), call)
        arguments = function.get("arguments", function.get("args"))
        calls.append(Call(_id(call.get("id")), str(function.get("name") or ""), arguments))
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        calls.append(
            Call(None, str(function_call.get("name") or ""), function_call.get("arguments"))
        )
    call_id = message.get("tool_call_id", obj.get("id") if role == "tool" else None)
    return Msg(role, text, calls, _id(call_id), known, message.get("name"))


_PLAIN_ROLE = re.compile(
    r"^(system|user|assistant|tool|developer|human|ai): ?", re.IGNORECASE | re.MULTILINE
)


def _langchain(item: Mapping[str, Any]) -> Msg:
    """A LangChain message serialised as ``{"lc", "type": "constructor", "id", "kwargs"}``."""
    ids = item.get("id")
    kind = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else ""
    kwargs = as_dict(item.get("kwargs"))
    return chat_message({**kwargs, "role": _role(kind.lower() or kwargs.get("type"))})


def _loose(value: Any, depth: int = 0) -> list[Msg]:
    if depth > 8:
        return []
    out: list[Msg] = []
    if isinstance(value, list):
        for item in value:
            out.extend(_loose(item, depth + 1))
        return out
    if not isinstance(value, dict):
        return out
    if value.get("lc") is not None and value.get("type") == "constructor":
        return [_langchain(value)]
    for key in ("messages", "generations", "choices", "output", "outputs"):
        if isinstance(value.get(key), (list, dict)):
            return _loose(value[key], depth + 1)
    if isinstance(value.get("message"), dict):
        inner = value["message"]
        return [_langchain(inner)] if inner.get("lc") is not None else [chat_message(inner)]
    if "parts" in value and "role" in value:
        return parts_messages([value]) or []
    if "role" in value or ("type" in value and "content" in value):
        return [chat_message(value)]
    if isinstance(value.get("text"), str):  # a generation without a message
        return [Msg("assistant", value["text"])]
    return out


def _plain(text: str, default_role: str) -> list[Msg]:
    """Plain text as OpenLIT writes it: ``role: text`` lines, else one message of the role."""
    marks = list(_PLAIN_ROLE.finditer(text))
    if not marks or marks[0].start() != 0:
        return [Msg(default_role, text)]
    out: list[Msg] = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append(Msg(_role(mark.group(1)), text[mark.end() : end].rstrip("\n")))
    return out


def loose_messages(value: Any, default_role: str) -> list[Msg] | None:
    """Messages from a value whose shape only the content tells: LangSmith, OpenLIT, events.

    JSON chat messages or GenAI parts, LangChain's serialised messages, ``{"messages"}``,
    ``{"generations"}`` and ``{"choices"}`` wrappers (LangSmith's ``gen_ai.prompt`` /
    ``gen_ai.completion``), or plain text (OpenLIT's ``gen_ai.content.prompt`` /
    ``gen_ai.content.completion`` events: ``role: text`` lines, else one message of
    ``default_role``). None when nothing was captured.
    """
    if value is None or (isinstance(value, str) and value.strip() in PLACEHOLDERS):
        return None
    ok, parsed = json_value(value)
    if ok and isinstance(parsed, dict | list):
        found = _loose(parsed)
        return found or None
    if isinstance(value, str) and value.strip():
        return _plain(value, default_role)
    return None


_INDEX = re.compile(r"^(\d+)\.(.+)\Z")


def flattened(attrs: Mapping[str, Any], prefix: str) -> list[Msg] | None:
    """Messages flattened into ``PREFIX.N.*`` attributes (OpenInference or older GenAI).

    Keys read under each message (with or without OpenInference's ``message.`` segment):
    ``role``, ``content``, ``contents.M.message_content.text``, ``tool_call_id``, ``name``,
    ``tool_calls.M.{tool_call.id | id}``, ``tool_calls.M.{tool_call.function.name | name}``,
    ``tool_calls.M.{tool_call.function.arguments | arguments}``, ``function_call.name`` /
    ``function_call.arguments``.
    """
    lead = prefix + "."
    rows: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(lead):
            continue
        found = _INDEX.match(key[len(lead) :])
        if found is None:
            continue
        rest = found.group(2)
        rest = rest[len("message.") :] if rest.startswith("message.") else rest
        rows.setdefault(int(found.group(1)), {})[rest] = value
    if not rows:
        return None
    out: list[Msg] = []
    for index in sorted(rows):
        row = rows[index]
        content = row.get("content")
        known = True
        if content is None:
            texts = [
                row[k]
                for k in sorted(row, key=_natural)
                if k.startswith("contents.") and k.endswith("message_content.text")
            ]
            content = "".join(t for t in texts if isinstance(t, str)) if texts else None
        text, known = parts_text(content) if content is not None else (None, True)
        calls: dict[int, dict[str, Any]] = {}
        for key, value in row.items():
            if not key.startswith("tool_calls."):
                continue
            found = _INDEX.match(key[len("tool_calls.") :])
            if found is None:
                continue
            sub = found.group(2)
            sub = sub[len("tool_call.") :] if sub.startswith("tool_call.") else sub
            sub = sub[len("function.") :] if sub.startswith("function.") else sub
            calls.setdefault(int(found.group(1)), {})[sub] = value
        tool_calls = [
            Call(_id(c.get("id")), str(c.get("name") or ""), c.get("arguments"))
            for _, c in sorted(calls.items())
        ]
        if "function_call.name" in row:
            tool_calls.append(
                Call(None, str(row["function_call.name"]), row.get("function_call.arguments"))
            )
        out.append(
            Msg(_role(row.get("role")), text, tool_calls, _id(row.get("tool_call_id")), known, None)
        )
    return out


def _natural(key: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in key.split(".")]


def tool_def(obj: Any) -> ToolDef | None:
    """A tool definition in any of the conventions' spellings, or None.

    OpenAI ``{"type": "function", "function": {...}}``, GenAI's flat ``{"type": "function",
    "name", "description", "parameters"}``, or ADK/Gemini's ``{"name", "description",
    "parameters" | "parameters_json_schema"}``.
    """
    ok, obj = json_value(obj)
    if not ok or not isinstance(obj, dict):
        return None
    function = as_dict(obj.get("function"), obj)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return None
    params = function.get("parameters", function.get("parameters_json_schema"))
    if params is None:
        params = function.get("input_schema")
    description = function.get("description")
    return ToolDef(
        name,
        description if isinstance(description, str) else "",
        params if isinstance(params, dict) else None,
    )


def _adk_content(content: Any) -> list[Msg]:
    if not isinstance(content, dict):
        return []
    role = _role(content.get("role"))
    parts = as_list(content.get("parts"))
    texts: list[str] = []
    calls: list[Call] = []
    out: list[Msg] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        call = part.get("function_call") or part.get("functionCall")
        if isinstance(call, dict):
            calls.append(Call(_id(call.get("id")), str(call.get("name") or ""), call.get("args")))
        response = part.get("function_response") or part.get("functionResponse")
        if isinstance(response, dict):
            value = response.get("response")
            out.append(
                Msg(
                    "tool", _as_text(value), [], _id(response.get("id")), True, response.get("name")
                )
            )
    if texts or calls or not out:
        out.insert(0, Msg(role, "".join(texts) if texts else None, calls))
    return out


def adk_request(text: Any) -> tuple[str | None, list[Msg], list[ToolDef]] | None:
    """ADK's ``llm_request`` JSON: ``(system instruction, messages, tool definitions)``."""
    ok, req = json_value(text)
    if not ok or not isinstance(req, dict) or "contents" not in req:
        return None
    config = as_dict(req.get("config"))
    system = config.get("system_instruction")
    system_text, _ = (
        parts_text(system)
        if not isinstance(system, dict)
        else parts_text([p.get("text") for p in system.get("parts") or [] if isinstance(p, dict)])
    )
    messages: list[Msg] = []
    for content in req.get("contents") or []:
        messages.extend(_adk_content(content))
    tools: list[ToolDef] = []
    for group in config.get("tools") or []:
        if isinstance(group, dict):
            for decl in group.get("function_declarations") or []:
                found = tool_def(decl)
                if found is not None:
                    tools.append(found)
    return system_text, messages, tools


def adk_response(text: Any) -> tuple[Msg | None, str | None, dict[str, Any]] | None:
    """ADK's ``llm_response`` JSON: ``(output message, model version, usage_metadata)``."""
    ok, resp = json_value(text)
    if not ok or not isinstance(resp, dict) or not resp:
        return None
    messages = _adk_content(resp.get("content"))
    message = messages[0] if messages else None
    version = resp.get("model_version")
    usage = as_dict(resp.get("usage_metadata"))
    return message, version if isinstance(version, str) else None, usage
