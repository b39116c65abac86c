"""Serve one rendered page on 127.0.0.1 (``sandbox-replay view``): loopback only, read-only.

The page is rendered once and served as bytes for ``GET /TOKEN/`` (and ``/TOKEN/index.html``);
every other path is 404 and every other method 405. The server binds 127.0.0.1 only (port 0:
an ephemeral port the kernel picks), sends the page's Content-Security-Policy as a header too,
and no ``Server`` version. It runs until interrupted.

Loopback is shared by every user of the machine: any local account could connect to the port
and read the report (task inputs, tool results, outputs). So the page lives
under a random path, ``TOKEN`` (`secrets.token_urlsafe`, 32 bytes: 256 bits), printed only to
the terminal of the user who ran ``view`` (it is in no command line or environment); a request
without it gets 404 and nothing of the page, compared in constant time. This is the scheme of
Jupyter's token URLs.

Loopback alone stops other machines, not a web page in the user's own browser: a site whose
name is rebound to 127.0.0.1 (DNS rebinding) would read the page as same-origin. So a request
whose ``Host`` header is not ``127.0.0.1:PORT`` or ``localhost:PORT`` (or is missing) is
answered 421 Misdirected Request (RFC 9110 §15.5.20) and gets nothing of the page.
"""

from __future__ import annotations

import hmac
import http.server
import secrets
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
        token: the page's secret path segment (default: 32 random bytes, URL-safe base64).
    """

    daemon_threads = True

    def __init__(self, page: bytes, csp: str, port: int = 0, token: str | None = None) -> None:
        self.page = page
        self.csp = csp
        self.token = token or secrets.token_urlsafe(32)
        self.paths = (f"/{self.token}/".encode(), f"/{self.token}/index.html".encode())
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/TOKEN/``: the only address that serves the page."""
        return f"http://{HOST}:{self.server_address[1]}/{self.token}/"

    def is_page(self, path: str) -> bool:
        """True when ``path`` (its query ignored) is the page's, compared in constant time."""
        wanted = path.split("?", 1)[0].encode("utf-8", "surrogateescape")
        found = False
        for known in self.paths:  # both compared, whichever matches
            found |= hmac.compare_digest(wanted, known)
        return found


class _Handler(http.server.BaseHTTPRequestHandler):
    server: PageServer
    server_version = "sandbox-replay"
    sys_version = ""

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.headers.get("Host", "").lower() not in (f"{HOST}:{port}", f"localhost:{port}"):
            self.send_error(421)  # DNS rebinding: another site's name pointed at loopback
            return
        if not self.server.is_page(self.path):
            self.send_error(404)  # another local user, or a guess: no token, no page
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
