"""Every import reproduces against the workflow it wrote, in real containers.

Each source fixture of ``tests/fixtures/import/`` is imported (and a few variants: a chat file
without tool definitions, with ``--tools``; a τ² results file without its tools file) and every
trace written is reproduced against its own workflow: all ``reproduced``. The fixtures cover
episodes that end right after a tool result (a hand-off by a tool call, a step limit), tools
known by name only, and dotted tool names mapped to function names. The public τ² results are
imported too, and 10 of their 40 traces reproduced (tests/integration/test_tau2.py reproduces
all 40).
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

from runner.settings import Settings

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "import"
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker

# (case id, importer, source relative to FIXTURES, extra flags, copy the source alone)
CASES = [
    ("chat-jsonl-dotted-names", "openai-messages", "chat.jsonl", [], False),
    ("chat-array", "openai-messages", "chat-array.json", [], False),
    ("chat-bare-no-tools", "openai-messages", "chat-bare.json", [], False),
    ("chat-bare-with-tools", "openai-messages", "chat-bare.json", ["--tools", "tools.json"], False),
    ("reproducible", "openai-messages", "reproducible.jsonl", [], False),
    ("handoff", "openai-messages", "handoff.jsonl", [], False),
    ("tau2-mini", "tau2", "tau2-mini/results.json", [], False),
    ("tau2-mini-no-tools-file", "tau2", "tau2-mini/results.json", [], True),
    ("tau2-handoff", "tau2", "tau2-handoff/results.json", [], False),
    # telemetry, Inspect logs and ATIF trajectories recorded by others
    ("claude-platform", "otel", "otel/claude-platform/sdk-and-api.json", [], False),
    ("kagent-k8s", "otel", "otel/kagent/k8s.json", [], False),
    ("kagent-tempo", "otel", "otel/kagent/tempo_export_with_batches.json", [], False),
    *[
        (f"any-agent-{n.lower()}", "otel", f"otel/any-agent/{n}.json", [], False)
        for n in ("AGNO", "GOOGLE", "OPENAI", "SMOLAGENTS", "TINYAGENT")
    ],
    ("inspect-eval", "inspect", "inspect/arith.eval", [], False),
    ("atif-rfc-example", "atif", "atif/rfc-example.json", [], False),
    ("atif-delegation", "atif", "atif/delegation.jsonl", [], False),
]
TOOL_FILES = {"tools.json", "mini_tools.json"}  # --tools inputs, not sources
NOT_SOURCES = {"SOURCE.md", "LICENSE", "make_log.py"}  # provenance and the log's generator
# any-agent's LangChain and LlamaIndex runs make one more model call after the final answer
# (the framework turns the answer into structured output in a request of its own): the
# generic agent stops at a final answer, so the replay ends one call early (not_reproduced,
# naming that call); test_a_call_after_the_final_answer_is_named pins it
AFTER_FINAL_ANSWER = ("otel/any-agent/LANGCHAIN.json", "otel/any-agent/LLAMA_INDEX.json")


def cli(
    args: list[str], cwd: Path, image: str, timeout: int = 600
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


def _reports(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.stdout.strip(), done.stderr[-3000:]
    return list(json.loads(done.stdout)["traces"])  # {exit_code, outcomes, traces}


def test_every_source_fixture_is_a_case() -> None:
    sources = {
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name not in TOOL_FILES | NOT_SOURCES
    }
    assert sources == {case[2] for case in CASES} | set(AFTER_FINAL_ANSWER)


@pytest.mark.parametrize(
    ("case", "kind", "source", "flags", "alone"), CASES, ids=[c[0] for c in CASES]
)
def test_an_import_reproduces_against_the_workflow_it_wrote(
    case: str,
    kind: str,
    source: str,
    flags: list[str],
    alone: bool,
    tmp_path: Path,
    sandbox_image: str,
) -> None:
    path = FIXTURES / source
    if alone:  # without the tools file beside it: tools known only from the calls
        path = shutil.copy(path, tmp_path / path.name)
    args = ["import", kind, str(path), "--out", "imp", "--json"]
    args += [str(FIXTURES / f) if f.endswith(".json") else f for f in flags]
    done = cli(args, tmp_path, sandbox_image)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = tmp_path / "imp"
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert traces
    done = cli(["reproduce", "--json", "traces"], out, sandbox_image)
    reports = _reports(done)
    outcomes = {r["input"]: (r["outcome"], r.get("reason")) for r in reports}
    assert all(o == "reproduced" for o, _ in outcomes.values()), outcomes
    assert done.returncode == 0 and len(reports) == len(traces)


@pytest.mark.slow
def test_the_public_tau2_results_reproduce_a_sample(tmp_path: Path, sandbox_image: str) -> None:
    folder = Settings().realdata_dir
    folder = folder if folder.is_absolute() else (REPO / folder).resolve()
    results = folder / "tau2-retail" / "results.json"
    if not results.is_file():
        message = f"τ² retail results not found at {results}: set SANDBOX_REPLAY_REALDATA_DIR"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    done = cli(["import", "tau2", str(results), "--out", "imp", "--json"], tmp_path, sandbox_image)
    assert done.returncode == 0, done.stderr[-3000:]
    traces = sorted((tmp_path / "imp" / "traces").glob("*.jsonl"))
    assert len(traces) == 40
    sample = [str(p.relative_to(tmp_path / "imp")) for p in traces[::4]]
    done = cli(["reproduce", "--json", *sample], tmp_path / "imp", sandbox_image)
    reports = _reports(done)
    assert [r["outcome"] for r in reports] == ["reproduced"] * 10, [
        (r["input"], r.get("reason")) for r in reports
    ]


@pytest.mark.parametrize("source", AFTER_FINAL_ANSWER)
def test_a_call_after_the_final_answer_is_named(
    source: str, tmp_path: Path, sandbox_image: str
) -> None:
    done = cli(
        ["import", "otel", str(FIXTURES / source), "--out", "imp", "--json"],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "imp"
    (trace,) = (out / "traces").glob("*.jsonl")
    calls = [json.loads(x) for x in trace.read_text("utf-8").splitlines()[1:-1]]
    done = cli(["reproduce", "--json", "traces"], out, sandbox_image)
    (report,) = _reports(done)
    assert report["outcome"] == "not_reproduced", report
    assert f"call #{len(calls) - 1} model: the replay made no call" in report["reason"]


def test_adk_runs_reproduce_their_tool_error_abort(tmp_path: Path, sandbox_image: str) -> None:
    """ADK without an error handler ends the run on a tool's error (S6a): `tool_errors: raise`."""
    folder = Settings().realdata_dir
    folder = folder if folder.is_absolute() else (REPO / folder).resolve()
    sources = sorted((folder / "otel-agentevals" / "adk_py").glob("*/S6a.json"))
    if not sources:
        message = f"agentevals recordings not found under {folder}: set SANDBOX_REPLAY_REALDATA_DIR"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    for n, source in enumerate(sources):
        out = f"imp{n}"
        done = cli(["import", "otel", str(source), "--out", out, "--json"], tmp_path, sandbox_image)
        assert done.returncode == 0, done.stderr[-3000:]
        done = cli(["reproduce", "--json", "traces"], tmp_path / out, sandbox_image)
        (report,) = _reports(done)
        assert report["outcome"] == "reproduced", report  # was: replay ended succeeded
