"""The strict trace reader: typed records from good traces, precise errors from bad ones."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from runner.errors import EXIT_REFUSED, InputError, ReplayRefused, SandboxReplayError
from runner.trace.format import STATUSES
from runner.tracetools.reader import (
    CallRecord,
    EndRecord,
    RunRecord,
    Trace,
    TraceVersionError,
    load_trace,
    read_trace,
    read_trace_stream,
    validate_record,
)
from tests.support.paths import TESTS

TRACES = TESTS / "fixtures" / "traces"


def lines_of(name: str) -> list[dict[str, Any]]:
    text = (TRACES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def write(tmp_path: Path, lines: list[Any], name: str = "t.jsonl", tail: str = "") -> Path:
    path = tmp_path / name
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text + tail, encoding="utf-8")
    return path


def input_error(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        read_trace(path)
    return info.value


# --- good traces ---------------------------------------------------------------------------


def test_complete_trace_parses_into_typed_records() -> None:
    trace = load_trace(TRACES / "complete_succeeded.jsonl")
    assert isinstance(trace.run, RunRecord)
    assert trace.run.run_id == "run-complete"
    assert trace.run.environment.tools["ticket.get"] == trace.calls[0].schema_hash
    assert [c.tool for c in trace.calls] == ["ticket.get", "model", "ticket.close"]
    assert trace.call_lines == (2, 3, 4)
    assert trace.calls[1].is_provider_call and not trace.calls[0].is_provider_call
    assert trace.calls[1].model == "gpt-4.1-2025-04-14"
    assert isinstance(trace.end, EndRecord) and trace.end.status == "succeeded"
    assert trace.end_line == 5 and trace.problems == () and trace.missing_indices == ()


def test_records_are_frozen() -> None:
    trace = load_trace(TRACES / "complete_succeeded.jsonl")
    with pytest.raises(ValueError, match="frozen"):
        trace.calls[0].body = "changed"  # type: ignore[misc]


def test_call_records_round_trip_to_the_json_they_were_read_from() -> None:
    trace = load_trace(TRACES / "failed_signature.jsonl")
    originals = lines_of("failed_signature.jsonl")
    assert [c.to_json() for c in trace.calls] == originals[1:-1]
    assert trace.run.to_json() == originals[0]
    assert trace.calls[3].error is not None
    assert trace.calls[3].error.class_ == "helpdesk_tools.TicketLocked"


def test_stream_reader_and_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    data = (TRACES / "complete_succeeded.jsonl").read_bytes()
    crlf = data.replace(b"\n", b"\r\n").rstrip(b"\r\n")  # no newline after the end line
    trace = read_trace_stream(io.BytesIO(crlf), file="packet/trace.jsonl")
    assert trace.problems == () and len(trace.calls) == 3 and trace.end is not None


def test_explicit_null_optional_fields_are_accepted(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[1].update(effect=None, raw_io=None, source=None, meta=None)
    trace = load_trace(write(tmp_path, lines))
    assert trace.calls[0].effect is None and trace.calls[0].raw_io is None


def test_large_payload_under_the_limit_parses(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[1]["body"] = "é" * 3_000_000  # 6 MB of UTF-8
    trace = load_trace(write(tmp_path, lines))
    assert len(trace.calls[0].body or "") == 3_000_000


# --- version -------------------------------------------------------------------------------


def test_unknown_version_is_refused_with_file_line_field() -> None:
    with pytest.raises(TraceVersionError) as info:
        read_trace(TRACES / "unknown_version.jsonl")
    err = info.value
    assert isinstance(err, ReplayRefused) and err.exit_code == EXIT_REFUSED
    assert err.version == 2
    assert err.fields == {"file": str(TRACES / "unknown_version.jsonl"), "line": 1, "field": "v"}
    assert "version 2 is not supported" in str(err) and ":1: v:" in str(err)


def test_unknown_version_on_a_later_line_is_refused_too(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[2]["v"] = 3
    with pytest.raises(TraceVersionError) as info:
        read_trace(write(tmp_path, lines))
    assert info.value.fields["line"] == 3


@pytest.mark.parametrize("bad", ["1", True, 1.5, None])
def test_a_version_that_is_not_an_integer_is_an_input_error(tmp_path: Path, bad: Any) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[0]["v"] = bad
    err = input_error(write(tmp_path, lines))
    assert err.fields["line"] == 1 and err.fields["field"] == "v"


def test_a_missing_version_is_an_input_error(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    del lines[1]["v"]
    err = input_error(write(tmp_path, lines))
    assert (err.fields["line"], err.fields["field"]) == (2, "v")


# --- truncation and missing lines ----------------------------------------------------------


def test_truncated_last_line_is_reported_and_the_rest_parses() -> None:
    path = TRACES / "truncated_last_line.jsonl"
    trace = read_trace(path)
    assert len(trace.calls) == 1 and trace.end is None
    kinds = [p.kind for p in trace.problems]
    assert kinds == ["truncated_line", "missing_end"]
    assert trace.problems[0].line == 3 and "cut off" in trace.problems[0].message
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.fields["line"] == 3 and "cut off" in str(info.value)


def test_invalid_last_line_with_a_newline_is_not_a_truncation(tmp_path: Path) -> None:
    lines: list[Any] = lines_of("complete_succeeded.jsonl")
    lines[-1] = '{"v": 1, "type": "end", "status": '
    err = input_error(write(tmp_path, lines))
    assert err.fields["line"] == 5 and "not valid JSON" in str(err)


def test_missing_end_line_is_a_problem_and_an_error_when_strict(tmp_path: Path) -> None:
    path = write(tmp_path, lines_of("complete_succeeded.jsonl")[:-1])
    trace = read_trace(path)
    assert [p.kind for p in trace.problems] == ["missing_end"] and len(trace.calls) == 3
    with pytest.raises(InputError, match="no end line"):
        load_trace(path)


def test_missing_run_line(tmp_path: Path) -> None:
    err = input_error(write(tmp_path, lines_of("complete_succeeded.jsonl")[1:]))
    assert (err.fields["line"], err.fields["field"]) == (1, "type")
    assert "first line must be the run line" in str(err)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert "no run line" in str(input_error(path))


def test_cut_off_run_line_alone_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(lines_of("complete_succeeded.jsonl")[0])[:40])
    assert input_error(path).fields["line"] == 1


def test_line_after_end_and_second_run_line(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    assert input_error(write(tmp_path, [*lines, lines[1]])).fields["line"] == 6
    err = input_error(write(tmp_path, [lines[0], lines[0], *lines[1:]], name="two.jsonl"))
    assert (err.fields["line"], err.fields["field"]) == (2, "type")


def test_blank_line_is_an_error(tmp_path: Path) -> None:
    lines: list[Any] = lines_of("complete_succeeded.jsonl")
    err = input_error(write(tmp_path, [lines[0], "", *lines[1:]]))
    assert err.fields["line"] == 2 and "empty line" in str(err)


# --- call indices --------------------------------------------------------------------------


@pytest.mark.parametrize(("indices", "rule"), [((0, 0, 1), "duplicates"), ((0, 2, 1), "goes back")])
def test_non_monotonic_call_indices(tmp_path: Path, indices: tuple[int, ...], rule: str) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    for line, index in zip(lines[1:4], indices, strict=True):
        line["index"] = index
    err = input_error(write(tmp_path, lines))
    assert err.fields["field"] == "index" and rule in str(err)
    assert err.fields["line"] == (3 if rule == "duplicates" else 4)


def test_a_gap_in_call_indices_is_readable_and_listed(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    del lines[2]  # call 1 removed
    trace = load_trace(write(tmp_path, lines))
    assert trace.missing_indices == (1,)
    assert trace.call(2) is not None and trace.call(1) is None


# --- malformed lines name file, line and field ---------------------------------------------


@pytest.mark.parametrize(
    ("line_no", "change", "field", "text"),
    [
        (2, {"surprise": 1}, "surprise", "unknown key on a call line"),
        (2, {"type": ["call"]}, "type", "is not one of run, call, end"),
        (1, {"run_id": None}, "run_id", ""),
        (
            1,
            {"workflow": {"name": "w", "version": "1", "hash": "xyz", "content": ""}},
            "workflow.hash",
            "pattern",
        ),
        (1, {"clock": {"start": "yesterday", "step_s": 1}}, "clock.start", ""),
        (1, {"purpose": "fun"}, "purpose", ""),
        (2, {"index": -1}, "index", ""),
        (2, {"index": 1.0}, "index", ""),
        (2, {"clock": "12:00"}, "clock", ""),
        (2, {"body_encoding": "hex"}, "body_encoding", ""),
        (2, {"error": {"class": "KeyError"}}, "error.message", "missing"),
        (2, {"tool": "../../etc/passwd"}, "tool", "pattern"),
        (2, {"request": {}}, "request", "not allowed on a tool call"),
        (3, {"args": {}}, "args", "not allowed on a model or user call"),
        (3, {"schema_hash": "ab"}, "schema_hash", "not allowed"),
        (5, {"status": "exploded"}, "status", ""),
        (5, {"not_run": ["a", 1]}, "not_run[1]", ""),
        (5, {"outbound": [{"port": "80"}]}, "outbound[0].port", ""),
        (
            5,
            {"failure": {"call_index": 0, "tool": "x", "error_class": "E"}},
            "failure.exit_code",
            "missing",
        ),
    ],
)
def test_malformed_fields_are_named(
    tmp_path: Path, line_no: int, change: dict[str, Any], field: str, text: str
) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[line_no - 1].update(change)
    err = input_error(write(tmp_path, lines))
    assert (err.fields["line"], err.fields["field"]) == (line_no, field)
    assert text in str(err)
    assert str(err).startswith(f"{tmp_path / 't.jsonl'}:{line_no}: {field}: ")


@pytest.mark.parametrize(("key", "kind"), [("args", "tool"), ("request", "model")])
def test_role_fields_are_required(tmp_path: Path, key: str, kind: str) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    target = lines[1] if kind == "tool" else lines[2]
    del target[key]
    err = input_error(write(tmp_path, lines))
    assert err.fields["field"] == key


@pytest.mark.parametrize("bad_id", ["..", ".", "../escape", "a/b", "a\\b", "C:x", " lead", "x."])
def test_ids_that_would_escape_a_folder_are_rejected(tmp_path: Path, bad_id: str) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[0]["task_id"] = bad_id
    err = input_error(write(tmp_path, lines))
    assert (err.fields["line"], err.fields["field"]) == (1, "task_id")
    assert "invalid id" in str(err)


def test_duplicate_keys_nan_and_deep_nesting(tmp_path: Path) -> None:
    run = json.dumps(lines_of("complete_succeeded.jsonl")[0])
    dup = run[:-1] + ', "seed": 1}'
    err = input_error(write(tmp_path, [dup]))
    assert err.fields["field"] == "seed" and "duplicate key" in str(err)
    nan = run.replace('"seed": 0', '"seed": NaN')
    assert "NaN" in str(input_error(write(tmp_path, [nan], name="nan.jsonl")))
    deep = run[:-1] + ', "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert input_error(write(tmp_path, [deep], name="deep.jsonl")).fields["line"] == 1


def test_binary_line_is_reported_not_decoded(tmp_path: Path) -> None:
    lines = (TRACES / "complete_succeeded.jsonl").read_bytes().split(b"\n")
    lines[1] = b'{"v": 1, "type": "call", "body": "\xff\xfe\x00"}'
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\n".join(lines))
    err = input_error(path)
    assert err.fields["line"] == 2 and "not UTF-8" in str(err)


def test_a_line_over_the_limit_is_an_error_and_never_read_whole(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[1]["body"] = "x" * 5000
    path = write(tmp_path, lines)
    with pytest.raises(InputError) as info:
        read_trace(path, max_line_bytes=4000)
    assert info.value.fields["line"] == 2 and "longer than 4000 bytes" in str(info.value)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    assert "no such file" in str(input_error(tmp_path / "nope.jsonl"))
    assert input_error(tmp_path).fields["file"] == str(tmp_path)


def test_validate_record_checks_one_line() -> None:
    call = lines_of("complete_succeeded.jsonl")[1]
    assert isinstance(validate_record(call), CallRecord)
    with pytest.raises(InputError, match="index"):
        validate_record({**call, "index": "0"}, file="writer", line=7)


def test_status_literal_matches_traceformat() -> None:
    field = EndRecord.model_fields["status"]
    assert tuple(field.annotation.__args__) == STATUSES  # type: ignore[union-attr]


# --- nothing crashes it --------------------------------------------------------------------


def _outcome(data: bytes) -> Trace | SandboxReplayError:
    try:
        return read_trace_stream(io.BytesIO(data), file="fuzz", max_line_bytes=2000)
    except SandboxReplayError as exc:  # InputError or TraceVersionError: never anything else
        assert "line" in exc.fields or "file" in exc.fields
        return exc


def test_every_cut_of_a_good_trace_reads_or_fails_cleanly() -> None:
    data = (TRACES / "failed_signature.jsonl").read_bytes()
    outcomes = [_outcome(data[:cut]) for cut in range(0, len(data), 5)]
    cut_tail = [o for o in outcomes if isinstance(o, Trace) and o.problems]
    assert cut_tail, "some cuts fall inside a call line and must be truncations"
    assert all(o.problems[0].kind in ("truncated_line", "missing_end") for o in cut_tail)


def test_random_bytes_and_byte_flips_never_crash_the_reader() -> None:
    rng = random.Random(6)
    data = bytearray((TRACES / "bodies.jsonl").read_bytes())
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 5)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        _outcome(bytes(mutated))
        _outcome(bytes(rng.randrange(256) for _ in range(rng.randint(0, 400))))
