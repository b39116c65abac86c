"""Record mode: runner.sdk.record in a user's process, the SDK HTTP helper, raw I/O replay in
the runtime, and ``record_run`` through a local process (no Docker; loopback only)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"
RUNTIME_FIXTURES = TESTS / "fixtures" / "runtime"
sys.path.insert(0, str(GOLDEN))
sys.path.insert(0, str(RUNTIME_FIXTURES))
from fakehost import run_runtime, write_run_dir  # noqa: E402
from loopback import loopback_server  # noqa: E402

from runner import sdk  # noqa: E402
from runner.errors import ReplayDivergence  # noqa: E402
from runner.runtime.replay import rawserve  # noqa: E402
from runner.sdk import rawio  # noqa: E402
from runner.trace.format import failure_signature  # noqa: E402
from runner.tracetools.reader import load_trace  # noqa: E402


@sdk.tool("t.fetch", effect=sdk.Effect.READ)
def _fetch(url: str) -> dict:
    response = sdk.http_get(url)
    return {"status": response.status, "data": response.json() if response.body else None}


@sdk.tool("t.fail", effect=sdk.Effect.PURE)
def _fail(key: str) -> int:
    return {"a": 1}[key]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_sdk_record_writes_the_five_fields_gzip_decoded_and_empty_bodies(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    readings = iter([100.0, 101.5, 103.0, 104.0, 105.0])
    with (
        loopback_server() as server,
        pytest.raises(KeyError),
        sdk.record(trace, task_id="t-1", task_input={"q": 1}, clock=lambda: next(readings)) as rec,
    ):
        assert _fetch(url=f"{server.url}/tickets/T-7") == {
            "status": 200,
            "data": {"subject": "refund for a double charge", "customer": "C-404"},
        }
        assert _fetch(url=f"{server.url}/empty") == {"status": 200, "data": None}
        parsed = rec.model(
            {"messages": [{"role": "user", "content": "hi"}]},
            b'{"model":"gpt-x-2025-01-01","choices":[],"usage":'
            b'{"prompt_tokens":7,"completion_tokens":2}}',
        )
        assert parsed["model"] == "gpt-x-2025-01-01"
        _fail(key="zz")
    run, gz, empty, model, failed, end = _lines(trace)
    assert (run["purpose"], run["task_id"], run["clock"]["start"]) == ("live", "t-1", 100.0)
    assert set(run["environment"]["tools"]) == {"t.fetch", "t.fail"}
    assert gz["raw_io"] is True and gz["content_encoding"] == "gzip"
    assert json.loads(gz["body"]) == {
        "subject": "refund for a double charge",
        "customer": "C-404",
    }  # the decoded raw HTTP body
    assert json.loads(gz["meta"]["result"])["data"]["customer"] == "C-404"
    assert (empty["body"], empty["raw_io"], "content_encoding" in empty) == ("", True, False)
    assert gz["schema_hash"] == sdk.tool_def(_fetch).schema_hash  # type: ignore[union-attr]
    assert [gz["clock"], empty["clock"], model["clock"], failed["clock"]] == [
        101.5,
        103.0,
        104.0,
        105.0,
    ]
    assert (model["model"], model["model_source"], model["usage"]["prompt_tokens"]) == (
        "gpt-x-2025-01-01",
        "response",
        7,
    )
    assert failed["error"] == {"class": "KeyError", "message": "'zz'"}
    assert end["failure"] == {
        "call_index": 3,
        "tool": "t.fail",
        "error_class": "KeyError",
        "exit_code": 1,
    }
    assert end["failure_signature"] == failure_signature(3, "t.fail", "KeyError", 1)
    assert load_trace(trace).end is not None  # the published format reads it
    from runner.tracetools.lint import lint_trace

    assert lint_trace(trace).complete


def test_sdk_record_of_a_successful_run_and_no_recording_outside_the_block(tmp_path: Path) -> None:
    trace = tmp_path / "ok.jsonl"
    with sdk.record(trace), pytest.raises(KeyError):
        _fail(key="b")  # handled inside: an observation, not the run's failure
    assert _fail(key="a") == 1  # outside: not recorded
    lines = _lines(trace)
    assert len(lines) == 3 and lines[-1]["status"] == "succeeded"
    assert lines[-1]["failure_signature"] is None and lines[1]["error"]["class"] == "KeyError"


def test_the_helper_serves_recorded_bodies_so_the_parsing_runs_again() -> None:
    record = {"index": 0, "raw_io": True}
    exchanges = [
        {
            "method": "GET",
            "url": "http://api/x",
            "status": 200,
            "content_encoding": "gzip",
            "body": b'{"a": 1}',
        },
        {"method": "GET", "url": "http://api/empty", "status": 200, "body": b""},
    ]
    rawio.apply_exchanges(record, exchanges, '{"x":1}')
    assert record["content_encoding"] == "gzip" and record["meta"]["http"][1]["body"] == ""
    with rawserve.served_by_code(record, "t.fetch"):
        first = sdk.http_get("http://api/x")
        second = sdk.http_get("http://api/empty")
        with pytest.raises(ReplayDivergence, match="unrecorded HTTP request #2"):
            sdk.http_get("http://api/x")
    assert (first.json(), first.content_encoding, second.body) == ({"a": 1}, "gzip", b"")
    with (
        rawserve.served_by_code(record, "t.fetch"),
        pytest.raises(ReplayDivergence, match="recording has GET"),
    ):
        sdk.http_get("http://elsewhere/x")


def _fetch_step(tmp_path: Path, recorded: dict[str, Any]) -> Any:
    import importlib

    golden_tools = importlib.import_module("golden_tools")
    definition = sdk.tool_def(golden_tools.fetch_ticket)
    assert definition is not None
    manifest = {
        "policy": {"name": "reproduce", "mode": "reproduce", "hash": "h"},
        "tools": [dict(definition.manifest_entry(), disposition="recorded")],
    }
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [
            {
                "id": "fetch",
                "tool": "ticket.fetch",
                "args": {"api": "${task.api}", "ticket_id": "T-7"},
            }
        ],
    }
    task = {"task_id": "t", "input": {"api": recorded["args"]["api"]}}
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        task,
        manifest,
        mode="reproduce",
        recorded_calls=[recorded],
        modules=("golden_tools",),
        tool_paths=[str(GOLDEN)],
    )
    return run_runtime(run_dir, tmp_path)


def test_reproduce_runs_a_read_tools_code_again_over_its_recorded_http_body(tmp_path: Path) -> None:
    recorded = _lines(GOLDEN / "failing.jsonl")[1]
    assert recorded["tool"] == "ticket.fetch" and recorded["raw_io"] is True
    result = _fetch_step(tmp_path / "same", recorded)
    assert result.episode["status"] == "succeeded", result.stderr
    call = result.calls[0]
    assert (call["source"], call["raw_io"], call["content_encoding"]) == ("trace", True, "gzip")
    assert result.of("divergence") == []
    assert result.episode["output"]["subject"] == "refund for a double charge"
    # another HTTP body under the same request: the tool's own parsing gives another value
    changed = dict(recorded, body=json.dumps({"subject": "other", "customer": "C-1"}))
    result = _fetch_step(tmp_path / "changed", changed)
    assert result.episode["output"]["subject"] == "other"  # parsed from the served body
    kinds = [d["kind"] for d in result.of("divergence")]
    assert kinds == ["raw_io_result"]


def test_record_run_executes_every_tool_and_charges_live(tmp_path: Path) -> None:
    from runner.ledger import Ledger
    from runner.runs.record import record_run
    from runner.settings import Settings

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "m-1", "input": {"label": "x"}}) + "\n")
    settings = Settings(state_dir=tmp_path / "state")
    result = record_run(
        settings,
        GOLDEN / "marker.yaml",
        tasks,
        "m-1",
        output=tmp_path / "out" / "marker.jsonl",
        clock_start=1000.0,
    )
    assert result.status == "succeeded" and result.trace_path == tmp_path / "out" / "marker.jsonl"
    run, mark, seen, _end = _lines(result.trace_path)
    assert (run["purpose"], run["backend"], run["clock"]["start"]) == ("live", "process", 1000.0)
    assert (mark["tool"], mark["source"], mark["body"]) == ("scratch.mark", "executed", '"marked"')
    assert seen["body"] == "true"  # the unsafe code really ran
    # record reads the machine's clock when each call starts, never going back
    assert run["clock"]["step_s"] == 0.0
    assert 1000.0 < mark["clock"] <= seen["clock"] <= time.time()
    with Ledger.for_state_dir(tmp_path / "state") as ledger:
        totals = ledger.totals()
    assert totals["live"].committed.runs == 1 and totals["replay"].committed.runs == 0


def test_a_recording_with_a_workflow_file_is_named_by_its_name_and_version(
    tmp_path: Path,
) -> None:
    """Was: ``adhoc@0`` unless workflow_name/workflow_version were passed (a new user's
    finding); explicit ones still win."""
    workflow = TESTS.parent / "examples" / "helpdesk" / "v1.yaml"
    with sdk.record(tmp_path / "a.jsonl", workflow=str(workflow)):
        pass
    with sdk.record(tmp_path / "b.jsonl", workflow=str(workflow), workflow_version="9"):
        pass
    with sdk.record(tmp_path / "c.jsonl"):
        pass
    names = [_lines(tmp_path / f"{n}.jsonl")[0]["workflow"] for n in "abc"]
    assert [(w["name"], w["version"]) for w in names] == [
        ("helpdesk-triage", "1"),
        ("helpdesk-triage", "9"),
        ("adhoc", "0"),
    ]
