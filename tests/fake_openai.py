"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1, started by the tests.

Tests only. It answers ``POST /chat/completions`` with a deterministic completion and records
every request. Behaviour is set per instance:

- ``fail_first``: answer that many requests with HTTP 503 first (transient, retried);
- ``status``: answer every request with this HTTP status instead (e.g. 401);
- ``answer``: a function ``request -> message dict`` (default: first call a ``kb.search`` tool
  call when tools are offered, then a text answer); a request whose system prompt asks for
  ``{"ranks": ...}`` is answered with ranks naming every candidate 1 (a judge call);
- ``usage``: a function ``request -> (prompt_tokens, completion_tokens)`` billing each request
  (default: the fixed ``prompt_tokens`` and ``completion_tokens``).
"""

from __future__ import annotations

import json
import threading
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
    ) -> None:
        self.fail_first = fail_first
        self.status = status
        self.answer = answer
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.usage = usage
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.url = ""

    def handle(self, raw: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        with self.lock:
            request = json.loads(raw)
            self.requests.append(request)
            self.headers.append(headers)
            n = len(self.requests)
        if n <= self.fail_first:
            return 503, b'{"error": {"message": "overloaded"}}'
        if self.status is not None:
            return self.status, b'{"error": {"message": "nope", "type": "invalid_request_error"}}'
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


@contextmanager
def serve(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Run ``fake`` on an ephemeral loopback port; ``fake.url`` is its ``/v1`` base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                status, body = 404, b'{"error": "not found"}'
            else:
                status, body = fake.handle(raw, dict(self.headers))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
