"""``lint``: per call and per trace, which of the five seed fields are missing or malformed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.trace.format import encode_body, failure_signature
from runner.tracetools.lint import (
    TraceLint,
    lint_trace,
    lint_traces,
    model_id_problem,
)
from tests.support.paths import TESTS

TRACES = TESTS / "fixtures" / "traces"


def lines_of(name: str) -> list[dict[str, Any]]:
    text = (TRACES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def write(tmp_path: Path, lines: list[dict[str, Any]], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def statuses(result: TraceLint, index: int) -> dict[str, str]:
    call = next(c for c in result.calls if c.index == index)
    return {name: check.status for name, check in call.fields.items()}


# --- the golden traces ---------------------------------------------------------------------


def test_complete_trace_is_complete() -> None:
    result = lint_trace(TRACES / "complete_succeeded.jsonl")
    assert result.exit_code == 0 and result.complete and result.errors == ()
    assert statuses(result, 0) == {
        "body": "ok",
        "schema_hash": "ok",
        "model_id": "not_applicable",
        "clock": "ok",
    }
    assert statuses(result, 1) == {
        "body": "ok",
        "schema_hash": "not_applicable",
        "model_id": "ok",
        "clock": "ok",
    }
    assert result.failure_signature.status == "not_applicable"
    assert [(c.kind, c.raw_io) for c in result.calls] == [
        ("tool", False),
        ("model", True),
        ("tool", False),
    ]


def test_failed_trace_with_correct_signature_is_complete() -> None:
    result = lint_trace(TRACES / "failed_signature.jsonl")
    assert result.failure_signature.status == "ok", result.failure_signature.detail
    assert result.exit_code == 0
    # the recovered error (call 1) and the failing call (3) have no body: the error is it
    assert statuses(result, 1)["body"] == statuses(result, 3)["body"] == "ok"


def test_missing_fields_trace_names_each_missing_field() -> None:
    result = lint_trace(TRACES / "missing_fields.jsonl")
    assert result.exit_code == 1 and not result.complete and result.errors == ()
    assert statuses(result, 0)["schema_hash"] == "missing"
    assert statuses(result, 1)["model_id"] == "missing"
    assert "configuration" in result.calls[1].fields["model_id"].detail
    assert statuses(result, 2)["clock"] == "missing"
    assert statuses(result, 3)["body"] == "missing"
    assert statuses(result, 4)["body"] == "malformed"
    assert "original_length" in result.calls[4].fields["body"].detail
    assert result.failure_signature.status == "missing"
    summary = result.summary()
    assert summary["fields"]["body"] == {"missing": 1, "malformed": 1}
    assert summary["incomplete_calls"] == 5 and summary["raw_io"] == 1


def test_bodies_trace_base64_and_recorded_truncation_are_ok() -> None:
    result = lint_trace(TRACES / "bodies.jsonl")
    assert result.exit_code == 0
    raw, cut = result.calls
    assert raw.raw_io and raw.fields["body"].status == "ok"
    assert cut.truncated and not cut.raw_io and cut.fields["body"].status == "ok"
    assert "100 of 300 bytes" in cut.fields["body"].detail


def test_unknown_version_is_unreadable_with_line_and_field() -> None:
    result = lint_trace(TRACES / "unknown_version.jsonl")
    assert result.exit_code == 2 and result.calls == ()
    (error,) = result.errors
    assert (error.line, error.field) == (1, "v")
    assert error.message.startswith("trace format version 2 is not supported")


def test_truncated_last_line_is_reported_and_the_rest_is_linted() -> None:
    result = lint_trace(TRACES / "truncated_last_line.jsonl")
    assert result.exit_code == 2
    assert [e.line for e in result.errors] == [3, 3]
    assert "cut off" in result.errors[0].message
    assert len(result.calls) == 1 and result.calls[0].complete


# --- body ----------------------------------------------------------------------------------


def lint_with_call(tmp_path: Path, index: int, **change: Any) -> TraceLint:
    lines = lines_of("complete_succeeded.jsonl")
    lines[index + 1].update(change)
    for key in [k for k, v in change.items() if v is _DROP]:
        del lines[index + 1][key]
    return lint_trace(write(tmp_path, lines))


_DROP = object()


@pytest.mark.parametrize(
    ("change", "status", "detail"),
    [
        ({"body_encoding": "base64", "body": "not base64!"}, "malformed", "base64"),
        ({"body_encoding": _DROP}, "malformed", "body_encoding missing"),
        ({"truncated": True}, "malformed", "without original_length"),
        ({"truncated": True, "original_length": 3, "sha256": "a" * 64}, "malformed", "not longer"),
        ({"truncated": True, "original_length": 10**6, "sha256": "xyz"}, "malformed", "64 hex"),
        ({"sha256": "a" * 64}, "malformed", "without truncated"),
        ({"body": None}, "missing", "no response body"),
        ({"body": _DROP, "error": {"class": "KeyError", "message": "x"}}, "ok", "error"),
    ],
)
def test_body_rules(tmp_path: Path, change: dict[str, Any], status: str, detail: str) -> None:
    result = lint_with_call(tmp_path, 0, **change)
    check = result.calls[0].fields["body"]
    assert (check.status, detail in check.detail) == (status, True), check
    assert result.exit_code == (0 if status == "ok" else 1)


def test_model_body_that_is_not_raw_is_flagged_but_a_tool_level_tool_body_is_not(
    tmp_path: Path,
) -> None:
    result = lint_with_call(tmp_path, 1, raw_io=False)
    assert result.calls[1].fields["body"].status == "missing"
    assert "not the provider's HTTP body" in result.calls[1].fields["body"].detail
    assert not result.calls[0].raw_io and result.calls[0].fields["body"].status == "ok"


def test_raw_io_default_is_true_for_model_calls_and_false_for_tools(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    for line in lines[1:4]:
        del line["raw_io"]
    result = lint_trace(write(tmp_path, lines))
    assert [c.raw_io for c in result.calls] == [False, True, False]


# --- schema hash, model id, clock ----------------------------------------------------------


def test_schema_hash_rules(tmp_path: Path) -> None:
    assert (
        lint_with_call(tmp_path, 0, schema_hash="abc").calls[0].fields["schema_hash"].status
        == "malformed"
    )
    other = lint_with_call(tmp_path, 0, schema_hash="0" * 64).calls[0].fields["schema_hash"]
    assert other.status == "malformed" and "environment.tools" in other.detail
    assert (
        lint_with_call(tmp_path, 0, schema_hash=None).calls[0].fields["schema_hash"].status
        == "missing"
    )


@pytest.mark.parametrize(
    "model_id",
    [
        "gpt-4.1-2025-04-14",
        "gpt-4-0613",
        "gpt-3.5-turbo-1106",
        "claude-3-5-sonnet-20241022",
        "gemini-1.5-pro-002",
        "text-davinci-003",
        "mistral-large-2407",
        "helpdesk-script-v1",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "publishers/google/gemini@001",
    ],
)
def test_pinned_model_ids_pass(model_id: str) -> None:
    assert model_id_problem(model_id) is None


@pytest.mark.parametrize(
    "model_id",
    [
        "gpt-4.1",
        "gpt-4o",
        "gpt-4o-mini",
        "o3-mini",
        "claude-3-5-sonnet-latest",
        "chatgpt-4o-latest",
        "mistral-large-latest",
        "my-deployment",
        " ",
    ],
)
def test_alias_model_ids_are_flagged(model_id: str) -> None:
    assert model_id_problem(model_id) is not None


def test_model_source_config_is_flagged_even_for_a_pinned_id() -> None:
    assert "configuration" in (model_id_problem("gpt-4.1-2025-04-14", "config") or "")


def test_model_id_missing_and_failed_model_call(tmp_path: Path) -> None:
    assert lint_with_call(tmp_path, 1, model=None).calls[1].fields["model_id"].status == "missing"
    failed = lint_with_call(
        tmp_path, 1, model=None, body=None, error={"class": "openai.APIError", "message": "502"}
    )
    assert failed.calls[1].fields["model_id"].status == "not_applicable"


def test_clock_rules(tmp_path: Path) -> None:
    early = lint_with_call(tmp_path, 0, clock=5.0).calls[0].fields["clock"]
    assert early.status == "malformed" and "before the run's clock start" in early.detail
    assert lint_with_call(tmp_path, 0, clock=_DROP).calls[0].fields["clock"].status == "missing"


# --- failure signature ---------------------------------------------------------------------


def lint_end(tmp_path: Path, base: str = "failed_signature.jsonl", **change: Any) -> TraceLint:
    lines = lines_of(base)
    lines[-1].update(change)
    return lint_trace(write(tmp_path, lines))


def signed(call_index: int, tool: str, error_class: str, exit_code: int) -> dict[str, Any]:
    return {
        "failure": {
            "call_index": call_index,
            "tool": tool,
            "error_class": error_class,
            "exit_code": exit_code,
        },
        "failure_signature": failure_signature(call_index, tool, error_class, exit_code),
    }


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"failure_signature": "f" * 64}, "does not match"),
        ({"failure_signature": "nope"}, "not a sha256"),
        ({"failure": None}, "without the failure fields"),
        (signed(3, "ticket.close", "helpdesk_tools.TicketLocked", 124), "not 1"),
        (signed(2, "ticket.close", "helpdesk_tools.TicketLocked", 1), "is not call 2's tool"),
        (signed(3, "ticket.close", "KeyError", 1), "error class"),
        (signed(9, "ticket.close", "KeyError", 1), "names no call"),
        (signed(1, "workflow", "task_failed", 1), "last call index 3"),
    ],
)
def test_signature_malformed(tmp_path: Path, change: dict[str, Any], detail: str) -> None:
    check = lint_end(tmp_path, **change).failure_signature
    assert check.status == "malformed" and detail in check.detail, check


def test_signature_of_a_workflow_level_failure_and_a_timeout(tmp_path: Path) -> None:
    verdict = lint_end(tmp_path, **signed(3, "workflow", "task_failed", 1))
    assert verdict.failure_signature.status == "ok" and verdict.exit_code == 0
    timeout = lint_end(tmp_path, status="timeout", **signed(3, "workflow", "Timeout", 124))
    assert timeout.failure_signature.status == "ok"


def test_succeeded_episode_must_not_carry_a_signature(tmp_path: Path) -> None:
    result = lint_end(
        tmp_path, "complete_succeeded.jsonl", **signed(2, "ticket.close", "KeyError", 0)
    )
    assert result.failure_signature.status == "malformed" and result.exit_code == 1


def test_a_removed_call_line_makes_the_trace_incomplete(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    del lines[2]
    result = lint_trace(write(tmp_path, lines))
    assert result.missing_indices == (1,) and result.exit_code == 1
    assert all(c.complete for c in result.calls)


# --- several traces, folders, the command --------------------------------------------------


def test_worst_exit_code_wins_across_traces(tmp_path: Path) -> None:
    _, code = lint_traces([TRACES / "complete_succeeded.jsonl", TRACES / "missing_fields.jsonl"])
    assert code == 1
    _, code = lint_traces([TRACES / "missing_fields.jsonl", TRACES / "unknown_version.jsonl"])
    assert code == 2
    results, code = lint_traces([TRACES])
    assert code == 2 and len(results) == 6
    empty = tmp_path / "empty"
    empty.mkdir()
    results, code = lint_traces([empty])
    assert code == 2 and "no *.jsonl" in results[0].errors[0].message


def _cli(*args: str) -> Any:
    from runner.cli.app import app

    return CliRunner().invoke(app, list(args))


def test_cli_json_output_and_exit_codes() -> None:
    out = _cli(
        "lint",
        "--json",
        str(TRACES / "complete_succeeded.jsonl"),
        str(TRACES / "missing_fields.jsonl"),
    )
    assert out.exit_code == 1, out.output
    report = json.loads(out.stdout)
    assert report["exit_code"] == 1
    complete, missing = report["traces"]
    assert complete["complete"] and not missing["complete"]
    assert missing["calls"][0]["fields"]["schema_hash"]["status"] == "missing"
    assert missing["calls"][1]["kind"] == "model" and missing["calls"][1]["raw_io"] is True
    assert missing["failure_signature"]["status"] == "missing"


def test_cli_table_output() -> None:
    out = _cli("lint", str(TRACES / "missing_fields.jsonl"), str(TRACES / "bodies.jsonl"))
    assert out.exit_code == 1
    assert "incomplete" in out.stdout and "complete" in out.stdout
    assert "schema_hash" in out.stdout and "no clock reading" in out.stdout
    unreadable = _cli("lint", str(TRACES / "truncated_last_line.jsonl"))
    assert unreadable.exit_code == 2 and "cut off" in unreadable.stdout


def test_cli_binary_body_trace_round_trip(tmp_path: Path) -> None:
    lines = lines_of("complete_succeeded.jsonl")
    lines[1].update(encode_body(b"\x00\xff\x10binary"), raw_io=True)
    out = _cli("lint", "--json", str(write(tmp_path, lines)))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["traces"][0]["calls"][0]["raw_io"] is True
