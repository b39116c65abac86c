"""The gate's three answers: PASS, FAIL, INCONCLUSIVE; A/A never FAILs, a regression does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from runner.errors import EXIT_INCONCLUSIVE, EXIT_NEGATIVE, EXIT_OK, worst_exit_code
from runner.grading import Group, Result, grade, rubric_judge
from runner.grading.gate import FAIL, INCONCLUSIVE, PASS, gate


def _scores(**variants: tuple[float | None, list[float] | None]) -> dict[str, Any]:
    return {
        "variants": [
            {"variant": n, "mean": m, "interval": i, "units": 5, "not_scored": {}, "flaky": []}
            for n, (m, i) in variants.items()
        ]
    }


def _verdict(result: dict[str, Any], name: str) -> str:
    return next(str(v["verdict"]) for v in result["verdicts"] if v["variant"] == name)


def test_the_rule_fail_pass_inconclusive() -> None:
    result = gate(
        _scores(
            base=(0.8, [0.7, 0.9]),
            same=(0.75, [0.6, 0.9]),  # mean inside the baseline's interval
            better=(0.95, [0.9, 1.0]),
            worse=(0.4, [0.3, 0.5]),  # whole interval below 0.7
            borderline=(0.65, [0.5, 0.8]),  # mean below, intervals overlap
            unscored=(None, None),
            one_unit=(0.9, None),
        ),
        "base",
    )
    assert [(v["variant"], v["verdict"]) for v in result["verdicts"]] == [
        ("same", PASS),
        ("better", PASS),
        ("worse", FAIL),
        ("borderline", INCONCLUSIVE),
        ("unscored", INCONCLUSIVE),
        ("one_unit", INCONCLUSIVE),
    ]
    assert result["exit_code"] == EXIT_NEGATIVE  # a FAIL outranks an INCONCLUSIVE
    assert "below the baseline's" in next(
        v["reason"] for v in result["verdicts"] if v["variant"] == "worse"
    )
    assert result["verdicts"][2]["difference"] == pytest.approx(-0.4)


def test_exit_codes_seven_for_inconclusive_zero_for_pass() -> None:
    assert gate(_scores(b=(0.8, [0.7, 0.9]), c=(0.8, [0.7, 0.9])), "b")["exit_code"] == EXIT_OK
    assert (
        gate(_scores(b=(0.8, [0.7, 0.9]), c=(0.6, [0.5, 0.75])), "b")["exit_code"]
        == EXIT_INCONCLUSIVE
    )
    with pytest.raises(ValueError, match="not a variant"):
        gate(_scores(b=(0.8, [0.7, 0.9])), "nope")


def test_inconclusive_sits_between_a_negative_verdict_and_ok() -> None:
    assert worst_exit_code(EXIT_OK, EXIT_INCONCLUSIVE) == EXIT_INCONCLUSIVE
    assert worst_exit_code(EXIT_NEGATIVE, EXIT_INCONCLUSIVE) == EXIT_NEGATIVE
    assert worst_exit_code(4, EXIT_INCONCLUSIVE) == 4


def _coin_job(seed: int, p_base: float, p_candidate: float, *, tasks: int, repeats: int) -> Any:
    """A job whose tool flips a coin: each episode succeeds with its variant's probability.

    ``infra`` episodes (one in 25) end infra_error: out of the denominator, reported.
    """
    rng = random.Random(seed)
    groups = []
    for t in range(tasks):
        for r in range(repeats):
            results, missing = [], {}
            for name, p in (("base", p_base), ("candidate", p_candidate)):
                if rng.random() < 0.04:
                    missing[name] = "infra_error"
                    continue
                heads = rng.random() < p
                results.append(Result(name, "succeeded", "heads" if heads else "tails"))
            groups.append(
                Group(
                    f"t{t}",
                    tuple(results),
                    expected={"output": "heads"},
                    repeat=r,
                    incomplete=missing,
                )
            )
    report = grade(groups, rubric_judge, variants=["base", "candidate"], seed=seed, resamples=50)
    return report.scores


@pytest.mark.parametrize("tasks", [1, 4])
def test_an_a_a_job_never_fails_over_many_seeds(tasks: int) -> None:
    seen = []
    for seed in range(30):
        scores = _coin_job(seed, 0.5, 0.5, tasks=tasks, repeats=5)
        result = gate(scores, "base")
        seen.append(_verdict(result, "candidate"))
        assert result["verdicts"][0]["not_scored"] == scores["variants"][1]["not_scored"]
    assert FAIL not in seen
    assert PASS in seen  # not a gate that can only say "cannot tell"


def test_a_real_regression_fails() -> None:
    for seed in range(10):
        result = gate(_coin_job(seed, 0.95, 0.1, tasks=4, repeats=5), "base")
        assert _verdict(result, "candidate") == FAIL, result


def test_flaky_tasks_are_listed_per_variant() -> None:
    scores = _coin_job(3, 0.5, 1.0, tasks=3, repeats=5)
    result = gate(scores, "base")
    flaky = {f["variant"]: f["tasks"] for f in result["flaky"]}
    assert flaky.get("base")  # a fair coin over 5 repeats differs somewhere
    assert "candidate" not in flaky  # always heads: never flaky


def test_the_headline_names_a_winner_on_these_tasks_when_intervals_are_apart() -> None:
    from runner.grading.headline import headline

    groups = [
        Group(
            f"t{t}",
            (
                Result("good", "succeeded", "heads"),
                Result("bad", "succeeded", "heads" if r == 0 else "tails"),
            ),
            expected={"output": "heads"},
            repeat=r,
        )
        for t in range(3)
        for r in range(5)
    ]
    report = grade(groups, rubric_judge, variants=["bad", "good"], seed=1, resamples=50)
    order = [s.variant for s in report.standings]
    rates = (report.uncertainty or {}).get("win_rates")
    said = headline(report.scores, report.verdicts, order, rates)
    # 3 tasks: the win rate says "too few tasks"; the repeats say 1.0 against 0.2, apart
    assert said["winner"] == "good" and said["how_sure"] == "better_on_these_tasks"
    assert said["text"].startswith("good wins on these 3 tasks: mean score 1.00 [")
    assert "too few tasks to say it holds on others" in said["text"]
    # one task, one repeat, both heads: nothing tells them apart
    few = grade(groups[:1], rubric_judge, variants=["bad", "good"], seed=1, resamples=50)
    close = headline(few.scores, few.verdicts, ["good", "bad"], None)
    assert close["winner"] is None and close["text"].startswith("no clear winner: good leads")
