"""docs/trace.schema.json: valid draft 2020-12, accepts the golden traces, and agrees with the
reader (runner.tracetools.reader) line by line on good and systematically broken lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner.errors import SandboxReplayError
from runner.trace.format import STATUSES
from runner.tracetools.reader import CallRecord, EndRecord, RunRecord, validate_record
from tests.support.paths import REPO

ROOT = REPO
SCHEMA = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
TRACES = ROOT / "tests" / "fixtures" / "traces"
READABLE = [
    "complete_succeeded.jsonl",
    "failed_signature.jsonl",
    "missing_fields.jsonl",
    "bodies.jsonl",
]
VALIDATOR = Draft202012Validator(SCHEMA)


def lines_of(name: str) -> list[dict[str, Any]]:
    text = (TRACES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def schema_errors(line: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(line)
    ]


def reader_accepts(line: dict[str, Any]) -> bool:
    try:
        validate_record(line)
    except SandboxReplayError:
        return False
    return True


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("name", READABLE)
def test_golden_trace_lines_validate(name: str) -> None:
    for number, line in enumerate(lines_of(name), start=1):
        assert schema_errors(line) == [], f"{name}:{number}"


def test_truncated_trace_lines_before_the_cut_validate() -> None:
    lines = lines_of("truncated_last_line.jsonl")
    assert len(lines) == 2 and all(schema_errors(line) == [] for line in lines)


def test_unknown_version_fails_on_v() -> None:
    errors = schema_errors(lines_of("unknown_version.jsonl")[0])
    assert errors and all(e.startswith("v:") for e in errors)


def test_schema_and_models_have_the_same_keys() -> None:
    defs = SCHEMA["$defs"]
    for kind, model in (("run", RunRecord), ("call", CallRecord), ("end", EndRecord)):
        keys = {f.alias or name for name, f in model.model_fields.items()}
        assert set(defs[kind]["properties"]) == keys, kind
        required = {f.alias or name for name, f in model.model_fields.items() if f.is_required()}
        assert set(defs[kind]["required"]) == required, kind
    assert defs["end"]["properties"]["status"]["enum"] == list(STATUSES)


_WRONG: list[Any] = [None, "x", 7, 1.5, True, [], {}]


def _mutations() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    for name in READABLE:
        for number, line in enumerate(lines_of(name), start=1):
            where = f"{name}:{number}"
            cases.append((f"{where} +unknown", {**line, "unknown_key": 1}))
            for key in line:
                dropped = {k: v for k, v in line.items() if k != key}
                cases.append((f"{where} -{key}", dropped))
                for value in _WRONG:
                    cases.append((f"{where} {key}={value!r}", {**line, key: value}))
            for key, value in line.items():
                if isinstance(value, dict) and key not in (
                    "task_input",
                    "args",
                    "request",
                    "usage",
                    "meta",
                    "policy",
                ):
                    for inner in value:
                        broken = copy.deepcopy(line)
                        broken[key][inner] = "x" if not isinstance(value[inner], str) else 7
                        cases.append((f"{where} {key}.{inner} wrong", broken))
                        broken = copy.deepcopy(line)
                        del broken[key][inner]
                        cases.append((f"{where} -{key}.{inner}", broken))
    return cases


def test_reader_and_schema_agree_on_every_mutation() -> None:
    disagreements = []
    cases = _mutations()
    for label, line in cases:
        by_schema = not schema_errors(line)
        if by_schema != reader_accepts(line):
            disagreements.append(f"{label}: schema {'accepts' if by_schema else 'rejects'}")
    assert len(cases) > 1000
    assert disagreements == []


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("run-2026-10-27T1420", True),
        ("T 42", True),
        ("..", False),
        (".", False),
        ("a/b", False),
        ("x.", False),
        (" x", False),
        ("a:b", False),
        ("a\tb", False),
        ("", False),
        ("é-1", True),
    ],
)
def test_id_rule_agrees(value: str, valid: bool) -> None:
    line = {**lines_of("complete_succeeded.jsonl")[0], "run_id": value}
    assert (not schema_errors(line), reader_accepts(line)) == (valid, valid)


# --- traces written by the episode driver (runner.episode.driver + tracewriter) -------

_RUNTIME = r"""
import json, os, sys
from runner.trace.format import encode_body
fail = sys.argv[1] == "failed"
def send(msg):
    sys.stdout.buffer.write(json.dumps(msg).encode() + b"\n"); sys.stdout.flush()
def recv():
    return json.loads(sys.stdin.buffer.readline())
send({"type": "hello", "protocol": 1, "python": "3.11.2", "platform": "linux",
      "pid": os.getpid(), "packages": {"x": "1"}})
recv()
send({"type": "egress", "attempt": {"kind": "connect", "host": "api.example", "address":
      "10.9.9.9", "port": 443, "resolved_from": None, "outcome": "blocked", "pid": 5}})
tool = {"index": 0, "step_id": "fetch", "tool": "kb.search", "effect": "read",
        "args": {"q": "hi"}, "schema_hash": "%(hash)s", "clock": 101.0, "duration_s": 0.001,
        "source": "observation", "raw_io": False}
if fail:
    tool["error"] = {"class": "KeyError", "message": "'hi'"}
else:
    tool.update(encode_body(json.dumps({"hits": ["caf\u00e9"]})))
send({"type": "call", "record": tool})
if not fail:
    send({"type": "model_request", "id": "m1", "role": "model",
          "request": {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}})
    resp = recv()
    call = {"index": 1, "step_id": "answer", "tool": "model", "request": {"model": "demo",
            "messages": [{"role": "user", "content": "hi"}]}, "clock": 102.0,
            "duration_s": 0.01, "source": "provider", "model": resp["model"],
            "model_source": "response", "usage": resp["usage"]}
    call.update(encode_body(resp["body"]))
    send({"type": "call", "record": call})
    send({"type": "episode", "status": "succeeded", "output": "ok", "error": None,
          "not_run": []})
else:
    send({"type": "episode", "status": "failed", "output": None,
          "error": {"class": "KeyError", "message": "'hi'"}, "not_run": ["answer"],
          "failure": {"call_index": 0, "tool": "kb.search", "error_class": "KeyError"}})
recv()
"""

_WORKFLOW = """\
name: demo
version: "1"
tools: [demo_tools]
model: {provider: scripted, function: "m:f"}
steps:
  - id: fetch
    tool: kb.search
    args: {q: "${task.q}"}
  - id: answer
    agent: {tools: [kb.search], max_turns: 2}
"""


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_episode_driver_traces_validate_read_and_lint_complete(
    tmp_path: Path, outcome: str
) -> None:
    import sys
    from types import SimpleNamespace

    from runner.domain.ids import sequential_ids
    from runner.domain.tasks import Task
    from runner.domain.workflow import load_workflow
    from runner.episode.driver import run_episode
    from runner.episode.request import EpisodeRequest
    from runner.providers.scripted import ScriptedProvider
    from runner.sdk import schema_hash
    from runner.settings import Settings
    from runner.tools.snapshot.toolsnapshot import SnapshotEntry, build_snapshot
    from runner.tracetools.lint import lint_trace
    from tests.support.fakes import SubprocessBackend

    tool_hash = schema_hash({"type": "object"})
    script = tmp_path / "runtime.py"
    script.write_text(_RUNTIME % {"hash": tool_hash})
    (tmp_path / "wf.yaml").write_text(_WORKFLOW)
    manifest = {
        "policy": {"name": "shadow", "mode": "shadow", "hash": "p" * 64},
        "tools": [
            {
                "id": "kb.search",
                "effect": "read",
                "schema_hash": tool_hash,
                "module": "demo_tools",
                "qualname": "search",
                "disposition": "recorded",
            }
        ],
    }
    registry = SimpleNamespace(manifest=lambda policy: manifest, tool_roots=lambda: [tmp_path])
    (tmp_path / "demo_tools.py").write_text("x = 1\n")
    snapshot = build_snapshot(
        [SnapshotEntry(tmp_path.resolve(), "demo_tools.py")], state_dir=tmp_path / "state"
    )
    limits = SimpleNamespace(timeout_s=20, memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16)
    request = EpisodeRequest(
        workflow=load_workflow(tmp_path / "wf.yaml"),
        task=Task(task_id="t1", input={"q": "hi"}, clock_start=100.0),
        policy=SimpleNamespace(name="shadow", mode="shadow", hash="p" * 64, limits=limits),
        registry=registry,
        image="img:1",
        snapshot=snapshot,
    )
    response = {
        "id": "c1",
        "model": "demo-script-v1",
        "usage": {"prompt_tokens": 3},
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
    }
    result = run_episode(
        request,
        backend=SubprocessBackend([sys.executable, "-u", str(script), outcome], cwd=ROOT),
        settings=Settings(state_dir=tmp_path / "state"),
        provider=ScriptedProvider(lambda req: response),
        id_factory=sequential_ids(),
    )
    assert result.status == outcome
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    for number, line in enumerate(lines, start=1):
        assert schema_errors(line) == [], f"line {number}"
    lint = lint_trace(result.trace_path)
    assert lint.errors == () and lint.exit_code == 0, lint.to_json()
    assert lint.failure_signature.status == ("ok" if outcome == "failed" else "not_applicable")


def test_a_run_line_naming_its_sandbox_reads_and_validates() -> None:
    """The run line names its sandbox; a trace from before, without it, still reads."""
    name = sorted(p.name for p in TRACES.glob("*.jsonl"))[0]
    line = copy.deepcopy(lines_of(name)[0])
    assert "sandbox" not in line and schema_errors(line) == [] and reader_accepts(line)
    line["sandbox"] = "sandbox-replay-pool-3-0123456789ab"
    assert schema_errors(line) == []
    assert reader_accepts(line)
    assert RunRecord.model_validate(line).sandbox == line["sandbox"]
    for bad in ("", 7, "x" * 257, "x" * 1_000_000):  # a name is at most 256 characters
        line["sandbox"] = bad
        assert schema_errors(line) and not reader_accepts(line), bad[:20] if bad else bad
    line["sandbox"] = "x" * 256
    assert schema_errors(line) == [] and reader_accepts(line)


def test_a_run_line_naming_its_node_reads_and_validates() -> None:
    """A trace made by ``--backend ray`` names the Ray node in its run line."""
    name = sorted(p.name for p in TRACES.glob("*.jsonl"))[0]
    line = copy.deepcopy(lines_of(name)[0])
    line.update(backend="ray", node="4c0116f8675ac1c10e7a208424096ca8a7acac47a844a7ee334f1f55")
    assert schema_errors(line) == []
    assert reader_accepts(line)
    assert RunRecord.model_validate(line).node == line["node"]
    line["node"] = ""
    assert schema_errors(line) and not reader_accepts(line)
