"""Framework compatibility, shown: three agents on the official SDKs, as program steps.

In the image with the SDKs installed from the host's wheelhouse (``sandbox-replay:sdks``,
tests/integration/test_sdk_image.py), each of

1. ``openai.OpenAI().chat.completions.create`` with tool calls,
2. ``anthropic.Anthropic().messages`` with tool use, then ``messages.stream``,
3. an OpenAI Agents SDK agent (``Runner.run_sync``, its default client and Responses API)
   whose function tools are declared by a ``@tool`` stacked under ``@function_tool``,

is recorded in production style (``runner.sdk.record`` in this process, against a loopback
fake), becomes a task (``tasks extract``), is reproduced offline in a sandbox with the fakes
gone (``reproduced``), and is evaluated v1 against v2 with ``submit`` (the host's providers
forwarding to the fakes). Nothing leaves the machine: the fakes listen on 127.0.0.1 and the
sandboxes have no network. Needs program steps (i13-gateway): skipped where the workflow model
has none.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import sdk
from runner.tracetools.tasks_extract import extract_tasks
from tests.support import fake_anthropic, fake_openai

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("openai_chat", "anthropic", "agents")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "project"
    shutil.copytree(FIX, root)
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in (
        "fw_tools",
        "fw_model_tools",
        "agents_model_agent",
        *(f"{fw}_agent" for fw in FRAMEWORKS),
    ):
        sys.modules.pop(name, None)


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env={**os.environ, "SANDBOX_REPLAY_LOG_LEVEL": "warning", **env},
        check=False,
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.slow
def test_record_extract_reproduce_and_submit(
    framework: str, sdk_image: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if framework == "agents":
        import agents

        agents.set_tracing_disabled(True)  # nothing may ever go to the vendor's host
    trace = tmp_path / "traces" / f"prod-{framework}.jsonl"
    trace.parent.mkdir()
    task_input = {"question": "How do I reset my password?"}
    with (
        fake_openai.serve(fake_openai.FakeOpenAI()) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", oai.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-host-only")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", ant.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-host-only")
        program = importlib.import_module(f"{framework}_agent")
        with sdk.record(
            trace,
            task_id="q1",
            task_input=task_input,
            workflow=str(project / f"{framework}_v1.yaml"),
        ) as rec:
            output = program.run(task_input)
            rec.set_output(output)
        fake = ant if framework == "anthropic" else oai
        sent = list(fake.bodies)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    models = [line for line in lines if line.get("tool") == "model"]
    assert [m["body"].encode() for m in models] == sent  # raw, byte for byte
    assert all(m.get("model") for m in models)
    if framework == "anthropic":
        assert models[-1]["meta"]["stream"] is True
    # the Agents SDK's function tool is the call (issue 27): its declared id, not the @tool
    # it calls inside
    read_tool = "sdk.search_kb" if framework == "agents" else "kb.search"
    assert any(line.get("tool") == read_tool for line in lines)

    tasks = tmp_path / "recorded.jsonl"
    extract_tasks([trace], tasks)
    env = {"SANDBOX_REPLAY_IMAGE": sdk_image, "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "st")}

    # reproduce offline: the fakes are gone, every model request is served from the trace
    done = _cli(["reproduce", str(trace)], env, project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced (exit 0)" in done.stdout

    with (
        fake_openai.serve(fake_openai.FakeOpenAI()) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        env.update(
            {
                "SANDBOX_REPLAY_OPENAI_BASE_URL": oai.url,
                "SANDBOX_REPLAY_OPENAI_API_KEY": "sk-test-host-only",
                "SANDBOX_REPLAY_ANTHROPIC_BASE_URL": ant.url,
                "SANDBOX_REPLAY_ANTHROPIC_API_KEY": "sk-ant-test-host-only",
            }
        )
        args = ["submit", "--variant", f"{framework}_v1.yaml", "--variant"]
        args += [f"{framework}_v2.yaml", "--tasks", str(tasks)]
        done = _cli(args, env, project)
        forwarded = len((ant if framework == "anthropic" else oai).requests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runs: 2 succeeded" in done.stdout, done.stdout
    assert forwarded == 2 * len(models)  # each variant's requests reached the provider
    assert f"fw-{framework}@1" in done.stdout and f"fw-{framework}@2" in done.stdout


@pytest.mark.slow
def test_a_tool_returning_a_pydantic_model_is_recorded_unchanged_and_reproduced(
    sdk_image: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27's target: recorded, the agent's behaviour unchanged, ``reproduced``.

    Before: ``runner.sdk.record`` raised ``TypeError ... not JSON serializable`` inside the
    agent, the SDK handed that error to the model, and the trace kept neither result nor
    error. In the sandbox the function tool (declared read by the ``@tool`` under it) is
    served from the trace and reaches the agent as ``Hits`` again, so the request after the
    tool call (which holds ``str(value)``) is the recorded one.
    """
    import agents

    agents.set_tracing_disabled(True)
    trace = tmp_path / "traces" / "prod-model.jsonl"
    trace.parent.mkdir()
    task_input = {"question": "How do I reset my password?"}
    with fake_openai.serve(fake_openai.FakeOpenAI()) as oai:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-host-only")
        program = importlib.import_module("agents_model_agent")
        with sdk.record(
            trace,
            task_id="q1",
            task_input=task_input,
            workflow=str(project / "agents_model_v1.yaml"),
        ) as rec:
            rec.set_output(program.run(task_input))
        sent = list(oai.requests)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    tools = {line["tool"]: line for line in lines if line.get("tool", "").startswith("kb.")}
    # the function tool is the call (declared kb.search_models); the @tools it calls run in it
    assert set(tools) == {"kb.search_models"}
    assert all(t["encoding"] == "json_form" and "error" not in t for t in tools.values())
    body = json.loads(tools["kb.search_models"]["body"])
    assert body["stamp"] == {"query": "password", "length": 8}
    assert lines[-1]["status"] == "succeeded" and "tool_errors" not in lines[-1]
    # what the agent handed its model is str() of the model, as without recording
    outputs = [i for i in sent[-1]["input"] if i.get("type") == "function_call_output"]
    assert outputs and outputs[0]["output"].startswith("hits=[")
    assert "stamp=Stamp(query='password', length=8)" in outputs[0]["output"]

    env = {"SANDBOX_REPLAY_IMAGE": sdk_image, "SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "st")}
    done = _cli(["reproduce", "--json", str(trace)], env, project)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["traces"][0]  # one object, a list inside
    assert report["outcome"] == "reproduced", report
    # the SDK offers the tool under its own name (search_kb): declared by the stacked @tool,
    # so nothing is undeclared (runner/providers/offered.py), and the call was served
    replay = [json.loads(line) for line in Path(report["replay_trace"]).read_text().splitlines()]
    assert "undeclared_tools" not in replay[-1]
    served = [line for line in replay if line.get("tool") == "kb.search_models"]
    assert served and served[0]["source"] == "trace"
    lint = _cli(["lint", str(trace)], env, project)
    assert lint.returncode == 0, lint.stdout + lint.stderr
