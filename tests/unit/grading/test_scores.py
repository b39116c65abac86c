"""Scores people know: t interval, Wilson pass rate, pass@k (Chen et al.), pass^k, flaky tasks."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from runner.grading import Group, Result, grade, rubric_judge
from runner.grading.scores import (
    mean_interval,
    pass_at_k,
    pass_hat_k,
    stratified_interval,
    summarise,
    t_quantile,
)
from runner.grading.uncertainty import wilson


def test_t_quantile_matches_the_table_and_its_expansion() -> None:
    assert t_quantile(1) == pytest.approx(12.706)
    assert t_quantile(4) == pytest.approx(2.776)
    assert t_quantile(30) == pytest.approx(2.042)
    # beyond the table: Cornish-Fisher, 3 decimals of the published values
    assert t_quantile(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile(60) == pytest.approx(2.000, abs=1e-3)
    assert t_quantile(120) == pytest.approx(1.980, abs=1e-3)
    assert t_quantile(10**6) == pytest.approx(1.960, abs=1e-3)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_mean_interval_is_the_student_t_interval() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    got = mean_interval(values)
    half = 2.776 * statistics.stdev(values) / math.sqrt(5)
    assert got["mean"] == 3.0
    assert got["interval"] == pytest.approx([3 - half, 3 + half])
    assert mean_interval([0.0, 1.0, 1.0], unit_scale=True)["interval"][1] == 1.0  # clipped
    # five equal scores: the t interval is a point; on the unit scale Wilson widens it
    assert mean_interval([1.0] * 5)["interval"] == [1.0, 1.0]
    assert mean_interval([1.0] * 5, unit_scale=True)["interval"] == pytest.approx(
        [wilson(1.0, 5)[0], 1.0]
    )
    assert mean_interval([0.5]) == {"mean": 0.5, "interval": None, "n": 1}
    assert mean_interval([]) == {"mean": None, "interval": None, "n": 0}


def test_stratified_interval_uses_the_pooled_within_task_variance() -> None:
    per_task = [[1.0, 0.0, 1.0], [0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    means = [2 / 3, 0.0, 0.75]
    mean = sum(means) / 3
    df = 9 - 3
    pooled = sum((x - m) ** 2 for v, m in zip(per_task, means, strict=True) for x in v) / df
    se = math.sqrt(pooled * (1 / 3 + 1 / 2 + 1 / 4)) / 3
    got = stratified_interval(per_task)
    assert got["mean"] == pytest.approx(mean) and got["n"] == 9
    assert got["interval"] == pytest.approx([mean - 2.447 * se, mean + 2.447 * se])
    # tasks differing is no noise here: two tasks, each always the same, a point
    assert stratified_interval([[1.0, 1.0], [0.0, 0.0]])["interval"] == [0.5, 0.5]
    assert stratified_interval([[1.0], [0.0]])["interval"] is None  # no degree of freedom


def _brute_pass_at_k(outcomes: list[bool], k: int) -> tuple[float, float]:
    """pass@k and pass^k by enumerating every k-subset of the tries."""
    subsets = list(itertools.combinations(outcomes, k))
    return (
        sum(any(s) for s in subsets) / len(subsets),
        sum(all(s) for s in subsets) / len(subsets),
    )


@pytest.mark.parametrize(("n", "c", "k"), [(10, 3, 1), (10, 3, 5), (5, 0, 2), (5, 5, 5), (7, 6, 3)])
def test_pass_at_k_and_pass_hat_k_equal_the_subset_enumeration(n: int, c: int, k: int) -> None:
    outcomes = [True] * c + [False] * (n - c)
    at, hat = _brute_pass_at_k(outcomes, k)
    assert pass_at_k(n, c, k) == pytest.approx(at)
    assert pass_hat_k(n, c, k) == pytest.approx(hat)


def test_pass_at_k_known_value_and_bounds() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the pass rate
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)


def _group(task: str, repeat: int, outcomes: dict[str, bool | None]) -> Group:
    """``None``: the variant's run ended infra_error (not scored)."""
    results = tuple(
        Result(v, "succeeded", "ok" if ok else "no") for v, ok in outcomes.items() if ok is not None
    )
    missing = {v: "infra_error" for v, ok in outcomes.items() if ok is None}
    return Group(task, results, expected={"output": "ok"}, repeat=repeat, incomplete=missing)


def test_summarise_over_tasks_with_repeats() -> None:
    # 3 tasks x 2 repeats; A passes everything but t2's second repeat, B passes half of t0 only
    plan = {
        ("t0", 0): {"A": True, "B": True},
        ("t0", 1): {"A": True, "B": False},
        ("t1", 0): {"A": True, "B": False},
        ("t1", 1): {"A": True, "B": None},  # B's run hit infra_error
        ("t2", 0): {"A": True, "B": False},
        ("t2", 1): {"A": False, "B": False},
    }
    groups = [_group(t, r, o) for (t, r), o in plan.items()]
    report = grade(groups, rubric_judge, variants=["A", "B"], seed=1, resamples=20)
    scores = report.scores
    assert scores is not None
    assert scores["spread"] == "repeats" and scores["k"] == 2
    a, b = scores["variants"]
    assert a["variant"] == "A" and b["variant"] == "B"
    # per-task means A: 1, 1, 0.5 -> mean 5/6, the stratified interval over the repeats
    assert a["mean"] == pytest.approx(5 / 6)
    expected = stratified_interval([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]], unit_scale=True)
    assert a["interval"] == pytest.approx(expected["interval"])
    assert a["pass_rate"] == pytest.approx(5 / 6)
    assert a["pass_interval"] == pytest.approx(list(wilson(5 / 6, 6)))  # over episodes
    assert a["pass_at_k"] == pytest.approx(1.0)  # every task passed at least once in 2
    assert a["pass_hat_k"] == pytest.approx(2 / 3)  # t2 did not pass both times
    assert a["flaky"] == ["t2"]
    assert a["episodes"] == 6 and a["not_scored"] == {}  # t1#1 scored alone, B's run missing
    # B: t1's infra_error run is in no denominator, and is said
    assert b["episodes"] == 5 and b["not_scored"] == {"infra_error": 1}
    assert b["mean"] == pytest.approx((0.5 + 0.0 + 0.0) / 3)
    assert b["short_tasks"] == 1  # t1 has one scored repeat of 2: no pass@2 for it
    assert b["flaky"] == ["t0"]


def test_one_episode_per_task_spreads_over_tasks_and_no_scores_means_no_mean() -> None:
    groups = [_group(f"t{t}", 0, {"A": t % 2 == 0, "B": True}) for t in range(4)]
    scores = grade(groups, rubric_judge, variants=["A", "B"], seed=1, resamples=20).scores
    assert scores is not None and scores["spread"] == "tasks"
    a = scores["variants"][0]
    assert a["mean"] == 0.5 and a["episodes"] == 4
    assert a["interval"] == mean_interval([1.0, 0.0, 1.0, 0.0], unit_scale=True)["interval"]
    assert a["pass_at_k"] is None  # one repeat: no pass@k
    empty = summarise([], groups, ["A", "B"])
    assert [v["mean"] for v in empty["variants"]] == [None, None]
