"""Trace writer: line shapes, reversible storage of bytes and lone surrogates, body rules."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from pathlib import Path

import pytest
import structlog

from runner.trace.format import MAX_BODY_BYTES, decode_body
from runner.trace.writer import TraceWriter, dumps_line, jsonable, normalise_body


def _header(writer: TraceWriter) -> None:
    writer.header(
        run_id="r1",
        task_id="t1",
        task_input={"q": "\udcff\ud800x"},
        workflow={"name": "w", "version": "1", "hash": "h", "content": "a: b\n"},
        purpose="replay",
        backend="docker",
        clock={"start": 0.0, "step_s": 1.0},
        seed=0,
        environment={"python": "3.11"},
    )


def test_lines_and_lone_surrogates_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "r1.jsonl"
    with TraceWriter(path) as writer:
        _header(writer)
        writer.call(
            {
                "index": 0,
                "tool": "a.b",
                "args": {"k": "\udc80"},
                "body": "ok",
                "body_encoding": "text",
            }
        )
        writer.end({"status": "succeeded", "exit_code": 0})
    raw = path.read_bytes()
    assert raw.isascii()
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    assert [x["type"] for x in lines] == ["run", "call", "end"]
    assert all(x["v"] == 1 for x in lines)
    assert lines[0]["task_input"] == {"q": "\udcff\ud800x"}
    assert lines[1]["args"] == {"k": "\udc80"}


def test_body_with_surrogates_becomes_base64_of_exact_bytes() -> None:
    original = b"\xff\xfeabc\x80"
    as_text = original.decode("utf-8", "surrogateescape")
    record = normalise_body({"body": as_text, "body_encoding": "text"})
    assert record["body_encoding"] == "base64"
    assert decode_body(record) == original


def test_large_body_is_truncated_with_length_and_hash() -> None:
    body = "é" * MAX_BODY_BYTES
    record = normalise_body({"body": body, "body_encoding": "text"})
    data = body.encode()
    assert record["truncated"] is True and record["original_length"] == len(data)
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(record["body"].encode()) <= MAX_BODY_BYTES


def test_runtime_truncation_is_kept() -> None:
    record = normalise_body(
        {
            "body": "abc",
            "body_encoding": "text",
            "truncated": True,
            "original_length": 10**9,
            "sha256": "f" * 64,
        }
    )
    assert record["original_length"] == 10**9 and record["sha256"] == "f" * 64


def test_non_string_body_and_base64_pass_through() -> None:
    assert normalise_body({"body": {"a": 1}})["body"] == '{"a": 1}'
    rec = {"body": base64.b64encode(b"\x00").decode(), "body_encoding": "base64"}
    assert normalise_body(dict(rec)) == rec


def test_jsonable_never_raises() -> None:
    value = {
        1: b"\x00\xff",
        "n": float("nan"),
        "i": float("-inf"),
        "s": {3},
        "o": object(),
        "t": (1, "\ud800"),
    }
    out = json.loads(dumps_line(value))
    assert out["1"] == {"$bytes": "AP8="}
    assert out["n"] == "NaN" and out["i"] == "-Infinity" and out["s"] == [3]
    assert out["o"].startswith("<object") and out["t"] == [1, "\ud800"]
    deep: list = []
    for _ in range(500):
        deep = [deep]
    assert "nested too deep" in dumps_line({"d": deep})
    assert jsonable("x") == "x"


def test_header_once_and_exclusive_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        _header(writer)
        with pytest.raises(RuntimeError):
            _header(writer)
    with pytest.raises(FileExistsError), TraceWriter(path):
        pass


def test_logger_survives_surrogates_and_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    from runner.cli.log import configure_logging

    try:
        for fmt in ("json", "console"):
            configure_logging(fmt, logging.INFO)  # type: ignore[arg-type]
            structlog.get_logger("t").info("payload_seen", text="\udcff\ud800", raw=b"\xff")
    finally:
        structlog.reset_defaults()
    err = capsys.readouterr().err
    assert err.count("payload_seen") == 2
