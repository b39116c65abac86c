"""Task file loader: SPEC.md "Task file"; bad lines named, others still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.domain.tasks import load_tasks, parse_clock_start
from runner.errors import InputError


def _write(tmp_path: Path, lines: list[object | str]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def test_good_and_bad_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            {
                "task_id": "t1",
                "input": {"q": "hi"},
                "clock_start": "2025-10-27T14:20:00Z",
                "observations": [
                    {"tool": "kb.search", "args": {"q": "x"}, "body": "[]", "body_encoding": "text"}
                ],
                "expected": {"output_contains": "ok", "tool_calls": [{"tool": "kb.search"}]},
            },
            "{not json",
            {"task_id": "../x", "input": {}},
            {"task_id": "t2", "input": {}, "colour": 1},
            "",
            {"task_id": "T1", "input": {}},
            {"task_id": "t3", "input": {}, "observations": [{"tool": "a", "args": [], "body": ""}]},
            {"task_id": "t4", "input": {}, "clock_start": 1761574800},
            {"task_id": "t5", "input": "nope"},
            {"task_id": "t6", "input": {}, "expected": {"tool_calls": [{"tool": "a", "arg": {}}]}},
            {"task_id": "t7", "input": {}, "clock_start": "yesterday"},
        ],
    )
    loaded = load_tasks(path)
    assert list(loaded.tasks) == ["t1", "t4"]
    assert loaded.tasks["t1"].clock_start == 1761574800.0
    assert loaded.tasks["t1"].observations[0]["tool"] == "kb.search"
    assert loaded.tasks["t4"].line == 8
    messages = [str(e) for e in loaded.errors]
    name = str(path)
    assert messages[0].startswith(f"{name}:2: invalid JSON")
    assert messages[1].startswith(f"{name}:3: task_id: invalid task id")
    assert (
        messages[2] == f"{name}:4: colour: unknown key (expected task_id, input, clock_start, "
        "observations, expected, recorded_output)"
    )
    assert messages[3].startswith(f"{name}:6: task_id: task id 'T1' collides with 't1'")
    assert messages[4] == f"{name}:7: observations[0].args: must be an object"
    assert messages[5] == f"{name}:9: input: required, an object"
    assert messages[6] == f"{name}:10: expected.tool_calls[0].arg: unknown key"
    assert messages[7].startswith(f"{name}:11: clock_start: 'yesterday' is not an ISO-8601")
    assert all(e.fields["file"] == name and e.fields["line"] for e in loaded.errors)


def test_get_names_rejected_and_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"task_id": "ok", "input": {}}, {"task_id": "bad", "input": 3}])
    loaded = load_tasks(path)
    assert loaded.get("ok").input == {}
    with pytest.raises(InputError, match=r"task 'bad' is invalid: .*:2: input"):
        loaded.get("bad")
    with pytest.raises(InputError, match=r"no task 'nope' \(valid tasks: ok\)"):
        loaded.get("nope")


def test_unreadable_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read task file"):
        load_tasks(tmp_path / "missing.jsonl")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"task_id":"a","input":{}}\n\xff\xfe\n')
    loaded = load_tasks(path)
    assert list(loaded.tasks) == ["a"]
    assert "2: not UTF-8" in str(loaded.errors[0])


def test_clock_start_forms() -> None:
    assert parse_clock_start(0) == 0.0
    assert parse_clock_start("1970-01-01T00:01:00") == 60.0
    assert parse_clock_start("1970-01-01T01:00:00+01:00") == 0.0
    for bad in (True, float("nan"), [1], "x"):
        with pytest.raises(ValueError):
            parse_clock_start(bad)


def test_record_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"task_id": "a", "input": {"x": [1]}, "clock_start": 5}])
    assert load_tasks(path).get("a").record() == {
        "task_id": "a",
        "input": {"x": [1]},
        "clock_start": 5.0,
        "observations": [],
    }


def test_an_observation_body_without_encoding_is_text_in_the_call_records(tmp_path: Path) -> None:
    """A trace written from these observations must pass every trace reader (lint, packet)."""
    path = _write(
        tmp_path,
        [
            {
                "task_id": "t1",
                "input": {},
                "observations": [
                    {"tool": "kb.get", "args": {}, "body": "x"},
                    {"tool": "kb.get", "args": {"n": 2}, "body": "eA==", "body_encoding": "base64"},
                    {"tool": "kb.get", "args": {"n": 3}, "error": {"class": "E", "message": "m"}},
                ],
            }
        ],
    )
    task = load_tasks(path).get("t1")
    encodings = [obs.get("body_encoding") for obs in task.observations]
    assert encodings == ["text", "base64", None]


def test_a_task_pasted_over_several_lines_is_told_the_file_is_json_lines(tmp_path: Path) -> None:
    """A new user pasted a task as the README shows it, indented over lines: 7 warnings of
    "invalid JSON … Extra data" and no word of the one-task-a-line rule."""
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "oslo-1",\n "input": {"city": "Oslo"}}\n', encoding="utf-8")
    loaded = load_tasks(path)
    assert loaded.tasks == {}
    assert [
        e.message.endswith("(a task file is JSON Lines: one whole task a line)")
        for e in loaded.errors
    ] == [True, True]


def test_output_contains_takes_a_string_or_a_list_of_strings_all_of_which_the_rubric_needs(
    tmp_path: Path,
) -> None:
    from runner.grading.model import Result
    from runner.grading.rubric import reasons, score

    path = _write(
        tmp_path,
        [
            {"task_id": "one", "input": {}, "expected": {"output_contains": "reset"}},
            {"task_id": "all", "input": {}, "expected": {"output_contains": ["reset", "link"]}},
            {"task_id": "empty", "input": {}, "expected": {"output_contains": []}},
            {"task_id": "mixed", "input": {}, "expected": {"output_contains": ["a", 1]}},
            {"task_id": "num", "input": {}, "expected": {"output_contains": 3}},
        ],
    )
    loaded = load_tasks(path)
    assert list(loaded.tasks) == ["one", "all"]
    messages = [str(e) for e in loaded.errors]
    assert messages[0].endswith("expected.output_contains: a list must hold 1 to 1000 strings")
    assert messages[1].endswith("expected.output_contains[1]: must be a string")
    assert messages[2].endswith("expected.output_contains: must be a string or a list of strings")
    expected = loaded.tasks["all"].expected
    assert expected is not None
    both = Result(variant="v", status="succeeded", output="reset it from the link")
    half = Result(variant="v", status="succeeded", output="reset it")
    assert score(both, expected) == 1.0
    assert score(half, expected) == 0.5  # one of the two: not contained in full
    assert reasons(half, expected) == ["output lacks 1/2 expected text(s): 'link'"]
