"""Attack test: ``view`` serves its page to any ``Host``: DNS rebinding reads it.

`runner.cli.render.html.serve.PageServer` binds 127.0.0.1 only, which stops other machines, not
the user's own browser: a page on ``attacker.example`` that rebinds its name to 127.0.0.1
fetches ``http://attacker.example:PORT/`` as same-origin and reads the report (task inputs,
tool results, outputs of the traces shown). The server never looks at the ``Host`` header;
refusing every host but ``127.0.0.1:PORT`` / ``localhost:PORT`` closes it. Loopback only.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator

import pytest

from runner.cli.render.html.serve import PageServer

PAGE = b"<!doctype html><title>report</title><p>customer data</p>"


def _get(port: int, host: str, path: str = "/") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.fixture
def server() -> Iterator[PageServer]:
    with PageServer(PAGE, "default-src 'none'") as running:
        thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        try:
            yield running
        finally:
            running.shutdown()
            thread.join()


def test_control_the_page_is_served_to_its_own_address(server: PageServer) -> None:
    port = server.server_address[1]
    assert _get(port, f"127.0.0.1:{port}", f"/{server.token}/") == 200


def test_a_foreign_host_header_is_refused(server: PageServer) -> None:
    port = server.server_address[1]
    page = f"/{server.token}/"
    assert _get(port, f"attacker.example:{port}", page) == 421
    assert _get(port, f"localhost:{port}", page) == 200
    assert _get(port, "127.0.0.1", page) == 421  # no port: not this server's origin


def test_another_local_user_without_the_printed_token_gets_nothing(server: PageServer) -> None:
    """Loopback is every local user's; the page is under a random path."""
    port = server.server_address[1]
    host = f"127.0.0.1:{port}"
    assert server.url == f"http://{host}/{server.token}/" and len(server.token) >= 43
    for path in ("/", "/index.html", f"/{server.token[:-1]}/", f"/{server.token}", "/x/"):
        assert _get(port, host, path) == 404, path  # was: 200 with the report for "/"
    assert _get(port, host, f"/{server.token}/index.html?x=1") == 200
    with PageServer(PAGE, "") as other:
        assert other.token != server.token  # a new one per server
