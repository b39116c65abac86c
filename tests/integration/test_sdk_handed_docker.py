"""A LangGraph ReAct agent written as LangGraph's quickstart shows, in real sandboxes (issue 27).

tests/fixtures/frameworks/langgraph_react.py hands the plain function ``get_weather`` to
``create_react_agent(model, tools=[get_weather])`` inside its entry adapter ``run``, its code
as the quickstart has it. It is recorded in production style (``runner.sdk.record`` in this
process, ChatAnthropic against a loopback fake): the call is a ``get_weather`` line with
``meta.sdk`` framework ``langchain``; ``tasks extract`` keeps it; ``check`` lists the tool
with the effect class the policy's ``map:`` gives it; ``reproduce`` in the SDK image serves
the call from the trace (the host's process id in the served body: the function never ran in
the sandbox) and the run is ``reproduced``; ``run`` of the extracted task in the sandbox,
the model on the fake, ``succeeded`` with the call recorded. Was: ``check`` exit 3 ("tool
get_weather does not resolve"), ``run`` refused, ``reproduce`` refused ("recorded tool
'get_weather' is missing from today's registry"). Nothing leaves the machine: the fake
listens on 127.0.0.1, the sandboxes have no network.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.tracetools.tasks_extract import extract_tasks
from tests.support import fake_anthropic
from tests.support.cli import run_cli

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
QUESTION = {"question": "What's the weather in Tokyo?"}
WORKFLOW = "langgraph_react_v1.yaml"
POLICY = "sdk_map_policy.yaml"


def _weather(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The fake model: ``get_weather`` for Tokyo once, then an answer."""
    answered = any(
        isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
        for m in request.get("messages") or []
    )
    if request.get("tools") and not answered:
        return [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Tokyo"}}
        ]
    return [{"type": "text", "text": "Sunny in Tokyo."}]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "project"
    shutil.copytree(FIX, root)
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    monkeypatch.syspath_prepend(str(root))
    yield root
    sys.modules.pop("langgraph_react", None)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_langgraph_react_agent_is_checked_recorded_reproduced_and_run(
    sdk_image: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = run_cli(["check", WORKFLOW, "--policy", POLICY], project, sdk_image)
    assert check.returncode == 0, check.stdout + check.stderr
    assert 'langchain tool "get_weather": read (policy map "get_*"' in check.stdout

    trace = tmp_path / "traces" / "prod-langgraph.jsonl"
    trace.parent.mkdir()
    with fake_anthropic.serve(fake_anthropic.FakeAnthropic(answer=_weather)) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-host-only")
        program = importlib.import_module("langgraph_react")
        with sdk.record(
            trace, task_id="q1", task_input=QUESTION, workflow=str(project / WORKFLOW)
        ) as rec:
            rec.set_output(program.run(QUESTION))
    lines = _lines(trace)
    [call] = [line for line in lines if line.get("tool") == "get_weather"]
    assert call["args"] == {"city": "Tokyo"} and call["source"] == "executed"
    assert f"(pid {os.getpid()})" in call["body"]  # it ran here, on the host
    assert call["meta"]["sdk"]["framework"] == "langchain"
    assert lines[-1]["status"] == "succeeded"

    tasks = tmp_path / "tasks.jsonl"
    extract_tasks([trace], tasks)
    observations = json.loads(tasks.read_text().splitlines()[0])["observations"]
    assert [o["tool"] for o in observations] == ["get_weather"]

    done = run_cli(
        ["reproduce", "--json", str(trace)], project, sdk_image, state=tmp_path / "st", timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["traces"][0]
    assert report["outcome"] == "reproduced", report
    replay = _lines(Path(report["replay_trace"]))
    [served] = [line for line in replay if line.get("tool") == "get_weather"]
    assert served["source"] == "trace" and served["args"] == {"city": "Tokyo"}
    # the host's pid: the value came from the trace, the body never ran in the sandbox
    assert served["body"] == call["body"]

    with fake_anthropic.serve(fake_anthropic.FakeAnthropic(answer=_weather)) as fake:
        env = {
            "SANDBOX_REPLAY_ANTHROPIC_BASE_URL": fake.url,
            "SANDBOX_REPLAY_ANTHROPIC_API_KEY": "sk-ant-test-host-only",
        }
        args = ["run", WORKFLOW, "--tasks", str(tasks), "--task", "q1", "--policy", POLICY]
        done = run_cli(
            [*args, "--json"],
            project,
            sdk_image,
            state=tmp_path / "st",
            timeout=900,
            extra_env=env,
        )
        forwarded = len(fake.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert forwarded == 2, summary  # the tool_use turn and the answer
    assert summary["status"] == "succeeded", summary
    ran = _lines(Path(summary["trace"]))
    [made] = [line for line in ran if line.get("tool") == "get_weather"]
    # a read tool in a shadow run: served from the task's observation (recorded on the host)
    assert (made["args"], made["effect"]) == ({"city": "Tokyo"}, "read")
    assert made["source"] == "observation", made
    assert made["body"] == call["body"]
