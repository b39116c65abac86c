"""The ``{mcp: {url}}`` entry: strict validation, and ``check`` knowing its tools only from a
saved ``tools_list`` (it never contacts the URL: the one here is a listener that counts)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.domain.mcpentry import McpEntry
from tests.support.paths import REPO

TOOLS = REPO / "tests" / "fixtures" / "mcp_http_agent" / "notes_tools.json"


def test_a_url_entry_is_http_or_https_and_bounded() -> None:
    for good in (
        {"url": "https://mcp.example.com/mcp"},
        {"url": "http://127.0.0.1:8000/mcp", "prefix": "notes", "tools_list": "t.json"},
        {"url": "https://[::1]:8443/mcp?tenant=a"},
    ):
        entry = McpEntry.model_validate({"mcp": good})
        assert entry.mcp.label() == f"mcp server {good['url']}"
    for bad, words in (
        ({"url": "ftp://h/mcp"}, "http:// or https://"),
        ({"url": "file:///etc/passwd"}, "http:// or https://"),
        ({"url": "https:///mcp"}, "names a host"),
        ({"url": "https://user:secret@h/mcp"}, "without user information"),
        ({"url": "https://h/mcp#x"}, "no #fragment"),
        ({"url": "https://h:99999/mcp"}, "does not parse"),
        ({"url": "https://h/m cp"}, "printable ASCII"),
        ({"url": "https://h/\u00e9"}, "printable ASCII"),
        ({"url": "https://h/" + "a" * 2048}, "at most 2048"),
        ({"url": "https://h/mcp", "command": ["x"]}, "not both"),
        ({"url": ""}, "at least 1"),
    ):
        with pytest.raises(ValueError) as caught:
            McpEntry.model_validate({"mcp": bad})
        assert words in str(caught.value), (bad, str(caught.value))


@pytest.fixture
def listener() -> Iterator[tuple[str, list[int]]]:
    """A loopback port that counts the connections it gets (the server a URL names)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = sock.accept()
            except OSError:
                continue
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", accepted
    stop.set()
    thread.join()
    sock.close()


def _workflow(folder: Path, url: str, tools_list: bool, tool: str = "notes.search_notes") -> Path:
    folder.mkdir()
    listed = ", tools_list: tools.json" if tools_list else ""
    (folder / "tools.json").write_text(TOOLS.read_text(encoding="utf-8"), encoding="utf-8")
    path = folder / "wf.yaml"
    path.write_text(
        "name: m\nversion: '1'\ntools:\n"
        f"  - mcp: {{url: '{url}', prefix: notes{listed}}}\n"
        f"steps:\n  - id: s\n    tool: {tool}\n",
        encoding="utf-8",
    )
    return path


def test_check_knows_a_url_servers_tools_from_its_saved_list(
    tmp_path: Path, listener: tuple[str, list[int]]
) -> None:
    url, accepted = listener
    result = CliRunner().invoke(
        app, ["check", str(_workflow(tmp_path / "ok", url, True)), "--json"]
    )
    assert result.exit_code == 0, result.stdout
    (tool,) = json.loads(result.stdout)["workflows"][0]["tools"]
    assert tool["effect"] == "read" and tool["id"] == "notes.search_notes"
    unsafe = _workflow(tmp_path / "bad", url, True, "notes.delete_note")
    result = CliRunner().invoke(app, ["check", str(unsafe)])
    assert result.exit_code == 3 and "destructiveHint: true" in result.stdout, result.stdout
    assert accepted == []


def test_without_a_saved_list_its_tools_are_unknown_and_check_says_why(
    tmp_path: Path, listener: tuple[str, list[int]]
) -> None:
    url, accepted = listener
    result = CliRunner().invoke(app, ["check", str(_workflow(tmp_path / "w", url, False))])
    assert result.exit_code == 3, result.stdout
    assert "does not resolve" in result.stdout
    assert f"mcp server {url} at " in result.stdout and "tools_list" in result.stdout
    assert accepted == []  # never asked
