"""The gateway allow-list: which parts of a program's model request may reach a provider.

A program step's request is forwarded with the host's key (`runner.providers.gateway`). The
three APIs let a request do much more than ask a model for text: run *provider-side tools*
(remote MCP servers with their URL and headers, web search and fetch, code interpreter, file
search, computer use, image generation), have the provider *fetch URLs* (image, audio, file
and document parts), and read *stored state* (``previous_response_id``, ``conversation``, a
stored ``prompt``, file ids, item references, a code-execution ``container``). Each of those
reaches the network or bills input that the request's bytes do not bound (N02 and
N03), outside the effect classes and unseen by the outbound-destination log. So a request is
forwarded only when every field is on this list of fields the project decided are *inert*:
messages of text (and the model's own tool calls, tool results and reasoning passed back),
*function* tools that the program runs itself, and sampling and output settings. Anything
else, an unknown field included (fail closed: a field an API adds tomorrow is refused until
it is listed here), is refused with `NotInert`, which names the field by its JSON path; the
program gets the API's own error shape (HTTP 400, ``param`` the path).

What is refused, by kind (`NotInert.kind`):

- ``provider_tool``: a model that searches the web on every call (OpenAI's ``*-search-preview``,
  ``*-search-api``, ``*-deep-research``; `check_model`, on the model forwarded); a tool or
  tool choice whose ``type`` is not ``function`` (OpenAI) or that
  has a ``type`` other than ``custom`` (Anthropic: server tools such as ``web_search_*``,
  ``web_fetch_*``, ``code_execution_*``; Anthropic-defined client tools too, which cannot be
  told from server tools by their shape), ``mcp_servers``, ``web_search_options``, an input
  item or content block produced by a provider-side tool;
- ``media``: image, audio, file and document parts, inline (``data:`` URLs, base64) or not:
  a remote URL is fetched by the provider, a file id is stored state, and an image bills a
  per-model token count that no request byte bounds (N03: 400 image URLs in 28 kB billed
  619 k tokens); audio output (``audio``, ``modalities`` with ``audio``);
- ``stored_state``: ``previous_response_id``, ``conversation``, ``prompt``, ``background``,
  ``store: true``, ``item_reference`` items, reasoning items without ``encrypted_content``
  (their content would be read from storage), an assistant ``audio`` reference, Anthropic's
  ``container``; every Responses request is forwarded with ``store: false`` (the API's default
  is to store: a shadow run must not write to the account; `FORCED`);
- ``billing``: settings that bill other than the price table and the reservation assume
  (``prediction``, a ``service_tier`` other than the default, Anthropic ``speed``);
- ``beta_header``: ``anthropic-beta`` and ``openai-beta`` (betas switch on the features above);
- ``unknown``: any field, item or block type not listed.

Nothing here opens a refused field: no policy entry allows one yet (a later one would have to
show its destinations in the plan, the report and the egress gate).

Where the check runs: on the host, in `runner.episode.gatewayhost.parse_request`, before a
request becomes an `runner.providers.apis.ApiCall` -- where the key is. A check in the
sandbox's gateway would run in the sandbox, next to the code it judges. In ``reproduce``
nothing is forwarded (every request is served from the trace), so the check does not run
there: a trace recorded elsewhere (``runner.sdk.record`` in production) replays as recorded.

Sources (each API's documented request body; the field lists are those of the official SDKs'
request types generated from the same OpenAPI specifications, ``openai`` 3.57.0,
``anthropic`` 2.14.0):

- OpenAI Chat Completions, "Create chat completion":
  https://platform.openai.com/docs/api-reference/chat/create
  (``openai/types/chat/completion_create_params.py``);
- OpenAI Responses, "Create a model response":
  https://platform.openai.com/docs/api-reference/responses/create
  (``openai/types/responses/response_create_params.py``, input items
  ``response_input_param.py``);
- Anthropic Messages, "Messages": https://docs.anthropic.com/en/api/messages
  (``anthropic/types/message_create_params.py``; server tools and ``mcp_servers``:
  https://docs.anthropic.com/en/docs/agents-and-tools/mcp-connector);
- the requests next to them: OpenAI "Create embeddings" (``embedding_create_params.py``:
  ``input`` text or token ids, ``model``, ``dimensions``, ``encoding_format``, ``user``),
  "Create moderation" (``moderation_create_params.py``: ``input`` text; image parts are
  ``media``), Anthropic "Count tokens in a message" (``message_count_tokens_params.py``: the
  Messages checks, without the output settings); a retrieval ``GET /v1/responses/{id}`` holds
  its ``response_id`` only and is never forwarded (`runner.providers.retrieval`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from runner.providers.apis import FAMILY

__all__ = ["FORCED", "NotInert", "check_model", "check_request"]


class NotInert(ValueError):
    """A request field the gateway does not forward.

    Attributes:
        param: the field's JSON path in the request (``tools[0].type``), or ``header NAME``.
        kind: ``provider_tool``, ``media``, ``stored_state``, ``billing``, ``beta_header`` or
            ``unknown`` (the module docstring says what each covers).
    """

    def __init__(self, param: str, kind: str, why: str) -> None:
        super().__init__(f"{param}: {why}")
        self.param = param
        self.kind = kind


# Fields set on the body forwarded, per API (the program's request is recorded as it came).
FORCED: dict[str, dict[str, Any]] = {"responses": {"store": False}}

_SETTINGS_OPENAI = frozenset(
    {
        "model",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "parallel_tool_calls",
        "user",
        "safety_identifier",
        "metadata",
        "prompt_cache_key",
    }
)
_CHAT_SETTINGS = _SETTINGS_OPENAI | {
    "max_tokens",
    "max_completion_tokens",
    "n",
    "response_format",
    "reasoning_effort",
    "verbosity",
    "function_call",
}
_RESPONSES_SETTINGS = _SETTINGS_OPENAI | {
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "reasoning",
    "text",
    "truncation",
}
_MESSAGES_SETTINGS = frozenset(
    {
        "model",
        "max_tokens",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "thinking",
        "output_config",
        "cache_control",
    }
)
# Anthropic "Count tokens in a message": the Messages request minus its output settings.
_COUNT_TOKENS_SETTINGS = frozenset({"model", "thinking", "output_config", "cache_control"})
# OpenAI "Create embeddings": input, model and the output's form.
_EMBEDDINGS_SETTINGS = frozenset({"model", "dimensions", "encoding_format", "user"})
_STORED = {
    "previous_response_id": "a stored response: its whole history is billed as input",
    "conversation": "a stored conversation: its items are billed as input",
    "prompt": "a stored prompt template",
    "background": "a response kept running and stored on the provider",
    "background_options": "a response kept running and stored on the provider",
    "container": "a code-execution container kept on the provider",
    "context_management": "provider-side context state",
    "compaction": "provider-side context state",
    "diagnostics": "refers to an earlier stored request",
}
_PROVIDER_TOOLS = {
    "web_search_options": "web search run by the provider",
    "mcp_servers": "remote MCP servers the provider connects to",
}
_MEDIA = {"audio": "audio output", "modalities": "output modalities other than text"}
_BILLING = {"prediction": "predicted output is billed beyond the completion cap"}
_DEFAULT_TIERS = {"service_tier": ("auto", "default", "standard_only")}
_INCLUDABLE = frozenset({"reasoning.encrypted_content", "message.output_text.logprobs"})
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_BETA_HEADERS = frozenset({"anthropic-beta", "openai-beta"})

# Keys of list elements, by what they are (a key not listed: ``unknown``): the documented keys
# of each shape (the SDKs' request types), including the fields an SDK's ``model_dump`` of an
# answer's item carries when a program passes it back (``caller``, ``phase``, ``status``).
_KEYS = {
    "chat_message": {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}
    | {"function_call"},
    "chat_tool_call": {"id", "type", "function"},
    "chat_tool": {"type", "function"},
    "function": {"name", "description", "parameters", "strict", "arguments"},
    "responses_tool": {"type", "name", "description", "parameters", "strict", "output_schema"}
    | {"allowed_callers", "async", "defer_loading"},
    "message_item": {"type", "role", "content", "id", "status", "phase"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status", "namespace"}
    | {"caller", "async"},
    "function_call_output": {"type", "call_id", "output", "id", "status", "caller", "name"}
    | {"namespace"},
    "reasoning": {"type", "id", "summary", "content", "encrypted_content", "status"},
    "anthropic_message": {"role", "content"},
    "anthropic_tool": {"type", "name", "description", "input_schema", "cache_control", "strict"}
    | {"allowed_callers", "defer_loading", "eager_input_streaming", "input_examples"},
}
# Content part types per API, with their keys; a type not listed is refused with its kind.
_PARTS = {
    "chat": {
        "text": {"type", "text", "prompt_cache_breakpoint"},
        "refusal": {"type", "refusal"},
    },
    "responses": {
        "input_text": {"type", "text", "prompt_cache_breakpoint"},
        "output_text": {"type", "text", "annotations", "logprobs"},
        "refusal": {"type", "refusal"},
        "summary_text": {"type", "text"},
        "reasoning_text": {"type", "text"},
    },
    "messages": {
        "text": {"type", "text", "cache_control", "citations"},
        "tool_use": {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
        "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"}
        | {"toolset_name"},
        "thinking": {"type", "thinking", "signature"},
        "redacted_thinking": {"type", "data"},
    },
}
_MEDIA_PARTS = frozenset(
    {"image_url", "input_audio", "file", "input_image", "input_file", "image", "document"}
)
_STORED_PARTS = frozenset({"item_reference", "container_upload", "search_result"})


def _kind_of_type(kind: str) -> tuple[str, str]:
    if kind in _MEDIA_PARTS:
        return "media", "media is fetched, stored or billed by the provider beyond the request"
    if kind in _STORED_PARTS:
        return "stored_state", "refers to state stored on the provider"
    if kind.endswith(("_call", "_call_output", "_result", "tool_use")) or kind.startswith("mcp"):
        return "provider_tool", "a call or result of a tool that is not a function tool"
    return "unknown", "not a type the gateway forwards"


def _obj(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise NotInert(path, "unknown", "must be an object")
    return value


def _keys(value: Mapping[str, Any], allowed: set[str] | frozenset[str], path: str) -> None:
    for key in value:
        if key not in allowed:
            raise NotInert(f"{path}.{key}", "unknown", "not a field the gateway forwards")


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise NotInert(path, "unknown", "must be an array")
    return value


def _parts(api: str, content: Any, path: str) -> None:
    """A content value: a string, or an array of parts of the types `_PARTS` lists."""
    if isinstance(content, str) or content is None:
        return
    for i, part in enumerate(_list(content, path)):
        where = f"{path}[{i}]"
        part = _obj(part, where)
        kind = part.get("type")
        allowed = _PARTS[api].get(kind) if isinstance(kind, str) else None
        if allowed is None:
            refused, why = _kind_of_type(str(kind))
            raise NotInert(f"{where}.type", refused, f"{str(kind)[:64]!r}: {why}")
        _keys(part, allowed, where)
        if kind == "tool_result":
            _parts(api, part.get("content"), f"{where}.content")


def _function_tool(tool: Any, path: str, *, nested: bool, keys: str = "") -> None:
    """A function tool (or a tool call): ``type`` ``function``, the keys of its shape.

    ``nested``: the Chat Completions shape (``{type, function: {...}}``); else the Responses
    one (the function's fields at the top). ``keys`` names the `_KEYS` entry of the object.
    """
    tool = _obj(tool, path)
    kind = tool.get("type")
    if kind != "function":
        raise NotInert(
            f"{path}.type",
            "provider_tool",
            f"{str(kind)[:64]!r} is not a function tool; only function tools are forwarded",
        )
    if nested:
        _keys(tool, _KEYS[keys or "chat_tool"], path)
        _keys(_obj(tool.get("function"), f"{path}.function"), _KEYS["function"], f"{path}.function")
    else:
        _keys(tool, _KEYS[keys or "responses_tool"], path)


def _tool_choice(value: Any, path: str, *, nested: bool) -> None:
    if isinstance(value, str):
        return
    choice = _obj(value, path)
    kind = choice.get("type")
    if kind == "allowed_tools":
        inner = choice.get("allowed_tools") if nested else choice
        for i, tool in enumerate(_list(_obj(inner, path).get("tools"), f"{path}.tools")):
            _function_tool(tool, f"{path}.tools[{i}]", nested=nested)
    elif kind != "function":
        raise NotInert(
            f"{path}.type", "provider_tool", f"{str(kind)[:64]!r}: only function tools are chosen"
        )


def _common(
    request: Mapping[str, Any], settings: frozenset[str], checked: Mapping[str, Any]
) -> None:
    """The top-level fields: settings pass, the named kinds refuse, unknown ones too."""
    for key, value in request.items():
        if key in checked or key in settings:
            continue
        if key in _STORED:
            raise NotInert(key, "stored_state", _STORED[key])
        if key in _PROVIDER_TOOLS:
            raise NotInert(key, "provider_tool", _PROVIDER_TOOLS[key])
        if key == "store":
            if value not in (False, None):
                raise NotInert(key, "stored_state", "the response would be stored on the provider")
            continue
        if key == "modalities" and value in (None, ["text"]):
            continue
        if key in _MEDIA:
            raise NotInert(key, "media", _MEDIA[key])
        if key in _DEFAULT_TIERS:
            if value not in (None, *_DEFAULT_TIERS[key]):
                raise NotInert(key, "billing", "a service tier the price table does not price")
            continue
        if key in _BILLING:
            raise NotInert(key, "billing", _BILLING[key])
        raise NotInert(key, "unknown", "not a field the gateway forwards")


def _chat(request: Mapping[str, Any]) -> None:
    def messages(value: Any) -> None:
        for i, message in enumerate(_list(value, "messages")):
            where = f"messages[{i}]"
            message = _obj(message, where)
            if "audio" in message:
                raise NotInert(f"{where}.audio", "stored_state", "a stored audio response")
            _keys(message, _KEYS["chat_message"], where)
            _parts("chat", message.get("content"), f"{where}.content")
            for j, call in enumerate(_list(message.get("tool_calls") or [], f"{where}.tool_calls")):
                _function_tool(call, f"{where}.tool_calls[{j}]", nested=True, keys="chat_tool_call")

    def tools(value: Any) -> None:
        for i, tool in enumerate(_list(value, "tools")):
            _function_tool(tool, f"tools[{i}]", nested=True)

    def functions(value: Any) -> None:
        for i, function in enumerate(_list(value, "functions")):
            _keys(_obj(function, f"functions[{i}]"), _KEYS["function"], f"functions[{i}]")

    checked: dict[str, Callable[[Any], None]] = {
        "messages": messages,
        "tools": tools,
        "functions": functions,
        "tool_choice": lambda v: _tool_choice(v, "tool_choice", nested=True),
    }
    _run(request, _CHAT_SETTINGS, checked)


def _responses(request: Mapping[str, Any]) -> None:
    def item(value: Any, where: str) -> None:
        entry = _obj(value, where)
        kind = entry.get("type", "message")
        if kind == "message":
            _keys(entry, _KEYS["message_item"], where)
            _parts("responses", entry.get("content"), f"{where}.content")
        elif kind in ("function_call", "function_call_output", "reasoning"):
            _keys(entry, _KEYS[str(kind)], where)
            if kind == "function_call_output":
                _parts("responses", entry.get("output"), f"{where}.output")
            if kind == "reasoning":
                if not isinstance(entry.get("encrypted_content"), str):
                    raise NotInert(
                        f"{where}.encrypted_content",
                        "stored_state",
                        "a reasoning item without its encrypted content is read from storage",
                    )
                _parts("responses", entry.get("summary") or [], f"{where}.summary")
                _parts("responses", entry.get("content") or [], f"{where}.content")
        else:
            refused, why = _kind_of_type(str(kind))
            raise NotInert(f"{where}.type", refused, f"{str(kind)[:64]!r}: {why}")

    def input_(value: Any) -> None:
        if isinstance(value, str):
            return
        for i, entry in enumerate(_list(value, "input")):
            item(entry, f"input[{i}]")

    def tools(value: Any) -> None:
        for i, tool in enumerate(_list(value, "tools")):
            _function_tool(tool, f"tools[{i}]", nested=False)

    def include(value: Any) -> None:
        for i, name in enumerate(_list(value, "include")):
            if name not in _INCLUDABLE:
                raise NotInert(
                    f"include[{i}]", "provider_tool", f"{str(name)[:64]!r}: not an inert output"
                )

    checked: dict[str, Callable[[Any], None]] = {
        "input": input_,
        "tools": tools,
        "include": include,
        "tool_choice": lambda v: _tool_choice(v, "tool_choice", nested=False),
    }
    _run(request, _RESPONSES_SETTINGS, checked)


def _messages(request: Mapping[str, Any], settings: frozenset[str] = _MESSAGES_SETTINGS) -> None:
    def messages(value: Any) -> None:
        for i, message in enumerate(_list(value, "messages")):
            where = f"messages[{i}]"
            _keys(_obj(message, where), _KEYS["anthropic_message"], where)
            _parts("messages", message.get("content"), f"{where}.content")

    def tools(value: Any) -> None:
        for i, tool in enumerate(_list(value, "tools")):
            where = f"tools[{i}]"
            tool = _obj(tool, where)
            if tool.get("type", "custom") != "custom":
                kind = str(tool.get("type"))[:64]
                raise NotInert(
                    f"{where}.type",
                    "provider_tool",
                    f"{kind!r} is an Anthropic-defined tool; only custom tools are forwarded",
                )
            _keys(tool, _KEYS["anthropic_tool"], where)

    def tool_choice(value: Any) -> None:
        choice = _obj(value, "tool_choice")
        if choice.get("type") not in ("auto", "any", "tool", "none"):
            raise NotInert("tool_choice.type", "unknown", "not a tool choice the gateway forwards")

    checked: dict[str, Callable[[Any], None]] = {
        "messages": messages,
        "system": lambda v: _parts("messages", v, "system"),
        "tools": tools,
        "tool_choice": tool_choice,
    }
    _run(request, settings, checked)


def _count_tokens(request: Mapping[str, Any]) -> None:
    """Token counting takes a Messages request without the output settings."""
    _messages(request, _COUNT_TOKENS_SETTINGS)


def _embeddings(request: Mapping[str, Any]) -> None:
    def input_(value: Any) -> None:
        if isinstance(value, str):
            return
        for i, entry in enumerate(_list(value, "input")):
            tokens = entry if isinstance(entry, list) else [entry]
            if not isinstance(entry, str) and not all(
                isinstance(t, int) and not isinstance(t, bool) for t in tokens
            ):
                raise NotInert(f"input[{i}]", "unknown", "not text or token ids")

    _run(request, _EMBEDDINGS_SETTINGS, {"input": input_})


def _moderations(request: Mapping[str, Any]) -> None:
    def input_(value: Any) -> None:
        if isinstance(value, str):
            return
        for i, entry in enumerate(_list(value, "input")):
            if isinstance(entry, str):
                continue
            part = _obj(entry, f"input[{i}]")
            kind = part.get("type")
            if kind != "text":
                refused, why = _kind_of_type(str(kind))
                raise NotInert(f"input[{i}].type", refused, f"{str(kind)[:64]!r}: {why}")
            _keys(part, {"type", "text"}, f"input[{i}]")

    _run(request, frozenset({"model"}), {"input": input_})


def _retrieve(request: Mapping[str, Any]) -> None:
    _keys(request, {"response_id"}, "request")


def _run(
    request: Mapping[str, Any],
    settings: frozenset[str],
    checked: Mapping[str, Callable[[Any], None]],
) -> None:
    _common(request, settings, checked)
    for key, check in checked.items():
        if key in request:
            check(request[key])


_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "chat_completions": _chat,
    "responses": _responses,
    "messages": _messages,
    "embeddings": _embeddings,
    "moderations": _moderations,
    "count_tokens": _count_tokens,
    "responses_retrieve": _retrieve,
}


# OpenAI models that search the web on every request, no tool asked ("Web search", Chat
# Completions: gpt-4o-search-preview, gpt-4o-mini-search-preview, gpt-5-search-api;
# https://platform.openai.com/docs/guides/tools-web-search), and the deep-research models
# (which require a provider-side tool anyway). A list of names: a new such model is not known
# here until it is added (the tools, media and state checks above do not depend on names).
_SEARCHING_MODEL = re.compile(r"search-preview|search-api|deep-research", re.IGNORECASE)


def check_model(api: str, model: Any) -> None:
    """Refuse a forwarded ``model`` that reaches the web by itself (OpenAI's search models).

    Args:
        api: the request's API.
        model: the ``model`` of the body to forward (after the step's model name applied).

    Raises:
        NotInert: an OpenAI-family request for a model `_SEARCHING_MODEL` names.
    """
    if FAMILY.get(api) == "openai" and isinstance(model, str) and _SEARCHING_MODEL.search(model):
        raise NotInert("model", "provider_tool", f"{model[:64]!r} searches the web on every call")


def check_request(api: str, request: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """Refuse a request that holds anything but the inert fields of ``api``.

    Args:
        api: one of `runner.providers.apis.APIS`.
        request: the program's request body (a decoded JSON object).
        headers: the passed request headers (lower-case names).

    Raises:
        NotInert: the first field that is not inert (its path, kind and why).
        KeyError: ``api`` is not one of them.
    """
    for name, value in headers.items():
        if name in _BETA_HEADERS:
            raise NotInert(f"header {name}", "beta_header", "beta features are not forwarded")
        if name == "anthropic-version" and not _VERSION.match(value):
            raise NotInert(f"header {name}", "unknown", "not a version date (YYYY-MM-DD)")
    _CHECKS[api](request)
