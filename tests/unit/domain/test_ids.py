"""Id rules (SPEC.md): no . or .., no separators, case-insensitive collisions rejected."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runner.domain.ids import (
    IdSet,
    id_problem,
    new_run_id,
    sequential_ids,
    timestamped_ids,
    validate_id,
)
from runner.errors import InputError


@pytest.mark.parametrize("good", ["t1", "T-1_x", "ticket 42", "日本", "a.b", "run-0001"])
def test_valid_ids(good: str) -> None:
    assert validate_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        ".",
        "..",
        "",
        "a/b",
        "a\\b",
        "../etc",
        "c:x",
        "a\x00b",
        "a\nb",
        " lead",
        "trail.",
        "x" * 129,
        5,
        None,
        "a*b",
        "a\u202eb",
    ],
)
def test_invalid_ids(bad: object) -> None:
    assert id_problem(bad) is not None
    with pytest.raises(InputError) as info:
        validate_id(bad, kind="task id", file="tasks.jsonl", line=3, field="task_id")
    assert str(info.value).startswith("tasks.jsonl:3: task_id: invalid task id")


def test_case_insensitive_collision_names_both() -> None:
    ids = IdSet("task id")
    ids.add("Ticket-1", "line 1")
    with pytest.raises(
        InputError, match=r"'ticket-1' collides with 'Ticket-1' \(first at line 1\)"
    ):
        ids.add("ticket-1", "line 2")
    with pytest.raises(InputError, match="duplicate task id 'Ticket-1'"):
        ids.add("Ticket-1")
    assert "TICKET-1" in ids and len(ids) == 1


def test_sequential_ids_are_deterministic() -> None:
    first = sequential_ids("run")
    second = sequential_ids("run")
    assert [first(), first()] == ["run-0001", "run-0002"]
    assert second() == "run-0001"


def test_timestamped_ids_with_injected_sources() -> None:
    factory = timestamped_ids(lambda: datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC), lambda: "abc123")
    assert new_run_id(factory) == "run-20261130T010203Z-abc123"


def test_factory_output_is_validated() -> None:
    with pytest.raises(InputError, match="invalid run id"):
        new_run_id(lambda: "../escape")
