"""The agent SDKs' own tools as first-class calls, in real sandboxes (issue 27).

The OpenAI Agents SDK's function-tools example (tests/fixtures/frameworks/
agents_example_tools.py, adapted from the SDK's examples/basic/tools.py, MIT) is recorded in
production style (``runner.sdk.record`` in this process, against a loopback fake): its
``@function_tool`` call is a call line with its arguments and raw result; ``tasks extract``
keeps it; ``reproduce`` in the SDK image serves it from the trace (the replay's line says
``source: trace`` and carries the host's process id: the body never ran in the sandbox) and
the run is ``reproduced``. The same agent under a step that declares no tool is refused at
the gateway: the request is not forwarded, the episode ends ``denied`` naming the tool.
Nothing leaves the machine: the fake listens on 127.0.0.1, the sandboxes have no network.
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
from tests.support import fake_openai
from tests.support.cli import run_cli

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
QUESTION = {"question": "What's the weather in Tokyo?"}


def _weather_answer(request: dict[str, Any]) -> dict[str, Any]:
    """The fake model: call ``get_weather`` for Tokyo once, then answer."""
    messages = request.get("messages") or []
    if request.get("tools") and not any(m.get("role") == "tool" for m in messages):
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
                }
            ],
        }
    return {"role": "assistant", "content": "Sunny in Tokyo."}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "project"
    shutil.copytree(FIX, root)
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in ("agents_example_tools", "agents_example_hidden", "fw_tools"):
        sys.modules.pop(name, None)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_an_agents_sdk_function_tool_is_recorded_then_served_never_run_in_replay(
    sdk_image: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents

    agents.set_tracing_disabled(True)  # nothing may ever go to the vendor's host
    trace = tmp_path / "traces" / "prod-weather.jsonl"
    trace.parent.mkdir()
    with fake_openai.serve(fake_openai.FakeOpenAI(answer=_weather_answer)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-host-only")
        program = importlib.import_module("agents_example_tools")  # its tool made before
        with sdk.record(
            trace,
            task_id="q1",
            task_input=QUESTION,
            workflow=str(project / "agents_example_v1.yaml"),
        ) as rec:
            rec.set_output(program.run(QUESTION))
    lines = _lines(trace)
    [call] = [line for line in lines if line.get("tool") == "get_weather"]
    assert call["args"] == {"city": "Tokyo"} and call["source"] == "executed"
    recorded = json.loads(call["body"])  # the pydantic model's JSON form, raw
    assert recorded["city"] == "Tokyo" and f"(pid {os.getpid()})" in recorded["conditions"]
    assert call["meta"]["sdk"] == {
        "framework": "openai-agents",
        "name": "get_weather",
        "effect_declared": False,
    }
    assert lines[-1]["status"] == "succeeded"

    tasks = tmp_path / "tasks.jsonl"
    extract_tasks([trace], tasks)
    observations = json.loads(tasks.read_text().splitlines()[0])["observations"]
    assert [o["tool"] for o in observations] == ["get_weather"]  # was: 0 recorded responses

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
    assert json.loads(served["body"]) == recorded
    assert "undeclared_tools" not in replay[-1]


@pytest.mark.slow
def test_an_offered_sdk_tool_its_step_does_not_declare_is_refused_and_named(
    sdk_image: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the request was forwarded and the run ``succeeded``, the tool only listed."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "q1", "input": QUESTION}) + "\n")
    check = run_cli(
        ["check", "agents_example_undeclared.yaml"], project, sdk_image, state=tmp_path / "st"
    )
    assert check.returncode == 0, check.stdout  # check cannot see it: the module imports it
    with fake_openai.serve(fake_openai.FakeOpenAI(answer=_weather_answer)) as fake:
        monkeypatch.setenv("SANDBOX_REPLAY_OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("SANDBOX_REPLAY_OPENAI_API_KEY", "sk-test-host-only")
        args = ["run", "agents_example_undeclared.yaml", "--tasks", str(tasks), "--task", "q1"]
        done = run_cli([*args, "--json"], project, sdk_image, state=tmp_path / "st", timeout=900)
        forwarded = len(fake.requests)
    assert done.returncode == 0, done.stdout + done.stderr  # denied is data (SPEC.md)
    assert forwarded == 0  # never forwarded, never paid for
    result = json.loads(done.stdout)
    trace = Path(result["trace"]) if "trace" in result else Path(result["trace_path"])
    end = _lines(trace)[-1]
    assert end["status"] == "denied", end
    assert end["undeclared_tools"][0]["name"] == "get_weather"
    assert end["failure"]["tool"] == "get_weather"
