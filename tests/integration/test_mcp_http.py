"""Issue 27's target over Streamable HTTP: an agent using an MCP server URL, recorded and
``reproduced`` 5 of 5 with the server stopped.

The server is the official ``mcp`` package's (``MCPServer.streamable_http_app`` under uvicorn,
tests/fixtures/mcp_http_agent), started by the test on a loopback port of the host; it logs
every tool call it runs. An OpenAI Agents SDK agent (``MCPServerStreamableHttp``, unchanged)
names its URL. ``record`` runs the agent (a local process; the model a loopback fake behind
the host's provider): its client's requests are routed to the runtime's endpoint, the hub
decides each, the host forwards them to the declared URL and they become call lines.
``reproduce`` replays the trace in the SDK image (no network) with the server stopped. A
program calling the destructive tool its step does not declare is denied: the server's own
log never shows it. Inside a sandbox, hostile requests to the URL get clear errors.
"""

from __future__ import annotations

import importlib
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from tests.support import fake_openai
from tests.support.cli import run_cli
from tests.support.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIX = REPO / "tests" / "fixtures" / "mcp_http_agent"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NotesServer:
    """The fixture server on a loopback port, its tool-call log beside it."""

    def __init__(self, folder: Path, json_answers: bool) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = folder / f"server-{self.port}.log"
        argv = [sys.executable, str(FIX / "notes_http_server.py"), str(self.port), str(self.log)]
        self.process = subprocess.Popen(
            [*argv, *(["json"] if json_answers else [])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the MCP server did not start")

    def calls(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _workflow(url: str, program: str) -> str:
    return (
        "name: mcp-http-notes\nversion: '1'\ntools:\n"
        f"  - mcp: {{url: '{url}', prefix: notes, tools_list: notes_tools.json}}\n"
        "model: {provider: openai, name: gpt-4.1-mini}\n"
        f"steps:\n  - id: agent\n    program: {program}\n    tools: [notes.search_notes]\n"
    )


def _project(root: Path, url: str) -> Path:
    shutil.copytree(FIX, root)
    (root / "mcp_http.yaml").write_text(_workflow(url, "http_agent:run"), encoding="utf-8")
    (root / "wipe.yaml").write_text(_workflow(url, "wiper:run"), encoding="utf-8")
    (root / "probe.yaml").write_text(_workflow(url, "prober:run"), encoding="utf-8")
    task = {"task_id": "q1", "input": {"question": "How do I reset my password?", "mcp_url": url}}
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    return root


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    image = env.pop("SANDBOX_REPLAY_IMAGE", "unused")
    state = Path(env.pop("SANDBOX_REPLAY_STATE_DIR", str(cwd / "state")))
    extra = {"SANDBOX_REPLAY_LOG_LEVEL": "warning", **env}
    return run_cli(args, cwd, image, state=state, timeout=900, extra_env=extra)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _record(root: Path, workflow: str, out: Path) -> subprocess.CompletedProcess[str]:
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        env = {
            "SANDBOX_REPLAY_STATE_DIR": str(root.parent / "state"),
            "SANDBOX_REPLAY_OPENAI_BASE_URL": oai.url,
            "SANDBOX_REPLAY_OPENAI_API_KEY": "sk-test-host-only",
        }
        args = ["record", workflow, "--tasks", "tasks.jsonl", "--task", "q1", "-o", str(out)]
        return _cli(args, root, env)


@pytest.fixture(scope="module", params=["sse", "json"])
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path, NotesServer]]:
    """One ``record`` run against a live server (answering with event streams, or JSON); the
    server is stopped before anything replays it."""
    folder = tmp_path_factory.mktemp(f"rec-{request.param}")
    server = NotesServer(folder, json_answers=request.param == "json")
    try:
        root = _project(folder / "project", server.url)
        trace = folder / "prod.jsonl"
        done = _record(root, "mcp_http.yaml", trace)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.calls() == ["search_notes password"]  # it really ran, once
    finally:
        server.stop()
    yield root, trace, server


def test_record_keeps_the_http_mcp_traffic_as_calls(
    recorded: tuple[Path, Path, NotesServer],
) -> None:
    _, trace, _ = recorded
    lines = _lines(trace)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    mcp = [c for c in lines if c.get("type") == "call" and "mcp" in (c.get("meta") or {})]
    methods = [c["meta"]["mcp"]["method"] for c in mcp]
    # the mcp client probes the stateless era (server/discover); this server speaks it
    assert methods == ["server/discover", "tools/list", "tools/call"], methods
    assert {c["meta"]["mcp"]["server"] for c in mcp} == {"tools[0]"}
    assert {c["source"] for c in mcp} == {"executed"}
    (call,) = [c for c in mcp if c["tool"] == "notes.search_notes"]
    assert call["effect"] == "read" and call["args"] == {"query": "password"}
    assert "Settings > Security" in json.loads(call["body"])["content"][0]["text"]
    lint = _cli(["lint", str(trace)], trace.parent, {})
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("attempt", range(5))
def test_reproduced_with_the_server_stopped(
    recorded: tuple[Path, Path, NotesServer], sdk_image: str, tmp_path: Path, attempt: int
) -> None:
    root, trace, server = recorded
    copy = root / f"prod-{attempt}.jsonl"
    shutil.copyfile(trace, copy)
    env = {"SANDBOX_REPLAY_IMAGE": sdk_image, "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "s")}
    done = _cli(["reproduce", "--json", str(copy)], root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["traces"][0]
    assert report["outcome"] == "reproduced", report
    replay = _lines(Path(report["replay_trace"]))
    mcp = [c for c in replay if "mcp" in (c.get("meta") or {})]
    assert len(mcp) == 3 and {c["source"] for c in mcp} == {"trace"}
    assert replay[-1]["outbound"] == []
    assert server.calls() == ["search_notes password"]  # still only record's


def test_a_denied_unsafe_tool_never_reaches_the_server(tmp_path: Path) -> None:
    """``record`` runs every declared tool for real; ``delete_note`` is not declared by the
    step: the hub denies it and the server's own log never shows it."""
    server = NotesServer(tmp_path, json_answers=False)
    try:
        root = _project(tmp_path / "project", server.url)
        trace = tmp_path / "wipe.jsonl"
        done = _record(root, "wipe.yaml", trace)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.calls() == []
    finally:
        server.stop()
    lines = _lines(trace)
    assert lines[-1]["status"] == "denied", lines[-1]
    (denied,) = [c for c in lines if c.get("tool") == "notes.delete_note"]
    assert denied["error"]["class"] == "runner.errors.CapabilityDenied"
    assert "nothing was sent to the server" in denied["error"]["message"]


def _fresh_run(root: Path, workflow: str, image: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The trace lines of one ``run`` in the SDK image (the model: a loopback fake)."""
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        env = {
            "SANDBOX_REPLAY_IMAGE": image,
            "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state"),
            "SANDBOX_REPLAY_OPENAI_BASE_URL": oai.url,
            "SANDBOX_REPLAY_OPENAI_API_KEY": "sk-test-host-only",
        }
        args = ["run", workflow, "--tasks", "tasks.jsonl", "--task", "q1", "--json"]
        done = _cli(args, root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return _lines(Path(json.loads(done.stdout)["trace"]))


PROBER = r"""
import json
import httpx2

def run(task_input):
    url = task_input["mcp_url"]
    json_type = {"Content-Type": "application/json"}
    out = {}
    with httpx2.Client(timeout=60) as client:
        def post(name, body, headers=json_type):
            answer = client.post(url, content=body, headers=headers)
            text = answer.json()["error"]["message"] if answer.content else ""
            out[name] = [answer.status_code, text[:120]]
        post("oversized", b"x" * (5 << 20))
        post("bad_json", b'{"jsonrpc": "2.0", "id": 1,')
        listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        post("no_session", listing)
        post("bad_session", listing, dict(json_type, **{"Mcp-Session-Id": "a b"}))
        post("unknown_session", listing, dict(json_type, **{"Mcp-Session-Id": "nope"}))
        out["get"] = [client.get(url).status_code]
    return out
"""


def test_hostile_requests_inside_a_sandbox_get_clear_errors(sdk_image: str, tmp_path: Path) -> None:
    """A program in the SDK image posts junk to the declared URL: its route reaches the
    runtime's endpoint (the sandbox has no network), which answers each with a clear error."""
    root = _project(tmp_path / "project", "https://notes.example.com/mcp")
    (root / "prober.py").write_text(PROBER, encoding="utf-8")
    lines = _fresh_run(root, "probe.yaml", sdk_image, tmp_path)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    out = lines[-1]["output"]
    assert out["oversized"][0] == 413 and "over" in out["oversized"][1], out
    assert out["bad_json"][0] == 400 and "not JSON" in out["bad_json"][1], out
    assert out["no_session"] == [400, "no Mcp-Session-Id header: initialize"], out
    assert out["bad_session"][0] == 400 and "visible ASCII" in out["bad_session"][1], out
    assert out["unknown_session"] == [404, "no such session: initialize again"], out
    assert out["get"] == [405], out
    assert [c for c in lines if c.get("type") == "call"] == []  # nothing became a call
    assert lines[-1]["outbound"] == []  # routed: no attempt at notes.example.com


def test_a_fresh_run_answers_the_protocol_from_the_workflow(sdk_image: str, tmp_path: Path) -> None:
    """``run``: no server anywhere; the agent initialises and lists the tools the workflow's
    saved list declares (answered in the sandbox), its read tool served from the task."""
    root = _project(tmp_path / "project", "https://notes.example.com/mcp")
    task = json.loads((root / "tasks.jsonl").read_text(encoding="utf-8"))
    task["observations"] = [
        {"tool": "notes.search_notes", "args": {"query": "password"}, "body": '"observed"'}
    ]
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    lines = _fresh_run(root, "mcp_http.yaml", sdk_image, tmp_path)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    tools = [c["tool"] for c in lines if c.get("type") == "call" and c["tool"] != "model"]
    # no server: the stateless era's probe is "method not found", the client falls back
    assert tools == [
        "mcp.server.discover",
        "mcp.initialize",
        "mcp.tools.list",
        "notes.search_notes",
    ]
    (probe,) = [c for c in lines if c.get("tool") == "mcp.server.discover"]
    assert json.loads(probe["error"]["message"])["code"] == -32601
    (call,) = [c for c in lines if c.get("tool") == "notes.search_notes"]
    assert call["source"] == "observation" and call["body"] == '"observed"'
    assert lines[-1]["outbound"] == []


def test_a_runner_sdk_record_trace_reproduces_in_a_sandbox(
    sdk_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production style: the agent runs in this process under ``runner.sdk.record`` against
    the live server; its trace reproduces in the SDK image with the server stopped."""
    server = NotesServer(tmp_path, json_answers=False)
    try:
        root = _project(tmp_path / "project", server.url)
        task_input = json.loads((root / "tasks.jsonl").read_text(encoding="utf-8"))["input"]
        trace = root / "sdk.jsonl"
        monkeypatch.syspath_prepend(str(root))
        with fake_openai.serve(fake_openai.FakeOpenAI()) as fake:
            monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-host-only")
            program = importlib.import_module("http_agent")
            workflow = str(root / "mcp_http.yaml")
            with sdk.record(trace, task_id="q1", task_input=task_input, workflow=workflow) as rec:
                rec.set_output(program.run(task_input))
        assert server.calls() == ["search_notes password"]
    finally:
        server.stop()
    lines = _lines(trace)
    mcp = [c for c in lines if "mcp" in (c.get("meta") or {})]
    methods = [c["meta"]["mcp"]["method"] for c in mcp]
    assert methods == ["server/discover", "tools/list", "tools/call"], methods
    (call,) = [c for c in mcp if c["tool"] == "notes.search_notes"]
    assert call["effect"] == "read" and call["schema_hash"], call
    env = {"SANDBOX_REPLAY_IMAGE": sdk_image, "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "s")}
    done = _cli(["reproduce", "--json", str(trace)], root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["traces"][0]
    assert report["outcome"] == "reproduced", report
    replay = _lines(Path(report["replay_trace"]))
    assert {c["source"] for c in replay if "mcp" in (c.get("meta") or {})} == {"trace"}
