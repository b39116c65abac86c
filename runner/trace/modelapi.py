"""The model HTTP APIs the official SDKs speak, as a trace sees them: routes, model id, usage.

Standard library only, Python 3.9+ (`runner.sdk` record mode uses it in users' processes).
The same vocabulary as the in-sandbox gateway's: an API is ``chat_completions``
(``POST …/chat/completions``), ``responses`` (``POST …/responses``) or ``messages`` (``POST
…/messages``, Anthropic), or one of the requests next to them (``embeddings``, ``moderations``,
``count_tokens``: ``POST …/messages/count_tokens``; ``responses_retrieve``: ``GET
…/responses/{id}``); a model call's trace line carries it as ``api``. `summarise` reads
the model id and the usage from a raw response body: a JSON object or, for ``stream: true``,
the raw server-sent event stream (Chat Completions ``chat.completion.chunk`` events closed by
``data: [DONE]``; Responses ``response.created`` … ``response.completed``; Messages
``message_start`` … ``message_delta`` … ``message_stop``).

Invariant: nothing here changes a body; the raw text is what the trace records.
"""

import json
import re
from typing import Any, Dict, Iterator, List, Literal, Optional, Tuple, get_args

__all__ = [
    "APIS",
    "ApiName",
    "api_for",
    "is_tracing_ingest",
    "retrieval_request",
    "sse_events",
    "summarise",
    "usage_tokens",
]

ApiName = Literal[
    "chat_completions",
    "responses",
    "messages",
    "embeddings",
    "moderations",
    "count_tokens",
    "responses_retrieve",
]
"""The model APIs a call line's ``api`` may name (one list: the trace models and workflow
``model.apis`` take this type; docs/trace.schema.json's enum says the same)."""
APIS: Tuple[str, ...] = get_args(ApiName)
_SUFFIXES = (
    ("/chat/completions", "chat_completions"),
    ("/responses", "responses"),
    ("/messages/count_tokens", "count_tokens"),
    ("/messages", "messages"),
    ("/embeddings", "embeddings"),
    ("/moderations", "moderations"),
)
# ``GET …/responses/{id}``: a retrieval of a stored response, recorded as ``{"response_id"}``.
_RETRIEVE = re.compile(r"/responses/([A-Za-z0-9_-]{1,256})\Z")
MAX_EVENTS = 100000


def api_for(method: str, path: str) -> Optional[str]:
    """The API of a request (`APIS`), or None when it is not one a trace records.

    ``POST`` to a path ending in one of the endpoints counts (a base URL may put any prefix
    before it, e.g. ``/v1`` or an Azure deployment): the three model APIs, and embeddings,
    moderations and Anthropic token counting; and ``GET …/responses/{id}``
    (``responses_retrieve``, its request `retrieval_request`).
    """
    trimmed = path.split("?", 1)[0].rstrip("/")
    if method.upper() == "GET":
        return "responses_retrieve" if _RETRIEVE.search(trimmed) else None
    if method.upper() != "POST":
        return None
    for suffix, api in _SUFFIXES:
        if trimmed.endswith(suffix):
            return api
    return None


def retrieval_request(path: str) -> Optional[Dict[str, Any]]:
    """The request a retrieval ``GET …/responses/{id}`` is recorded with: ``{"response_id"}``."""
    found = _RETRIEVE.search(path.split("?", 1)[0].rstrip("/"))
    return {"response_id": found.group(1)} if found else None


def is_tracing_ingest(path: str) -> bool:
    """True for the OpenAI Agents SDK's trace export (``POST …/traces/ingest``), any host."""
    return path.split("?", 1)[0].rstrip("/").endswith("/traces/ingest")


def sse_events(text: str) -> Iterator[Tuple[Optional[str], str]]:
    r"""``(event name, data)`` of each event of a server-sent event stream, in order.

    Lines are split on ``\n`` (``\r\n`` accepted); the ``data:`` lines of one event are joined
    with ``\n``; comments (``:``) and other fields are skipped. At most `MAX_EVENTS` events.
    """
    event: Optional[str] = None
    data: List[str] = []
    count = 0
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line:
            if data:
                yield event, "\n".join(data)
                count += 1
                if count >= MAX_EVENTS:
                    return
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)


def _object(text: str) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def summarise(api: Optional[str], body: str, stream: bool) -> Tuple[Optional[str], Dict[str, Any]]:
    """The model id and the usage a raw response body states (None and {} when it does not).

    Args:
        api: one of `APIS` (None: read a JSON body's top-level ``model``/``usage`` only).
        body: the raw body text.
        stream: the body is a server-sent event stream.

    Returns:
        ``(model, usage)``; for a stream the first model id named, and the usage objects of
        its events merged in order (Messages: ``message_start``'s, updated by each
        ``message_delta``, whose counts are cumulative).
    """
    if not stream:
        parsed = _object(body) or {}
        named, stated = parsed.get("model"), parsed.get("usage")
        return (named if isinstance(named, str) else None), (
            dict(stated) if isinstance(stated, dict) else {}
        )
    model: Optional[str] = None
    usage: Dict[str, Any] = {}
    for _, data in sse_events(body):
        event = _object(data)
        if event is None:
            continue
        holder: Any = event
        if api == "responses":
            holder = event.get("response")
        elif api == "messages" and event.get("type") == "message_start":
            holder = event.get("message")
        if not isinstance(holder, dict):
            continue
        if isinstance(holder.get("model"), str):
            model = model or holder["model"]
        found = holder.get("usage")
        if isinstance(found, dict):
            usage.update(found)
    return model, usage


def usage_tokens(usage: Any) -> Tuple[int, int]:
    """``(tokens in, tokens out)`` of a usage object of any of the APIs (0 for what is absent).

    Chat Completions says ``prompt_tokens``/``completion_tokens``; Responses and Messages say
    ``input_tokens``/``output_tokens`` (Messages' cache counts are not added here).
    """
    if not isinstance(usage, dict):
        return 0, 0

    def count(*keys: str) -> int:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return 0

    return count("prompt_tokens", "input_tokens"), count("completion_tokens", "output_tokens")
