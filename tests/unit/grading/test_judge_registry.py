"""One judge registry: ``--judge`` parsed once, each kind built by its entry of `JUDGES`."""

from __future__ import annotations

from typing import get_args

import pytest

from runner.errors import InputError
from runner.grading import JUDGES, JudgeSpec, parse_judge, rubric_judge
from runner.grading.judges import JudgeKind

PRICES = {"m-1": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0}}


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("rubric", JudgeSpec("rubric")),
        ("model:gpt-4.1-mini", JudgeSpec("model", "gpt-4.1-mini")),
        ("model:org/name:tag", JudgeSpec("model", "org/name:tag")),
        ("my_judges:by_length", JudgeSpec("function", "my_judges:by_length")),
        ("pkg.mod:obj.method", JudgeSpec("function", "pkg.mod:obj.method")),
    ],
)
def test_each_value_parses_to_its_kind_and_says_itself_again(text: str, spec: JudgeSpec) -> None:
    assert parse_judge(text) == spec
    assert str(spec) == text
    assert spec.asks_a_model == (spec.kind == "model")


@pytest.mark.parametrize("text", ["", "lottery", "model:", ":f", "mod:", "Rubric"])
def test_anything_else_is_invalid_input_naming_the_judge(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_judge(text)
    assert info.value.fields["field"] == "judge" and info.value.exit_code == 2


def test_the_registry_builds_every_kind() -> None:
    assert set(JUDGES) == set(get_args(JudgeKind))
    assert JUDGES["rubric"](JudgeSpec("rubric"), None) is rubric_judge  # type: ignore[arg-type]


def test_the_model_judges_provider_comes_from_the_provider_factory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``model:NAME`` is no longer an OpenAI client built by hand in the report."""
    from runner.submit import report as report_module

    asked: list[object] = []

    class Built:
        def complete(self, request: object, role: str) -> object:
            raise AssertionError("not called: no group is graded")

    def provider_for(spec: object, **kwargs: object) -> Built:
        asked.append((spec, kwargs.get("settings")))
        return Built()

    monkeypatch.setattr(report_module, "provider_for", provider_for)
    plan = type(
        "P",
        (),
        {"judge": "model:m-1", "job_id": "j", "tasks": (), "variants": (), "repeats": 1,
         "seed": 1, "policy": type("Pol", (), {"prices": PRICES})},
    )  # fmt: skip
    settings = object()
    ledger = type("L", (), {"runs": lambda self, job_id: []})()
    report_module.grade_job(plan, ledger, object(), settings, cwd=None)  # type: ignore[arg-type]
    assert asked == [({"provider": "openai", "name": "m-1"}, settings)]
