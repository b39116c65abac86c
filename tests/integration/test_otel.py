"""Acceptance on real input: the agentevals OTLP fixtures, imported, linted, reproduced.

The fixtures live outside the repository (`tests.support.realdata`; absent: skip, or fail under
``CI=true``). Everything runs through the CLI in real containers: ``import otel`` of every
fixture of a telemetry mode at once, ``lint`` (exactly the fields OTel lacks are missing),
``reproduce`` of every imported session against the workflow the import wrote (the complete
ones give ``reproduced``; the run that aborted on a tool error cannot: the generic agent hands
the error back to the model, whose next turn was never recorded), and a tool result altered
in a copy (``not_reproduced``: the proof that the comparison can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.realdata import realdata

CLI = str(Path(sys.executable).parent / "sandbox-replay")
SESSIONS = ("S1", "S2", "S3", "S4a", "S4b", "S5", "S6a", "S6b")

pytestmark = pytest.mark.docker


def cli(
    args: list[str], cwd: Path, image: str, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update({"SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), "SANDBOX_REPLAY_IMAGE": image})
    return subprocess.run(
        [CLI, "--log-format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module", params=["v1_default", "v2_default"])
def imported(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sandbox_image: str
) -> Path:
    folder = realdata("otel-agentevals", "adk_py", request.param)
    work = tmp_path_factory.mktemp(request.param)
    files = [str(folder / f"{name}.json") for name in SESSIONS]
    done = cli(["import", "otel", *files, "--out", "import", "--json"], work, sandbox_image)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # 8 sessions and S4b's research agent, called as a tool: a run of its own
    assert report["runs"] == 9 and report["failed_runs"] == 1, report
    assert report["notes"] == []
    return work / "import"


def test_lint_lists_exactly_what_otel_lacks(imported: Path, sandbox_image: str) -> None:
    done = cli(["lint", "--json", "traces"], imported, sandbox_image)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert len(report["traces"]) == 9
    for trace in report["traces"]:
        fields = trace["summary"]["fields"]
        provider = sum(1 for c in trace["calls"] if c["kind"] in ("model", "user"))
        tools = len(trace["calls"]) - provider
        assert fields["body"]["missing"] == provider > 0, trace["file"]  # no HTTP bodies
        assert fields["schema_hash"]["missing"] == tools, trace["file"]  # none in OTel
        # ADK's response JSON names the model version (gemini-2.5-flash-001); user turns
        # have only the requested model
        users = sum(1 for c in trace["calls"] if c["kind"] == "user")
        assert fields["model_id"]["missing"] == users, trace["file"]
        assert fields["clock"]["missing"] == 0  # span start times


def test_complete_sessions_reproduce_against_the_written_workflow(
    imported: Path, sandbox_image: str
) -> None:
    done = cli(["reproduce", "--json", "traces"], imported, sandbox_image)
    reports = json.loads(done.stdout)["traces"]
    assert len(reports) == 9
    outcomes = {Path(r["input"]).stem.split("-")[1]: r["outcome"] for r in reports}
    assert outcomes == dict.fromkeys(SESSIONS, "reproduced"), [
        (r["input"], r.get("reason")) for r in reports if r["outcome"] != "reproduced"
    ]
    s6a = next(r for r in reports if "S6a" in r["input"])
    # the source ended the run on the tool's error; the written workflow says tool_errors:
    # raise, so the replay fails at the same call (was: not_reproduced, the agent
    # loop handed the error back instead of failing on it)
    assert "same failure signature" in s6a["reason"], s6a
    for report in reports:
        assert report["outbound"] == []


def test_an_altered_tool_result_is_not_reproduced(imported: Path, sandbox_image: str) -> None:
    source = imported / "traces" / next(p.name for p in (imported / "traces").glob("*S2*.jsonl"))
    lines = lines_of(source)
    tool = next(
        line for line in lines if line.get("type") == "call" and line["tool"] == "get_weather"
    )
    tool["body"] = json.dumps({"city": "Paris", "forecast": "snow", "temp_c": -5})
    altered = imported / "traces" / "altered.jsonl"
    altered.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    try:
        done = cli(["reproduce", "--json", "traces/altered.jsonl"], imported, sandbox_image)
    finally:
        altered.unlink()
    report = json.loads(done.stdout)["traces"][0]
    assert done.returncode == 1 and report["outcome"] == "not_reproduced", report
    assert report["first_difference"]["index"] == tool["index"] + 1  # the next model request


@pytest.mark.parametrize("kind", ["openai-v2", "openinference"])
def test_instrumented_agent_session_reproduces(
    kind: str, tmp_path: Path, sandbox_image: str
) -> None:
    """Telemetry of a published instrumentation (optional extra otel-instrumentation)."""
    pytest.importorskip("opentelemetry.sdk", reason="optional extra otel-instrumentation")
    pytest.importorskip("openai", reason="optional extra otel-instrumentation")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.otel_agent", kind, str(tmp_path / "tel")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"instrumentation {kind} not installed")
    assert done.returncode == 0, done.stderr
    done = cli(
        ["import", "otel", str(tmp_path / "tel" / "otlp.json"), "--out", "imp"],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    done = cli(["reproduce", "--json", "traces"], tmp_path / "imp", sandbox_image)
    report = json.loads(done.stdout)["traces"][0]
    assert report["outcome"] == "reproduced", report.get("reason")
    assert done.returncode == 0


def test_submit_evaluates_two_versions_on_the_imported_tasks(
    tmp_path: Path, sandbox_image: str
) -> None:
    """The tasks file carries the tool results as observations: ``submit`` replays reads from it.

    Model turns go to a fake OpenAI-compatible server on 127.0.0.1 that asks for the weather
    in the task's city, then answers; v2 changes the system prompt.
    """
    from tests.support.fake_openai import FakeOpenAI, serve

    folder = realdata("otel-agentevals", "adk_py", "v1_default")
    files = [str(folder / f"{name}.json") for name in ("S2", "S5")]
    maps = ["--map", "get_weather=read", "--map", "get_time=read"]
    done = cli(["import", "otel", *files, "--out", "imp", *maps], tmp_path, sandbox_image)
    assert done.returncode == 0, done.stderr
    imp = tmp_path / "imp"
    # the recorded model (gemini-2.5-flash) has no price in the shadow policy: submit refuses an
    # unpriced model under a USD ceiling, so both versions name a priced one
    v1 = (imp / "workflow.yaml").read_text("utf-8").replace("gemini-2.5-flash", "gpt-4.1-mini")
    assert "get_weather" in v1
    (imp / "workflow.yaml").write_text(v1, encoding="utf-8")
    (imp / "workflow-v2.yaml").write_text(
        v1.replace("version: '1'", "version: '2'").replace(
            "Answer weather questions using tools.", "Answer weather questions briefly."
        ),
        encoding="utf-8",
    )

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        messages = request["messages"]
        if not any(m["role"] == "tool" for m in messages):
            city = "London" if "London" in messages[1]["content"] else "Paris"
            call = {"name": "get_weather", "arguments": json.dumps({"city": city})}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": call}],
            }
        return {
            "role": "assistant",
            "content": f"It is {json.loads(messages[-1]['content'])['forecast']}.",
        }

    with serve(FakeOpenAI(answer=answer)) as fake:
        env_args = [
            "submit",
            "--json",
            "--variant",
            "workflow.yaml",
            "--variant",
            "workflow-v2.yaml",
            "--tasks",
            "tasks.jsonl",
        ]
        env = dict(os.environ)
        env.update(
            SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
            SANDBOX_REPLAY_IMAGE=sandbox_image,
            SANDBOX_REPLAY_OPENAI_BASE_URL=fake.url,
            SANDBOX_REPLAY_OPENAI_API_KEY="sk-fake",
        )
        done = subprocess.run(
            [CLI, "--log-format", "json", *env_args],
            cwd=imp,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["plan"]["runs"] == 4
    assert report["runs_by_status"] == {"succeeded": 4}, report
    assert len(fake.requests) == 8  # two model turns per episode, served by the fake
    tools = [m for r in fake.requests for m in r["messages"] if m["role"] == "tool"]
    assert {json.loads(t["content"])["forecast"] for t in tools} == {"sunny", "rainy"}  # recorded
