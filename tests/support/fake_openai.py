"""A fake OpenAI-compatible server on 127.0.0.1 (Chat Completions, Responses), started by tests.

Tests only. ``POST /v1/embeddings`` and ``POST /v1/moderations`` get a fixed answer in the API's
shape (`embeddings_body`, `moderations_body`). It answers ``POST /v1/chat/completions`` and
``POST /v1/responses`` with a
deterministic answer, as JSON or, for ``stream: true``, as the API's server-sent events (Chat
Completions: ``chat.completion.chunk`` events, a usage chunk when ``stream_options.
include_usage`` asks, then ``data: [DONE]``; Responses: ``response.created`` ...
``response.output_text.delta`` ... ``response.completed``), and records every request (its
path in ``paths``). Behaviour is set per instance:

- ``fail_first``: answer that many requests with HTTP 503 first (transient, retried);
- ``status``: answer every request with this HTTP status instead (e.g. 401), with the body
  ``error_body(headers)`` when given (a provider that echoes the key it was sent);
- ``rate_limit_first``: answer that many requests (after ``fail_first``) with HTTP 429 and
  the header ``Retry-After: retry_after`` (when ``retry_after`` is set);
- ``delay_s``: answer each request after this many seconds (a model's latency; benchmarks);
- ``answer``: a function ``request -> message dict`` (default: first call a ``kb.search`` tool
  call when tools are offered, then a text answer); a request whose system prompt asks for
  ``{"ranks": ...}`` is answered with ranks naming every candidate 1 (a judge call);
- ``usage``: a function ``request -> (prompt_tokens, completion_tokens)`` billing each request
  (default: the fixed ``prompt_tokens`` and ``completion_tokens``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "gpt-4.1-mini-2025-04-14"


def default_answer(request: dict[str, Any]) -> dict[str, Any]:
    messages = request.get("messages") or []
    system = str(messages[0].get("content")) if messages else ""
    if '"ranks"' in system:
        user = json.loads(messages[-1]["content"])
        ranks = {label: 1 for label in user["candidates"]}
        return {"role": "assistant", "content": json.dumps({"ranks": ranks})}
    tools = request.get("tools") or []
    if tools and not any(m.get("role") == "tool" for m in messages):
        name = tools[0]["function"]["name"]
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"query": "password"})},
                }
            ],
        }
    return {"role": "assistant", "content": "done"}


EMBEDDING_MODEL = "text-embedding-3-small"
MODERATION_MODEL = "omni-moderation-2024-09-26"


def embeddings_body(request: dict[str, Any]) -> dict[str, Any]:
    """The "Create embeddings" answer (API reference's shape): one 3-float vector an input,
    ``usage.prompt_tokens`` 4 an input."""
    inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [0.25, -0.5, float(i)]}
            for i in range(len(inputs))
        ],
        "model": EMBEDDING_MODEL,
        "usage": {"prompt_tokens": 4 * len(inputs), "total_tokens": 4 * len(inputs)},
    }


def moderations_body(request: dict[str, Any]) -> dict[str, Any]:
    """The "Create moderation" answer (API reference's shape): nothing flagged, no usage."""
    inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
    return {
        "id": "modr-1",
        "model": MODERATION_MODEL,
        "results": [
            {
                "flagged": False,
                "categories": {"violence": False},
                "category_scores": {"violence": 0.01},
            }
            for _ in inputs
        ],
    }


SIDE_ANSWERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "/v1/embeddings": embeddings_body,
    "/v1/moderations": moderations_body,
}


class FakeOpenAI:
    """The server's state; use `serve` to run it."""

    def __init__(
        self,
        *,
        fail_first: int = 0,
        status: int | None = None,
        answer: Callable[[dict[str, Any]], dict[str, Any]] = default_answer,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
        usage: Callable[[dict[str, Any]], tuple[int, int]] | None = None,
        rate_limit_first: int = 0,
        retry_after: str | None = None,
        delay_s: float = 0.0,
        error_body: Callable[[dict[str, str]], bytes] | None = None,
    ) -> None:
        self.fail_first = fail_first
        self.rate_limit_first = rate_limit_first
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.status = status
        self.error_body = error_body
        self.answer = answer
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.usage = usage
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.url = ""

    def handle(
        self, raw: bytes, headers: dict[str, str], path: str = "/v1/chat/completions"
    ) -> tuple[int, bytes]:
        with self.lock:
            request = json.loads(raw)
            self.requests.append(request)
            self.paths.append(path)
            self.headers.append(headers)
            n = len(self.requests)
        if n <= self.fail_first:
            return 503, b'{"error": {"message": "overloaded"}}'
        if n <= self.fail_first + self.rate_limit_first:
            return 429, b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.status is not None and self.error_body is not None:
            return self.status, self.error_body(headers)
        if self.status is not None:
            return self.status, b'{"error": {"message": "nope", "type": "invalid_request_error"}}'
        if path in SIDE_ANSWERS:
            body = json.dumps(SIDE_ANSWERS[path](request), indent=1).encode()
            with self.lock:
                self.bodies.append(body)
            return 200, body
        if path == "/v1/responses":
            body = responses_body(
                n, request, self.answer(_as_chat(request)), self._usage_body(request)
            )
            with self.lock:
                self.bodies.append(body)
            return 200, body
        if request.get("stream") is True:
            body = chat_stream(
                n, request, self.answer(request), self._usage_body(request, chat=True)
            )
            with self.lock:
                self.bodies.append(body)
            return 200, body
        prompt, completion = (
            self.usage(request) if self.usage else (self.prompt_tokens, self.completion_tokens)
        )
        body = json.dumps(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": MODEL_ID,
                "choices": [{"index": 0, "message": self.answer(request), "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
            indent=1,
        ).encode()
        with self.lock:
            self.bodies.append(body)
        return 200, body

    def _usage_body(self, request: dict[str, Any], chat: bool = False) -> dict[str, int]:
        prompt, completion = (
            self.usage(request) if self.usage else (self.prompt_tokens, self.completion_tokens)
        )
        if chat:
            return {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
        }


def _as_chat(request: dict[str, Any]) -> dict[str, Any]:
    """A Responses request seen as Chat Completions, for the ``answer`` function."""
    items = request.get("input")
    messages: list[dict[str, Any]] = []
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    for item in items if isinstance(items, list) else []:
        if item.get("type") == "function_call_output":
            messages.append({"role": "tool", "content": item.get("output")})
        elif "role" in item:
            messages.append({"role": item["role"], "content": item.get("content")})
    tools = [
        {"type": "function", "function": {"name": t.get("name")}}
        for t in request.get("tools") or []
    ]
    return {"messages": messages, "tools": tools}


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def chat_stream(
    n: int, request: dict[str, Any], message: dict[str, Any], usage: dict[str, int]
) -> bytes:
    """The Chat Completions event stream of ``message`` (content in two deltas)."""
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL_ID,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (None, chunk({"role": "assistant", "content": ""}))
    ]
    content = message.get("content") or ""
    half = len(content) // 2
    for part in (content[:half], content[half:]):
        if part:
            events.append((None, chunk({"content": part})))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {"index": i, "function": {"arguments": call["function"]["arguments"]}}
                        ]
                    }
                ),
            )
        )
    events.append((None, chunk({}, "tool_calls" if message.get("tool_calls") else "stop")))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return _sse(events)


def responses_body(
    n: int, request: dict[str, Any], message: dict[str, Any], usage: dict[str, int]
) -> bytes:
    """A Responses answer (JSON, or its event stream for ``stream: true``)."""
    output: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or []:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    text = message.get("content")
    if text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    response = {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "model": MODEL_ID,
        "output": output,
        "usage": usage,
    }
    if request.get("stream") is not True:
        return json.dumps(response, indent=1).encode()
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    seq = iter(range(1000))
    events: list[tuple[str | None, dict[str, Any] | str]] = []

    def add(name: str, **fields: Any) -> None:
        events.append((name, {"type": name, "sequence_number": next(seq), **fields}))

    add("response.created", response=pending)
    add("response.in_progress", response=pending)
    for index, item in enumerate(output):
        if item["type"] == "message":
            add(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            add(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            whole = item["content"][0]["text"]
            for piece in (whole[: len(whole) // 2], whole[len(whole) // 2 :]):
                add(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
            add(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=whole,
            )
            add(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": whole},
            )
        else:
            add(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            add(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            add(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        add("response.output_item.done", output_index=index, item=item)
    add("response.completed", response=response)
    return _sse(events)


@contextmanager
def serve(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Run ``fake`` on an ephemeral loopback port; ``fake.url`` is its ``/v1`` base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path not in (
                "/v1/chat/completions",
                "/v1/responses",
                "/v1/embeddings",
                "/v1/moderations",
            ):
                status, body = 404, b'{"error": "not found"}'
            else:
                status, body = fake.handle(raw, dict(self.headers), self.path)
            stream = body.startswith((b"data:", b"event:"))
            self.send_response(status)
            if status == 429 and fake.retry_after is not None:
                self.send_header("Retry-After", fake.retry_after)
            self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024  # hundreds of sandboxes may connect at once (benchmarks)

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
