"""Raw I/O call records (``meta.http``, ``meta.result``): documented, and the schema accepts them.

The records come from the writer itself (`runner.sdk.rawio.apply_exchanges`, used by the
runtime and by record mode), from the golden recorded trace, and from the example in
docs/trace-format.md; each must validate against docs/trace.schema.json and the reader.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from runner.sdk.rawio import apply_exchanges, is_raw, result_text
from runner.tracetools.reader import validate_record
from tests.support.paths import REPO

ROOT = REPO
SCHEMA = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
DOC = (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8")


def _errors(line: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(line)]


def _written_record() -> dict[str, Any]:
    record: dict[str, Any] = {
        "v": 1,
        "type": "call",
        "index": 2,
        "step_id": "fetch",
        "tool": "ticket.fetch",
        "effect": "read",
        "args": {"ticket_id": "T-7"},
        "schema_hash": "0" * 64,
        "clock": 1767225601.0,
        "source": "executed",
        "raw_io": False,
        "body": "stale",
        "body_encoding": "text",
    }
    exchanges = [
        {
            "method": "GET",
            "url": "http://127.0.0.1:9/tickets/T-7",
            "status": 200,
            "content_type": "application/json",
            "content_encoding": "gzip",
            "body": b'{"id": "T-7"}',
        },
        {
            "method": "POST",
            "url": "http://127.0.0.1:9/blob",
            "status": 500,
            "content_type": None,
            "body": b"\xff\x00binary",
        },
    ]
    apply_exchanges(record, exchanges, '{"id":"T-7"}')
    return record


def test_a_record_the_writer_makes_validates() -> None:
    record = _written_record()
    assert is_raw(record) and result_text(record) == '{"id":"T-7"}'
    assert record["content_encoding"] == "gzip" and record["body"] == '{"id": "T-7"}'
    second = record["meta"]["http"][1]
    assert second["body_encoding"] == "base64" and "content_type" not in second
    assert _errors(record) == []
    validate_record(record)


def test_the_golden_recorded_raw_io_calls_validate() -> None:
    path = ROOT / "tests" / "fixtures" / "golden" / "failing.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    raw = [x for x in lines if x["type"] == "call" and "http" in (x.get("meta") or {})]
    assert raw, "the golden trace has raw I/O calls"
    for line in raw:
        assert _errors(line) == [] and "result" in line["meta"]
        validate_record(line)


def test_the_documented_example_validates() -> None:
    section = DOC.split("## Raw I/O calls: `meta.http` and `meta.result`", 1)[1]
    example = re.search(r"```json\n(.*?)```", section, re.S)
    assert example is not None
    line = json.loads(example.group(1))
    assert _errors(line) == [] and is_raw(line)
    validate_record(line)
    assert len(line["meta"]["http"]) == 2 and "body" in line["meta"]["http"][1]


@pytest.mark.parametrize(
    ("meta", "where"),
    [
        ({"http": []}, "empty request list"),
        ({"http": [{"method": "GET", "url": "u", "status": "200"}]}, "status as text"),
        ({"http": [{"body_encoding": "hex"}]}, "unknown body encoding"),
        ({"http": ["GET u"]}, "entry not an object"),
        ({"result": {"id": 1}}, "result not JSON text"),
    ],
)
def test_the_schema_says_what_the_two_keys_hold(meta: dict[str, Any], where: str) -> None:
    record = {**_written_record(), "meta": meta}
    assert _errors(record), where


def test_other_meta_keys_stay_free() -> None:
    record = {**_written_record(), "meta": {"source_id": 7, "reward": 0.5}}
    assert _errors(record) == []
