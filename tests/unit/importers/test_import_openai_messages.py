"""`sandbox-replay import openai-messages`: the chat shapes, matching by position, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from runner.cli.app import app
from runner.domain.tasks import load_tasks
from runner.errors import InputError
from runner.importers.openai_messages import read_openai_messages
from runner.importers.output import write_import
from runner.importers.toolset import parse_effect_map
from runner.tools.source import load_manifest_tools
from runner.trace.format import failure_signature
from runner.tracetools.reader import read_trace
from tests.support.paths import REPO
from tests.support.tracelines import resolved_lines

ROOT = REPO
FIX = ROOT / "tests" / "fixtures" / "import"
SCHEMA = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _fresh_logging() -> Any:
    """The CLI configures structlog onto CliRunner's stream, closed after the call: reset it."""
    yield
    structlog.reset_defaults()


def imported(tmp_path: Path, name: str, tools: Path | None = None, **kw: Any) -> dict[str, Any]:
    report = write_import(read_openai_messages(FIX / name, tools), tmp_path, kw.get("map", {}))
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    traces = {}
    for path in sorted((tmp_path / "traces").glob("*.jsonl")):
        assert read_trace(path).problems == ()
        lines = resolved_lines(path)
        for line in lines:
            assert not list(validator.iter_errors(line)), line
        traces[path.stem] = lines
    assert load_tasks(tmp_path / "tasks.jsonl").errors == []
    load_manifest_tools(tmp_path / "tools.manifest.json", "tools.manifest.json", {})
    return {"report": report, "traces": traces}


def test_jsonl_with_tools_per_line(tmp_path: Path) -> None:
    got = imported(tmp_path, "chat.jsonl", FIX / "tools.json")
    report, traces = got["report"], got["traces"]
    assert report["runs"] == 3 and sorted(traces) == ["chat-1", "chat-2", "chat-3"]
    assert report["failed_runs"] == 1 and report["fixed_messages"] == 0
    first = traces["chat-1"]
    head, calls, end = first[0], first[1:-1], first[-1]
    # extra keys are metadata; the first user message is the task input
    assert head["meta"]["id"] == "conv-α" and head["meta"]["reward"] == 0.0
    assert head["task_input"] == {
        "message": "Mon ticket T-1 ne marche pas — pouvez-vous vérifier ?"
    }
    assert head["backend"] == "import:openai-messages"
    kinds = [c["tool"] for c in calls]
    assert kinds == [
        "model",
        "ticket.get",
        "kb_search",
        "model",
        "ticket.close",
        "model",
        "user",
        "model",
    ]
    # text and tool calls in one assistant message: one model turn, both kept
    body = json.loads(calls[0]["body"])["message"]
    assert body["content"] == "Je regarde le ticket et la base de connaissances…"
    assert len(body["tool_calls"]) == 2
    assert calls[0]["request"]["messages"][0] == {
        "role": "system",
        "content": "You are a help-desk agent. Réponds poliment.",
    }
    history = calls[3]["request"]["messages"]
    assert history[2]["content"] == body["content"] and len(history[2]["tool_calls"]) == 2
    # call_1 is reused for ticket.close: its result belongs to the later call
    close = calls[4]
    assert close["args"] == {"ticket_id": "T-9", "note": "résolu ✓"}
    assert close["body"] == "Error: ticket T-9 not found"
    assert "error" not in close  # an error in plain text stays a body: no class is invented
    assert calls[6]["request"]["messages"][-1]["content"].startswith("Désolé")
    assert "model" not in calls[0]  # no alias in the source: no model id
    last = len(calls) - 1
    assert end["status"] == "failed"
    assert end["failure_signature"] == failure_signature(last, "workflow", "task_failed", 1)
    assert "Parfait 🎉" in (tmp_path / "traces" / "chat-1.jsonl").read_text("utf-8")
    assert end["output"] == "Parfait 🎉"

    second = traces["chat-2"]
    assert second[0]["meta"]["task_id"] == "second" and second[-1]["status"] == "succeeded"
    assert second[1]["model"] == "gpt-4o-mini" and second[1]["model_source"] == "config"
    matched = second[2]
    assert matched["meta"]["matched_by"] == "position" and matched["meta"]["call_id"] == "a"
    assert report["tool_results_matched_by_position"] == 1
    third = traces["chat-3"]
    assert third[2]["error"] == {"class": "ToolError", "message": "permission denied"}
    assert report["tool_errors"] == 1
    # each run's workflow: its own model, a simulated user only when it has user turns
    for lines in traces.values():
        wf_file = tmp_path / lines[0]["meta"]["workflow_file"]
        assert wf_file.read_text("utf-8") == lines[0]["workflow"]["content"]
    assert "name: gpt-4o-mini" in second[0]["workflow"]["content"]
    assert "user:" in first[0]["workflow"]["content"]
    assert "user:" not in third[0]["workflow"]["content"]
    assert calls[0]["request"]["model"] == calls[6]["request"]["model"] == "replay"
    assert calls[6]["request"]["messages"][0]["role"] == "system"
    assert calls[6]["request"]["messages"][-1]["role"] == "user"  # the agent's text, swapped
    # --tools serves the runs without tools of their own, offered under their function
    # names as the runtime offers them (dots as __)
    assert [t["function"]["name"] for t in third[1]["request"]["tools"]] == [
        "ticket__get",
        "ticket__close",
        "kb_search",
    ]


@pytest.mark.parametrize("name", ["chat-array.json", "chat-bare.json"])
def test_json_array_shapes(tmp_path: Path, name: str) -> None:
    got = imported(tmp_path, name, FIX / "tools.json")
    assert got["report"]["runs"] == 3
    assert got["report"]["calls"] == {"model": 8, "user": 1, "tool": 5, "total": 14}
    manifest = json.loads((tmp_path / "tools.manifest.json").read_text("utf-8"))
    assert {t["id"]: t["effect"] for t in manifest["tools"]} == {
        "ticket.get": "unsafe",
        "ticket.close": "unsafe",
        "kb_search": "unsafe",
    }
    failed = got["report"]["failed_runs"]
    assert failed == (1 if name == "chat-array.json" else 0)  # bare lists carry no reward


def test_map_and_workflows_are_checkable(tmp_path: Path) -> None:
    from runner.admission.eligibility import check_eligibility

    effect_map = parse_effect_map(["ticket.get=read"], None)
    map_file = tmp_path / "effects.map"
    map_file.write_text("# chat tools\nkb_search = read\n", encoding="utf-8")
    effect_map = {**parse_effect_map([], map_file), **effect_map}
    out = tmp_path / "out"
    imported(out, "chat.jsonl", FIX / "tools.json", map=effect_map)
    names = sorted(p.name for p in out.glob("workflow*.yaml"))
    assert "workflow.yaml" in names and "workflow.read-only.yaml" in names
    report = check_eligibility([out / "workflow.read-only.yaml"], "shadow")
    assert report.eligible, report.lines()
    full = check_eligibility([out / "workflow.yaml"], "shadow")
    assert not full.eligible
    assert {p.tool for p in full.problems} == {"ticket.close"}


def write(tmp_path: Path, text: str, name: str = "bad.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ('{"messages": []}\n{not json\n', 2, None),
        ('{"messages": []}\n\n{"id": 3}\n', 3, "messages"),
        ('{"messages": "hi"}\n', 1, "messages"),
        ('{"messages": [{"role": "robot", "content": "x"}]}\n', 1, "messages[0].role"),
        (
            '{"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]}',
            1,
            "messages[1]",
        ),
        ('[{"messages": [{"role": "user", "content": "x"}]},\n {"id": 1}]', 2, "messages"),
        (
            '{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "a b"}}]}]}',
            1,
            "messages[0].tool_calls[0].name",
        ),
    ],
)
def test_bad_input_names_file_line_field(
    tmp_path: Path, text: str, line: int, field: str | None
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        write_import(read_openai_messages(path), tmp_path / "out", {})
    assert info.value.fields["file"] == str(path)
    assert info.value.fields["line"] == line
    assert info.value.fields.get("field") == field
    assert not (tmp_path / "out").exists()


def test_tool_defined_two_ways_and_bad_maps(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    other = {"type": "function", "function": {"name": "t", "parameters": {"type": "string"}}}
    path = write(
        tmp_path,
        json.dumps({"messages": [], "tools": [tool]})
        + "\n"
        + json.dumps({"messages": [], "tools": [other]})
        + "\n",
    )
    with pytest.raises(InputError, match="differs from its definition") as info:
        read_openai_messages(path)
    assert info.value.fields["line"] == 2
    bad_map = write(tmp_path, "kb_search\n", "m.map")
    with pytest.raises(InputError) as info:
        parse_effect_map([], bad_map)
    assert info.value.fields["line"] == 1
    with pytest.raises(InputError, match="not one of"):
        parse_effect_map(["kb_search=harmless"])
    source = read_openai_messages(FIX / "chat.jsonl", FIX / "tools.json")
    with pytest.raises(InputError, match="nope"):
        write_import(source, tmp_path / "o", {"nope": "read"})


def test_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    args = ["import", "openai-messages", str(FIX / "chat.jsonl"), "--out", str(out)]
    result = runner.invoke(app, [*args, "--tools", str(FIX / "tools.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"] == 3
    bad = write(tmp_path, '{"messages": [\n')
    failed = runner.invoke(
        app, ["import", "openai-messages", str(bad), "--out", str(tmp_path / "x")]
    )
    assert failed.exit_code == 2
    assert f"error: {bad}:1:" in failed.output and "Traceback" not in failed.output
