"""`import otel` on telemetry made by the published instrumentations, compared with the agent.

`tests.support.otel_agent` runs an agent loop with the official ``openai`` client against a loopback
fake server under ``opentelemetry-instrumentation-openai-v2`` (OTel GenAI conventions, each
content mode) or ``openinference-instrumentation-openai`` (OpenInference), and exports what
they recorded with the SDK's own encoders. The import must say what the agent really did:
its tool calls (name, arguments, result), its model calls, its token totals, its answers and
its second user turn; where content capture is off, the contents are missing, not invented.

Needs the optional extra ``otel-instrumentation``
(``pip install -e '.[dev,otel-instrumentation]'``); without it these tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.importers.otel import read_otel
from runner.importers.output import write_import
from runner.tracetools.reader import read_trace
from tests.support.paths import REPO
from tests.support.tracelines import resolved_lines

ROOT = REPO

for module in ("openai", "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common"):
    pytest.importorskip(module, reason="optional extra otel-instrumentation not installed")


def record(tmp_path: Path, kind: str, **env: str) -> Path:
    out = tmp_path / "telemetry"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.otel_agent", kind, str(out)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"instrumentation {kind} not installed: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    return out


def imported(tmp_path: Path, source: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    report = write_import(read_otel([source]), tmp_path / "import", {})
    (trace,) = sorted((tmp_path / "import" / "traces").glob("*.jsonl"))
    assert read_trace(trace).problems == ()
    return resolved_lines(trace), report


def tool_calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": c["tool"], "args": c["args"], "result": c["body"]}
        for c in lines
        if c["type"] == "call" and c["tool"] not in ("model", "user")
    ]


def check_complete(lines: list[dict[str, Any]], did: dict[str, Any]) -> None:
    head, calls, end = lines[0], [x for x in lines if x["type"] == "call"], lines[-1]
    assert tool_calls(lines) == did["tool_calls"]
    assert sum(c["tool"] == "model" for c in calls) == did["model_calls"] == did["requests"]
    assert (end["meter"]["tokens_in"], end["meter"]["tokens_out"]) == tuple(did["tokens"])
    assert head["task_input"] == {"message": "My password reset link for ticket T-7 fails."}
    users = [json.loads(c["body"])["message"]["content"] for c in calls if c["tool"] == "user"]
    assert users == ["Thanks, and how do I log in?"]
    answers = [
        json.loads(c["body"])["message"]["content"]
        for c in calls
        if c["tool"] == "model" and not json.loads(c["body"])["message"].get("tool_calls")
    ]
    assert answers == did["answers"]
    assert end["status"] == "succeeded" and end["output"] == did["answers"][-1]
    models = {(c.get("model"), c.get("model_source")) for c in calls if c["tool"] == "model"}
    assert models == {("gpt-4.1-mini-2025-04-14", "response")}  # read from the response


@pytest.mark.parametrize("mode", ["SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"])
def test_openai_v2_genai_conventions(tmp_path: Path, mode: str) -> None:
    out = record(
        tmp_path,
        "openai-v2",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=mode,
    )
    did = json.loads((out / "did.json").read_text("utf-8"))
    lines, report = imported(tmp_path, out / "otlp.json")
    check_complete(lines, did)
    assert lines[1]["request"]["messages"][0] == {
        "role": "system",
        "content": "You are the helpdesk.",
    }
    # the GenAI instrumentation records no tool definitions: the tools are known by name only
    # (the import says so and names --tools), and nothing else is noted
    assert [n for n in report["notes"] if not n.startswith("tools known by name only")] == []
    # no tool spans from this instrumentation: results come from the next request's messages
    assert all(
        c.get("meta", {}).get("result_from") == "next_model_input"
        for c in lines
        if c.get("tool") == "kb_search"
    )


def test_openai_v2_without_content_records_it_missing(tmp_path: Path) -> None:
    out = record(tmp_path, "openai-v2", OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental")
    did = json.loads((out / "did.json").read_text("utf-8"))
    lines, report = imported(tmp_path, out / "otlp.json")
    calls = [x for x in lines if x["type"] == "call"]
    # every model call and its tokens are there; what was said is not, and nothing is made up
    assert sum(c["tool"] == "model" for c in calls) == did["model_calls"]
    assert (lines[-1]["meter"]["tokens_in"], lines[-1]["meter"]["tokens_out"]) == tuple(
        did["tokens"]
    )
    assert all(c["body"] is None for c in calls if c["tool"] == "model")
    assert tool_calls(lines) == []  # neither the model's output nor tool spans name them
    assert report["missing"]["model.body"] == did["model_calls"]


@pytest.mark.parametrize("export", ["otlp.json", "spans.jsonl"])
def test_openinference_conventions(tmp_path: Path, export: str) -> None:
    out = record(tmp_path, "openinference")
    did = json.loads((out / "did.json").read_text("utf-8"))
    lines, report = imported(tmp_path, out / export)
    check_complete(lines, did)
    assert lines[0]["meta"]["session_key"] == {"kind": "session", "value": "helpdesk-session-1"}
    manifest = json.loads((tmp_path / "import" / "tools.manifest.json").read_text("utf-8"))
    assert [t["id"] for t in manifest["tools"]] == ["kb_search", "ticket_get"]
    assert manifest["tools"][0]["schema"] == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
    }
    assert report["notes"] == []
