"""Every writer redacts: the host's TraceWriter, runner.sdk.record, a policy's rules,
and what readers and lint make of the redactions (no Docker: tests/integration/test_redaction.py
has the record, packet and import acceptance in real containers)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner import sdk
from runner.errors import InputError
from runner.policy import load_policy
from runner.trace.format import MAX_BODY_BYTES
from runner.trace.redact import Redactor
from runner.trace.writer import TraceWriter
from runner.tracetools.lint import lint_trace
from runner.tracetools.reader import validate_record
from tests.support.paths import REPO
from tests.support.secrets_search import AWS_KEY_ID, OPENAI_KEY, SSN, SSN_RULE, found_in

RULES = {"patterns": [SSN_RULE]}
SCHEMA = Draft202012Validator(
    json.loads((REPO / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
)


@sdk.tool("vault.peek", effect=sdk.Effect.READ)
def _peek(account: str) -> dict:
    return {"owner": "Ana", "api_key": OPENAI_KEY, "aws": AWS_KEY_ID, "ssn": SSN}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _header(trace: TraceWriter, **extra: Any) -> None:
    trace.header(
        run_id="r-1",
        task_id="t-1",
        task_input={"note": f"key {OPENAI_KEY}"},
        workflow={"name": "w", "version": "1", "hash": "0" * 64, "content": ""},
        purpose="live",
        backend="process",
        clock={"start": 1.0, "step_s": 0.0},
        seed=0,
        environment={"tools": {}},
        **extra,
    )


def test_the_trace_writer_redacts_every_line_before_writing_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, redactor=Redactor(RULES)) as trace:
        _header(trace)
        trace.call({"index": 0, "tool": "vault.peek", "args": {}, "body": json.dumps(_peek("A"))})
        trace.call(
            {
                "index": 1,
                "tool": "raw.get",
                "args": {},
                "raw_io": True,
                "body": base64.b64encode(b"\xff" + SSN.encode()).decode(),
                "body_encoding": "base64",
            }
        )
        trace.end(
            {
                "status": "failed",
                "exit_code": 1,
                "error": {"class": "E", "message": f"denied for {AWS_KEY_ID}"},
            }
        )
    data = path.read_bytes()
    assert found_in(data) == []
    lines = _lines(path)
    assert [len(line.get("redactions", [])) for line in lines] == [1, 3, 1, 1]
    key = lines[0]["redactions"][0]["placeholder"]
    assert key in json.loads(lines[1]["body"]).values()  # one placeholder for one secret
    for line in lines:
        validate_record(line, file="t.jsonl", line=1)
        assert list(SCHEMA.iter_errors(line)) == []


def test_a_cut_body_is_redacted_before_the_cut_and_the_cut_is_still_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    body = SSN + " " + "x" * MAX_BODY_BYTES
    with TraceWriter(path, redactor=Redactor(RULES)) as trace:
        _header(trace)
        trace.call({"index": 0, "tool": "big.read", "args": {}, "body": body})
        trace.end({"status": "succeeded", "exit_code": 0})
    call = _lines(path)[1]
    assert call["truncated"] is True and call["redactions"][0]["rule"] == "ssn"
    assert SSN not in call["body"] and call["original_length"] > MAX_BODY_BYTES


def test_sdk_record_redacts_with_rules_from_a_json_file_and_keeps_placeholders_stable(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES), encoding="utf-8")
    trace = tmp_path / "run.jsonl"
    with sdk.record(trace, task_id="t-1", redaction=rules) as rec:
        value = _peek(account="A-1")
        rec.model(
            {"messages": [{"role": "tool", "content": json.dumps(value)}]},
            json.dumps(
                {
                    "model": "m-2025-01-01",
                    "choices": [{"message": {"content": f"the key is {OPENAI_KEY}"}}],
                }
            ).encode(),
        )
    assert found_in(trace.read_bytes()) == []
    lines = _lines(trace)
    tool, model = lines[1], lines[2]
    assert sorted(r["rule"] for r in tool["redactions"]) == ["aws_access_key", "openai", "ssn"]
    placeholders = {r["placeholder"] for r in tool["redactions"]}
    assert {r["placeholder"] for r in model["redactions"]} <= placeholders
    assert json.loads(model["request"]["messages"][0]["content"]) == json.loads(tool["body"])
    result = lint_trace(trace)
    assert result.exit_code in (0, 1) and not result.errors
    assert len(result.redactions) == len(tool["redactions"]) + len(model["redactions"])
    assert found_in(json.dumps(result.to_json()).encode()) == []


def test_sdk_record_refuses_a_bad_rules_document_before_running() -> None:
    with pytest.raises(ValueError, match=r"\[patterns\[0\]\.regex\]"):
        sdk.record("unused.jsonl", redaction={"patterns": [{"name": "x", "regex": "["}]})


def test_a_policy_redaction_section_becomes_the_rules_document(tmp_path: Path) -> None:
    base = (REPO / "policies" / "shadow.yaml").read_text(encoding="utf-8")
    good = tmp_path / "good.yaml"
    good.write_text(
        base + "\nredaction:\n  detectors: [openai]\n  paths: [{name: pin, path: '$..pin'}]\n"
        "  patterns:\n    - {name: ssn, regex: '\\b\\d{3}-\\d{2}-\\d{4}\\b'}\n",
        encoding="utf-8",
    )
    rules = load_policy(good).redaction_rules
    assert rules == {
        "version": 1,
        "detectors": ["openai"],
        "paths": [{"name": "pin", "path": "$..pin"}],
        "patterns": [SSN_RULE],
    }
    assert load_policy("shadow").redaction_rules == {"version": 1}  # the defaults
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "\nredaction:\n  detectors: [nope]\n", encoding="utf-8")
    with pytest.raises(InputError, match="detectors"):
        load_policy(bad)


def test_a_redaction_record_holding_a_value_is_refused_by_reader_and_schema() -> None:
    line = {
        "v": 1,
        "type": "call",
        "index": 0,
        "tool": "a.b",
        "args": {},
        "redactions": [
            {"field": "body", "rule": "ssn", "length": 11, "placeholder": "[REDACTED:ssn:0123abcd]"}
        ],
    }
    validate_record(line, file="t.jsonl", line=2)
    bad = copy.deepcopy(line)
    bad["redactions"][0]["value"] = SSN
    assert list(SCHEMA.iter_errors(bad))
    with pytest.raises(InputError, match="redactions"):
        validate_record(bad, file="t.jsonl", line=2)
