"""Serve a fake's answers (tests/support/fake_openai.py, fake_anthropic.py) event by event.

Tests only, loopback only. The fakes build each body whole; this server sends a server-sent
event stream one event per write (HTTP/1.0, no Content-Length: the body ends when the socket
closes), and with ``hold`` set it sends the first event, then waits (at most 10 s) for
``release`` before the rest: a client that gets the first event while the server still holds
the rest shows the stream was passed on as it arrived (``held_too_long`` says the wait ran out).
Non-stream answers are sent as the fakes' own servers send them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Streamer:
    """The stream server's state: ``hold``, ``release``, ``held_too_long``, ``url``."""

    def __init__(self, handle: Callable[[bytes, dict[str, str], str], tuple[int, bytes]]) -> None:
        self.handle = handle
        self.hold = False
        self.release = threading.Event()
        self.held_too_long = False
        self.url = ""


@contextmanager
def serve(streamer: Streamer, suffix: str = "") -> Iterator[Streamer]:
    """Run ``streamer`` on an ephemeral loopback port; ``url`` is its base URL plus ``suffix``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, body = streamer.handle(raw, dict(self.headers), self.path.split("?")[0])
            if not body.startswith((b"data:", b"event:")):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.end_headers()
            events = [event + b"\n\n" for event in body.split(b"\n\n") if event]
            assert b"".join(events) == body
            for position, event in enumerate(events):
                self.wfile.write(event)
                self.wfile.flush()
                if position == 0 and streamer.hold and not streamer.release.wait(10):
                    streamer.held_too_long = True
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    streamer.url = f"http://127.0.0.1:{server.server_address[1]}{suffix}"
    try:
        yield streamer
    finally:
        server.shutdown()
        server.server_close()


def openai_handler(fake: Any) -> Callable[[bytes, dict[str, str], str], tuple[int, bytes]]:
    """`Streamer` handle of a `tests.support.fake_openai.FakeOpenAI`."""
    return lambda raw, headers, path: fake.handle(raw, headers, path)


def anthropic_handler(fake: Any) -> Callable[[bytes, dict[str, str], str], tuple[int, bytes]]:
    """`Streamer` handle of a `tests.support.fake_anthropic.FakeAnthropic`."""

    def handle(raw: bytes, headers: dict[str, str], path: str) -> tuple[int, bytes]:
        status, body, _ = fake.handle(raw, headers)
        return status, body

    return handle
