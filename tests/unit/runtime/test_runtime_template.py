"""Templating of workflow values (docs/internals.md, "Normalised workflow")."""

from __future__ import annotations

import pytest

from runner.runtime.template import render
from runner.wire.errors import WorkflowError

TASK = {"id": "T-1", "n": 3, "user": {"name": "Ada", "tags": ["a", "b"]}}
OUTPUTS = {"fetch": {"subject": "refund", "items": [{"sku": "X"}]}, "count": 7, "none": None}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${task.n}", 3),
        ("${task.user}", {"name": "Ada", "tags": ["a", "b"]}),
        ("${task.user.tags.1}", "b"),
        ("${steps.fetch.output.items.0.sku}", "X"),
        ("${steps.none.output}", None),
        ("#${task.id} x${task.n}", "#T-1 x3"),
        ("tags=${task.user.tags} c=${steps.count.output}", 'tags=["a","b"] c=7'),
        ("${env.HOME} and $task.id", "${env.HOME} and $task.id"),
        (
            {"a": ["${task.id}", {"b": "${steps.count.output}"}], "k": 1.5},
            {"a": ["T-1", {"b": 7}], "k": 1.5},
        ),
    ],
)
def test_references_are_replaced(value: object, expected: object) -> None:
    assert render(value, TASK, OUTPUTS) == expected


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("${task.missing}", "no 'missing'"),
        ("${task.user.tags.5}", "no '5'"),
        ("${steps.later.output}", "step 'later' has not run"),
        ("${steps.fetch.result}", "steps.ID.output"),
        ("x ${steps.fetch.output.nope} y", "steps.fetch.output.nope"),
    ],
)
def test_unresolvable_references_name_themselves(value: str, needle: str) -> None:
    with pytest.raises(WorkflowError) as info:
        render(value, TASK, OUTPUTS)
    assert needle in str(info.value)
