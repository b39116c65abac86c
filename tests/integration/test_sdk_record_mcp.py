"""A production recording with ``runner.sdk.record`` of an agent using an MCP server reproduces.

Issue 27: the OpenAI Agents SDK agent of tests/fixtures/mcp_agent (``MCPServerStdio``, its code
unchanged) talks to a real MCP stdio server on the official ``mcp`` package. A host-side
script records it in production style: ``with runner.sdk.record(..., workflow=...)`` around the
agent, the model a loopback fake (OpenAI's API over httpx, recorded by the recorder). The MCP
traffic is in the trace as ``sandbox-replay record`` writes it (tests/integration/
test_mcp_record_reproduce.py, whose project, workflow and lethal server this test reuses);
``reproduce`` in the SDK image serves it with the server made lethal (started at all, it
kills the stand-in that started it and the run fails) and says ``reproduced``. Nothing leaves
the machine: the fake listens on 127.0.0.1, the sandbox has no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_mcp_record_reproduce import LETHAL_SERVER, _lines, _project
from tests.support import fake_openai
from tests.support.cli import run_cli
from tests.support.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# The production process: the agent's entry, wrapped in the recorder, nothing else changed.
PRODUCTION = """\
import json, sys, warnings

import agents

agents.set_tracing_disabled(True)  # nothing may ever go to the vendor's host
from runner import sdk
import mcp_agent

task = {"question": "How do I reset my password?"}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with sdk.record(sys.argv[1], task_id="q1", task_input=task, workflow="mcp_v1.yaml") as rec:
        output = mcp_agent.run(task)
        rec.set_output(output)
said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
print(json.dumps({"output": output, "warnings": said}))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace the production process wrote (the server run live by the agent, on the host)."""
    root = _project(tmp_path_factory.mktemp("prod") / "project")
    (root / "production.py").write_text(PRODUCTION, encoding="utf-8")
    trace = root.parent / "prod.jsonl"
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        env = {
            **os.environ,
            # the server's `python3` is this interpreter's (it has the `mcp` package)
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
            "PYTHONPATH": str(REPO),
            "OPENAI_BASE_URL": oai.url,
            "OPENAI_API_KEY": "sk-test-host-only",
        }
        done = subprocess.run(
            [sys.executable, "production.py", str(trace)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        asked = len(oai.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["warnings"] == [], said
    assert said["output"]["answer"], said
    models = [c for c in _lines(trace) if c.get("tool") == "model"]
    assert len(models) == asked == 2  # every model call recorded (tool call, then answer)
    return trace


def test_the_recorder_writes_the_mcp_traffic_as_record_does(recorded: Path) -> None:
    lines = _lines(recorded)
    assert lines[-1]["status"] == "succeeded", lines[-1]
    calls = [line for line in lines if line["type"] == "call"]
    assert [c["index"] for c in calls] == list(range(len(calls)))
    mcp = [c for c in calls if "mcp" in (c.get("meta") or {})]
    methods = [c["meta"]["mcp"]["method"] for c in mcp]
    assert "tools/list" in methods and methods[-1] == "tools/call", methods
    assert all(c["meta"]["mcp"]["server"] == "tools[0]" for c in mcp)
    listed = next(c for c in mcp if c["meta"]["mcp"]["method"] == "tools/list")
    assert listed["tool"] == "mcp.tools.list" and listed["args"]["server"] == "tools[0]"
    assert [t["name"] for t in json.loads(listed["body"])["tools"]] == [
        "search_notes",
        "delete_note",
    ]
    (call,) = [c for c in calls if c["tool"] == "notes.search_notes"]
    assert call["effect"] == "read" and call["args"] == {"query": "password"}  # annotations
    assert call["schema_hash"] == lines[0]["environment"]["tools"]["notes.search_notes"]
    assert "Settings > Security" in json.loads(call["body"])["content"][0]["text"]
    # interleaved with the model calls as the agent made them: list, ask, call, ask
    tools = [c["tool"] for c in calls]
    assert tools.index("mcp.tools.list") < tools.index("model") < call["index"], tools
    assert tools[call["index"] + 1 :] == ["model"], tools
    lint = run_cli(["lint", str(recorded)], recorded.parent, "unused")
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("attempt", range(5))  # issue 27's target: reproduced 5 of 5
def test_reproduced_in_a_sandbox_without_starting_the_server(
    recorded: Path, sdk_image: str, tmp_path: Path, attempt: int
) -> None:
    root = _project(tmp_path / "project")
    (root / "notes_server.py").write_text(LETHAL_SERVER, encoding="utf-8")
    trace = root / "prod.jsonl"
    shutil.copyfile(recorded, trace)
    done = run_cli(
        ["reproduce", "--json", str(trace)],
        root,
        sdk_image,
        state=tmp_path / "state",
        timeout=900,
        extra_env={"SANDBOX_REPLAY_LOG_LEVEL": "warning"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["traces"][0]
    assert report["outcome"] == "reproduced", report
    replay = _lines(Path(report["replay_trace"]))
    replayed = [c for c in replay if c.get("type") == "call"]
    original = [c for c in _lines(recorded) if c["type"] == "call"]
    assert [c["tool"] for c in replayed] == [c["tool"] for c in original]
    mcp = [c for c in replayed if "mcp" in (c.get("meta") or {})]
    assert mcp and {c["source"] for c in mcp} == {"trace"}  # served, none forwarded
    assert replay[-1]["outbound"] == []
