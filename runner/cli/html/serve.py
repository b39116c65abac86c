"""Serve one rendered page on 127.0.0.1 (``sandbox-replay view``): loopback only, read-only.

The page is rendered once and served as bytes for ``GET /`` (and ``/index.html``); every other
path is 404 and every other method 405. The server binds 127.0.0.1 only (port 0: an ephemeral
port the kernel picks), sends the page's Content-Security-Policy as a header too, and no
``Server`` version. It runs until interrupted.

Loopback alone stops other machines, not a web page in the user's own browser: a site whose
name is rebound to 127.0.0.1 (DNS rebinding) would read the page as same-origin. So a request
whose ``Host`` header is not ``127.0.0.1:PORT`` or ``localhost:PORT`` (or is missing) is
answered 421 Misdirected Request (RFC 9110 §15.5.20) and gets nothing of the page.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable

__all__ = ["PageServer", "serve_page"]

HOST = "127.0.0.1"


class PageServer(http.server.ThreadingHTTPServer):
    """An HTTP server of one page on loopback.

    Args:
        page: the page's bytes.
        csp: its Content-Security-Policy.
        port: the port (0: ephemeral).
    """

    daemon_threads = True

    def __init__(self, page: bytes, csp: str, port: int = 0) -> None:
        self.page = page
        self.csp = csp
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return f"http://{HOST}:{self.server_address[1]}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: PageServer
    server_version = "sandbox-replay"
    sys_version = ""

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.headers.get("Host", "").lower() not in (f"{HOST}:{port}", f"localhost:{port}"):
            self.send_error(421)  # DNS rebinding: another site's name pointed at loopback
            return
        if self.path.split("?", 1)[0] not in ("/", "/index.html"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.server.page)))
        self.send_header("Content-Security-Policy", self.server.csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(self.server.page)

    def do_HEAD(self) -> None:
        self.send_error(405)

    do_POST = do_PUT = do_DELETE = do_HEAD

    def log_message(self, format: str, *args: object) -> None:
        return  # no request lines on the terminal


def serve_page(
    page: bytes,
    csp: str,
    *,
    port: int = 0,
    on_ready: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``page`` until interrupted (or ``stop`` is set); tell ``on_ready`` the address.

    Raises:
        OSError: the port cannot be bound.
    """
    with PageServer(page, csp, port) as server:
        on_ready(server.url)
        if stop is None:
            server.serve_forever(poll_interval=0.2)
            return
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
        thread.start()
        stop.wait()
        server.shutdown()
        thread.join()
