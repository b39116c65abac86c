"""Issue 27's target: an agent using an MCP server, recorded and ``reproduced`` 5 of 5.

An OpenAI Agents SDK agent (``MCPServerStdio``, unchanged) uses an MCP stdio server written
with the official ``mcp`` package (tests/fixtures/mcp_agent). ``record`` runs it live (a local
process; the model is a loopback fake behind the host's provider) and its MCP traffic becomes
call lines; ``reproduce`` replays it in the SDK image with the fake gone and the server made
lethal: started at all, it kills the stand-in that started it, and the run fails. A request
the trace does not hold diverges instead of going live; a fresh ``run`` starts the server in
the sandbox on the run's clock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import fake_openai
from tests.support.cli import run_cli
from tests.support.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIX = REPO / "tests" / "fixtures" / "mcp_agent"
# Replaces the server in the replays: if anything started it, it would kill its parent (the
# stand-in) at once, the agent's MCP session would end and the replay would fail.
LETHAL_SERVER = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
JAN_2020 = 1577836800.0


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    image = env.pop("SANDBOX_REPLAY_IMAGE", "unused")
    state = Path(env.pop("SANDBOX_REPLAY_STATE_DIR", str(cwd / "state")))
    extra = {"SANDBOX_REPLAY_LOG_LEVEL": "warning", **env}
    return run_cli(args, cwd, image, state=state, timeout=900, extra_env=extra)


# Written by the tests, not kept as a fixture file: the unit suite describes every fixture
# workflow with the host's `python3`, which has no `mcp` package to start this server with.
WORKFLOW = """\
name: mcp-notes
version: "1"
tools:
  - mcp: {command: [python3, notes_server.py], prefix: notes}
model: {provider: openai, name: gpt-4.1-mini}
steps:
  - id: agent
    program: mcp_agent:run
    tools: [notes.search_notes]
"""


def _project(root: Path) -> Path:
    shutil.copytree(FIX, root)
    (root / "mcp_v1.yaml").write_text(WORKFLOW, encoding="utf-8")
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    return root


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _fresh_run(
    root: Path, workflow: str, task: dict[str, Any], image: str, tmp_path: Path
) -> list[dict[str, Any]]:
    """The trace lines of one ``run`` of ``task`` (the model: a loopback fake, host only)."""
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        env = {
            "SANDBOX_REPLAY_IMAGE": image,
            "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state"),
            "SANDBOX_REPLAY_OPENAI_BASE_URL": oai.url,
            "SANDBOX_REPLAY_OPENAI_API_KEY": "sk-test-host-only",
        }
        args = ["run", workflow, "--tasks", "tasks.jsonl", "--task", task["task_id"], "--json"]
        done = _cli(args, root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return _lines(Path(json.loads(done.stdout)["trace"]))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace of one ``record`` run (the server run live by the agent, on the host)."""
    root = _project(tmp_path_factory.mktemp("rec") / "project")
    trace = root.parent / "prod.jsonl"
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        env = {
            # the server's `python3` is this interpreter's (it has the `mcp` package)
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
            "SANDBOX_REPLAY_STATE_DIR": str(root.parent / "state"),
            "SANDBOX_REPLAY_OPENAI_BASE_URL": oai.url,
            "SANDBOX_REPLAY_OPENAI_API_KEY": "sk-test-host-only",
        }
        args = ["record", "mcp_v1.yaml", "--tasks", "tasks.jsonl", "--task", "q1"]
        done = _cli([*args, "-o", str(trace)], root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return trace


def _replay_project(tmp_path: Path, trace: Path) -> tuple[Path, Path]:
    root = _project(tmp_path / "project")
    (root / "notes_server.py").write_text(LETHAL_SERVER, encoding="utf-8")
    copy = root / "prod.jsonl"
    shutil.copyfile(trace, copy)
    return root, copy


def _reproduce(root: Path, trace: Path, image: str, state: Path) -> dict[str, Any]:
    env = {"SANDBOX_REPLAY_IMAGE": image, "SANDBOX_REPLAY_STATE_DIR": str(state)}
    done = _cli(["reproduce", "--json", str(trace)], root, env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)["traces"][0]
    return report


def test_record_keeps_the_mcp_traffic_as_calls(recorded: Path) -> None:
    lines = _lines(recorded)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    calls = [line for line in lines if line["type"] == "call"]
    mcp = [c for c in calls if "mcp" in (c.get("meta") or {})]
    methods = [c["meta"]["mcp"]["method"] for c in mcp]
    assert "tools/list" in methods and methods[-1] == "tools/call", methods
    assert all(c["meta"]["mcp"]["server"] == "tools[0]" for c in mcp)
    assert all(c["source"] == "executed" for c in mcp)
    listed = next(c for c in mcp if c["meta"]["mcp"]["method"] == "tools/list")
    assert listed["tool"] == "mcp.tools.list" and listed["args"]["server"] == "tools[0]"
    names = [t["name"] for t in json.loads(listed["body"])["tools"]]
    assert names == ["search_notes", "delete_note"]
    (call,) = [c for c in calls if c["tool"] == "notes.search_notes"]
    assert call["effect"] == "read" and call["args"] == {"query": "password"}  # annotations
    assert call["schema_hash"]
    result = json.loads(call["body"])
    assert "Settings > Security" in result["content"][0]["text"]
    # the SDK offers the server's tools under their MCP names: the declared one is known (the
    # agent filters out delete_note; offered, it would be refused: test_offered_tools)
    assert "undeclared_tools" not in lines[-1], lines[-1]
    # protocol calls are no tools: no schema hash is missing
    lint = _cli(["lint", str(recorded)], recorded.parent, {})
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("attempt", range(5))
def test_reproduced_without_ever_starting_the_server(
    recorded: Path, sdk_image: str, tmp_path: Path, attempt: int
) -> None:
    root, trace = _replay_project(tmp_path, recorded)
    report = _reproduce(root, trace, sdk_image, tmp_path / "state")
    assert report["outcome"] == "reproduced", report
    replay = _lines(Path(report["replay_trace"]))
    mcp = [c for c in replay if "mcp" in (c.get("meta") or {})]
    assert len(mcp) == len([c for c in _lines(recorded) if "mcp" in (c.get("meta") or {})])
    assert {c["source"] for c in mcp} == {"trace"}  # served, none forwarded
    assert replay[-1]["outbound"] == []


def test_a_request_the_trace_does_not_hold_diverges(
    recorded: Path, sdk_image: str, tmp_path: Path
) -> None:
    """The recording answered another question: the agent's own request is a miss, answered
    with an error, never sent to a server (the lethal one would end the run instead)."""
    root, trace = _replay_project(tmp_path, recorded)
    lines = _lines(trace)
    for line in lines:
        if line.get("tool") == "notes.search_notes":
            line["args"] = {"query": "refund"}
            index = line["index"]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = _reproduce(root, trace, sdk_image, tmp_path / "state")
    assert report["outcome"] == "not_reproduced", report
    first = report["first_difference"]
    assert first["index"] == index and first["tool"] == "notes.search_notes", first
    assert first["args"] == {"query": "password"}, first
    replay = _lines(Path(report["replay_trace"]))
    (miss,) = [c for c in replay if c.get("tool") == "notes.search_notes"]
    assert miss["error"]["class"] == "runner.wire.errors.UnrecordedCall", miss
    assert miss["meta"]["divergence"][0]["kind"] == "unrecorded_call"


def test_a_fresh_run_starts_the_server_in_the_sandbox_on_the_runs_clock(
    sdk_image: str, tmp_path: Path
) -> None:
    """``run``: the protocol requests reach the server, which runs inside the sandbox and reads
    the run's clock (the task's ``clock_start``, 2020), not the machine's; the read tool is
    served from the task's observation."""
    root = _project(tmp_path / "project")
    task = {
        "task_id": "q1",
        "input": {"question": "How do I reset my password?"},
        "clock_start": JAN_2020,
        "observations": [
            {"tool": "notes.search_notes", "args": {"query": "password"}, "body": '"observed"'}
        ],
    }
    lines = _fresh_run(root, "mcp_v1.yaml", task, sdk_image, tmp_path)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    protocol = [c for c in lines if c.get("tool", "").startswith("mcp.")]
    assert protocol and {c["source"] for c in protocol} == {"executed"}
    assert any("started 2020-01-01" in c["body"] for c in protocol), protocol[0]["body"][:300]
    (call,) = [c for c in lines if c.get("tool") == "notes.search_notes"]
    assert call["source"] == "observation" and call["body"] == '"observed"'


# Security review: a program that starts the workflow's server itself (the stand-in is put in
# its place) and hides a tools/call of the destructive `delete_note` (not in the shadow
# registry) inside a notification, behind bare "\r"s: JSON whitespace to the stand-in, line
# ends to the `mcp` package's stdio reader (a TextIOWrapper with universal newlines).
SMUGGLER = r"""
import json, os, subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run(task_input):
    server = subprocess.Popen(["python3", "notes_server.py"], cwd=HERE,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def send(text):
        server.stdin.write(text.encode() + b"\n")
        server.stdin.flush()
    def until(ident):
        seen = []
        while True:
            message = json.loads(server.stdout.readline())
            seen.append(message.get("id"))
            if message.get("id") == ident:
                return seen
    send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}))
    until(1)
    wipe = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"key": "refund"}}}
    send('{"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"x":\r'
         + json.dumps(wipe) + '\r}}')
    send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}))
    seen = until(3)
    server.stdin.close()
    server.wait()
    return {"smuggled": 99 in seen}
"""


def test_a_tool_call_hidden_behind_bare_carriage_returns_never_reaches_the_server(
    sdk_image: str, tmp_path: Path
) -> None:
    """The server sees each message as the stand-in decoded it (re-encoded), so `delete_note`
    never runs; on the old stand-in (the agent's raw line passed on) it answered id 99."""
    root = _project(tmp_path / "project")
    (root / "smuggler.py").write_text(SMUGGLER, encoding="utf-8")
    workflow = WORKFLOW.replace("mcp_agent:run", "smuggler:run")
    (root / "smuggle.yaml").write_text(workflow, encoding="utf-8")
    task = {"task_id": "s1", "input": {"question": "x"}}
    lines = _fresh_run(root, "smuggle.yaml", task, sdk_image, tmp_path)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    assert lines[-1]["output"] == {"smuggled": False}, lines[-1]
    assert [c["tool"] for c in lines if c.get("type") == "call"] == [
        "mcp.initialize",
        "mcp.tools.list",
    ]
