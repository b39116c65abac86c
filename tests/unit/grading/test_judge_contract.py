"""docs/judges.md, the custom-judge contract, against the code and its example (issue 27).

The page's example is examples/judges/contains_judge.py verbatim; the example runs through the
judge registry and the tournament as ``submit`` runs it; the input shape the page shows is what
a judge receives; the errors the page lists make the group ungraded, ``judge_error``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from runner.errors import GradingError
from runner.grading import FunctionJudge, Group, Result, ToolCall, grade, make_judge
from tests.support.paths import REPO

DOC = REPO / "docs" / "judges.md"
EXAMPLE = REPO / "examples" / "judges"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _group(task_id: str = "T-1", repeat: int = 0) -> Group:
    calls = tuple(ToolCall("kb.search", {"query": str(i)}) for i in range(5))
    return Group(
        task_id,
        (
            Result("found", "succeeded", "your refund is on its way", (ToolCall("ticket.get"),)),
            Result("wanders", "succeeded", {"text": "refund"}, calls),
            Result("broke", "failed", None, ()),
            Result("silent", "succeeded", "hello", ()),
        ),
        expected={"output_contains": ["refund"]},
        task_input={"ticket": "T-1: refund"},
        repeat=repeat,
    )


def test_the_documented_example_is_the_example_file() -> None:
    (code,) = _blocks("python")
    assert code == (EXAMPLE / "contains_judge.py").read_text(encoding="utf-8")


def test_the_shape_the_page_shows_is_what_a_judge_receives() -> None:
    (shown,) = [json.loads(block) for block in _blocks("json")]
    given = _group().to_dict()
    assert set(shown) == set(given)
    assert set(shown["results"][0]) == set(given["results"][0])
    assert set(shown["results"][0]["tool_calls"][0]) == {"tool", "args"}


def test_the_example_judge_scores_a_group_through_the_registry_and_the_tournament() -> None:
    judge = make_judge("contains_judge:judge", search_paths=[EXAMPLE])
    ranking = judge(_group())
    # found: 1 string found; wanders: found, minus 2 calls past three (0.5); broke: failed;
    # silent: nothing found
    assert ranking.scores == {"found": 1.0, "wanders": 0.5, "broke": 0.0, "silent": 0.0}
    assert ranking.ranks == {"found": 1, "wanders": 2, "broke": 3, "silent": 3}
    report = grade([_group("T-1"), _group("T-2")], judge, seed=7, resamples=50)
    assert report.ungraded == ()
    assert report.standings[0].variant == "found"
    orders = [r.detail["order"] for r in report.tasks]
    assert all(sorted(o) == sorted(_group().variants) for o in orders)  # shown shuffled


def _function_judge(answer: Any) -> FunctionJudge:
    """A `FunctionJudge` whose function answers ``answer`` (raises it, for an exception)."""

    def judge(group: dict[str, Any]) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    made = FunctionJudge.__new__(FunctionJudge)  # built as make_judge would, without an import
    made.name, made._func = "test:judge", judge
    return made


@pytest.mark.parametrize(
    "answer",
    [
        RuntimeError("boom"),
        {"scores": {"found": 1}},  # not every variant
        {"scores": {}, "ranks": {}},  # two keys
        {"score": [1, 2, 3, 4]},  # another key
        {"scores": [1, 2, 3]},  # a list not aligned with results
        {"scores": {"found": True, "wanders": 1, "broke": 1, "silent": 1}},  # a bool
        {"ranks": {"found": 0, "wanders": 1, "broke": 2, "silent": 3}},  # a rank below 1
        {"ranks": {"found": 1.5, "wanders": 1, "broke": 2, "silent": 3}},  # not whole
    ],
)
def test_a_failing_judge_leaves_its_group_ungraded_as_the_page_says(answer: Any) -> None:
    judge = _function_judge(answer)
    with pytest.raises(GradingError):
        judge(_group())
    report = grade([_group()], judge, seed=1, resamples=10)
    assert [u["reason"] for u in report.ungraded] == ["judge_error"]


def test_ranks_and_aligned_lists_are_accepted_as_the_page_says() -> None:
    judge = _function_judge({"ranks": {"found": 2, "wanders": 7, "broke": 7, "silent": 9}})
    assert judge(_group()).ranks == {"found": 1, "wanders": 2, "broke": 2, "silent": 4}
    judge = _function_judge({"scores": [3, 2, 1, 0]})  # aligned with results as given
    assert judge(_group()).scores == {"found": 3.0, "wanders": 2.0, "broke": 1.0, "silent": 0.0}


def test_a_judge_that_does_not_import_is_invalid_input() -> None:
    from runner.errors import InputError

    with pytest.raises(InputError, match="judge"):
        make_judge("no_such_judge_module:judge", search_paths=[EXAMPLE])
