"""A fake Anthropic Messages API server on 127.0.0.1, started by the tests.

Tests only. It answers ``POST /v1/messages`` with a deterministic message, as JSON or, for
``stream: true``, as the Messages event stream (``message_start``, ``content_block_start``,
``ping``, ``content_block_delta`` (``text_delta`` / ``input_json_delta``),
``content_block_stop``, ``message_delta`` with the cumulative ``output_tokens``,
``message_stop``), and records every request and its headers. Default answer: a ``tool_use``
of the first tool offered when no ``tool_result`` was sent yet, else a text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "claude-sonnet-4-20250514"


def default_answer(request: dict[str, Any]) -> list[dict[str, Any]]:
    messages = request.get("messages") or []
    tools = request.get("tools") or []
    answered = any(
        isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
        for m in messages
    )
    if tools and not answered:
        return [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": tools[0]["name"],
                "input": {"query": "password"},
            }
        ]
    return [{"type": "text", "text": "done from claude"}]


class FakeAnthropic:
    """The server's state; use `serve` to run it."""

    def __init__(
        self,
        *,
        status: int | None = None,
        answer: Callable[[dict[str, Any]], list[dict[str, Any]]] = default_answer,
        input_tokens: int = 120,
        output_tokens: int = 30,
    ) -> None:
        self.status = status
        self.answer = answer
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.requests: list[dict[str, Any]] = []
        self.counted: list[dict[str, Any]] = []  # the count_tokens requests
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.url = ""

    def handle(self, raw: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        with self.lock:
            request = json.loads(raw)
            self.requests.append(request)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            n = len(self.requests)
        if self.status is not None:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
            return self.status, json.dumps(error).encode(), "application/json"
        content = self.answer(request)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": MODEL_ID,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
        }
        if request.get("stream") is True:
            body, kind = messages_stream(message), "text/event-stream"
        else:
            body, kind = json.dumps(message, indent=1).encode(), "application/json"
        with self.lock:
            self.bodies.append(body)
        return 200, body, kind


def messages_stream(message: dict[str, Any]) -> bytes:
    """The Messages event stream of ``message``."""
    events: list[tuple[str, dict[str, Any]]] = []
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
    }
    events.append(("message_start", {"type": "message_start", "message": start}))
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            events.append(("ping", {"type": "ping"}))
            text = block["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()


@contextmanager
def serve(fake: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """Run ``fake`` on an ephemeral loopback port; ``fake.url`` is its base URL (no /v1)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            route = self.path.split("?")[0]
            if route == "/v1/messages/count_tokens":  # "Count tokens in a message": free
                fake.counted.append(json.loads(raw))
                status, kind = 200, "application/json"
                body = json.dumps({"input_tokens": 7 * len(fake.counted[-1]["messages"])}).encode()
            elif route != "/v1/messages":
                status, body, kind = 404, b'{"type":"error"}', "application/json"
            else:
                status, body, kind = fake.handle(raw, dict(self.headers))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
