"""Honest verdicts: shuffled shown order, a model judge in two orders, bootstrap intervals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.grading import Group, ModelJudge, Ranking, Result, grade, rubric_judge
from runner.grading.order import mean_ranks, shown_order
from runner.grading.uncertainty import MIN_TASKS, statements, wilson
from runner.ledger import CeilingGuard, Ledger

PRICES = {"judge-model*": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0}}
EXPECTED = {"output": "ok"}


def _result(variant: str, ok: bool) -> Result:
    return Result(variant, "succeeded", "ok" if ok else "no")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path / "state")
    led.create_job("job", {}, {})
    yield led
    led.close()


def test_the_judge_sees_a_seeded_shuffle_and_the_report_records_it() -> None:
    names = [f"v{i}" for i in range(6)]
    groups = [Group(f"t{i}", tuple(_result(n, True) for n in names)) for i in range(8)]
    seen: list[tuple[str, ...]] = []

    def judge(group: Group) -> Ranking:
        seen.append(group.variants)
        return rubric_judge(group)

    report = grade(groups, judge, variants=names, seed=7, resamples=20)
    assert report.seed == 7
    orders = [tuple(r.detail["order"]) for r in report.tasks]
    assert orders == seen  # what was recorded is what the judge saw
    assert len(set(orders)) > 1 and any(o != tuple(names) for o in orders)  # not plan order
    again = grade(groups, rubric_judge, variants=names, seed=7, resamples=20)
    assert [tuple(r.detail["order"]) for r in again.tasks] == orders  # same seed, same orders
    other = grade(groups, rubric_judge, variants=names, seed=8, resamples=20)
    assert [tuple(r.detail["order"]) for r in other.tasks] != orders
    assert shown_order(groups[0], 7) == orders[0]
    assert report.to_dict()["seed"] == 7


class FirstPlaceBias:
    """A position-biased model: it always ranks whichever candidate is shown first best."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        labels = json.loads(request["messages"][1]["content"])["candidates"]
        ranks = {label: (1 if label == "1" else 2) for label in labels}
        return {
            "id": "x",
            "model": "judge-model-1",
            "choices": [
                {"message": {"role": "assistant", "content": json.dumps({"ranks": ranks})}}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }


def test_a_position_biased_model_judge_is_caught_by_the_second_order(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {})
    provider = FirstPlaceBias()
    judge = ModelJudge("judge-model", provider, guard, PRICES)
    groups = [Group(f"t{i}", (_result("A", True), _result("B", True))) for i in range(6)]
    report = grade(groups, judge, variants=["A", "B"], seed=1)
    assert len(provider.requests) == 12  # two orders per group, each charged
    assert ledger.totals("job")["judge"].charged.runs == 12
    assert report.consistency is not None
    assert report.consistency["checked"] == 6 and report.consistency["agreed"] == 0
    assert len(report.consistency["disagreed"]) == 6
    for ranking in report.tasks:
        first, second = ranking.detail["orders"]
        assert second == list(reversed(first))
        assert ranking.ranks == {"A": 1, "B": 1}  # the bias cancels: a tie, not a winner
    assert report.standing("A").mu == pytest.approx(report.standing("B").mu)


def test_mean_ranks() -> None:
    assert mean_ranks([{"A": 1, "B": 2}, {"A": 2, "B": 1}]) == {"A": 1, "B": 1}
    assert mean_ranks([{"A": 1, "B": 2, "C": 3}, {"A": 1, "B": 3, "C": 2}]) == {
        "A": 1,
        "B": 2,
        "C": 2,
    }


def _groups(wins_for_a: list[bool], repeats: int = 1) -> list[Group]:
    groups = []
    for i, a_wins in enumerate(wins_for_a):
        for r in range(repeats):
            results = (_result("A", a_wins), _result("B", not a_wins))
            groups.append(Group(f"t{i}", results, EXPECTED, repeat=r))
    return groups


def test_a_clear_winner_gets_a_narrow_interval_and_is_called_better() -> None:
    report = grade(_groups([True] * 20), rubric_judge, variants=["A", "B"], seed=3)
    assert report.uncertainty is not None
    rate = report.uncertainty["win_rates"]["A"]["B"]
    assert rate["rate"] == 1.0 and rate["tasks"] == 20 and rate["high"] == 1.0
    # a clean sweep is not certainty: at least the Wilson interval over 20 tasks
    assert rate["low"] == pytest.approx(wilson(1.0, 20)[0]) and 0.8 < rate["low"] < 0.9
    mu_a, mu_b = (report.uncertainty["ratings"][v]["mu"] for v in ("A", "B"))
    assert mu_a[0] > mu_b[1]  # the intervals do not overlap
    assert [v["verdict"] for v in report.verdicts] == ["better"]
    assert report.verdicts[0]["text"].startswith("A is better than B")
    data = report.to_dict()
    assert data["variants"][0]["interval"]["mu"] == mu_a


def test_a_coin_flip_is_within_noise_in_words() -> None:
    flips = [True, False] * 10
    report = grade(_groups(flips), rubric_judge, variants=["A", "B"], seed=3)
    rate = report.uncertainty["win_rates"]["A"]["B"]  # type: ignore[index]
    assert rate["rate"] == 0.5 and rate["low"] < 0.5 < rate["high"]
    (verdict,) = report.verdicts
    assert verdict["verdict"] == "within_noise"
    assert "within noise" in verdict["text"] and "cannot say which is better" in verdict["text"]


def test_too_few_tasks_never_gives_a_verdict_even_with_many_repeats() -> None:
    # one task, 10 repeats all won by A: repeats are not independent tasks
    report = grade(_groups([True], repeats=10), rubric_judge, variants=["A", "B"], seed=0)
    assert len(report.tasks) == 10 and {r.repeat for r in report.tasks} == set(range(10))
    rate = report.uncertainty["win_rates"]["A"]["B"]  # type: ignore[index]
    assert (rate["tasks"], rate["groups"]) == (1, 10)
    assert report.verdicts[0]["verdict"] == "too_few_tasks"
    assert f"fewer than {MIN_TASKS} tasks" in report.verdicts[0]["text"]


def test_the_bootstrap_is_seeded() -> None:
    groups = _groups([True, False, True, True, False, True, True, False])
    one = grade(groups, rubric_judge, variants=["A", "B"], seed=11).uncertainty
    two = grade(groups, rubric_judge, variants=["A", "B"], seed=11).uncertainty
    three = grade(groups, rubric_judge, variants=["A", "B"], seed=12).uncertainty
    assert one == two and one is not None and three is not None
    assert one["ratings"] != three["ratings"]
    assert one["resamples"] >= 50 and one["seed"] == 11


def test_wilson() -> None:
    low, high = wilson(1.0, 22)
    assert (round(low, 3), high) == (0.851, 1.0)
    low, high = wilson(0.5, 100)
    assert (round(low, 3), round(high, 3)) == (0.404, 0.596)
    assert wilson(0.3, 0) == (0.0, 1.0)


def test_statements_with_no_shared_task() -> None:
    uncertainty = {"win_rates": {"A": {"B": {"rate": None, "tasks": 0}}, "B": {}}}
    assert statements(["A", "B"], uncertainty)[0]["verdict"] == "not_compared"


def test_ties_say_nothing_of_which_is_better() -> None:
    """12 wins, 28 ties, no loss: the sign test's p is ~0.0005, yet a Wilson interval over all
    40 tasks at 65 % (ties as halves) held 50 % and the verdict read "within noise" (a new
    user's τ² job)."""
    from runner.grading.uncertainty import _decisive_wilson

    low, high = _decisive_wilson([1.0] * 12 + [0.5] * 28)
    assert 0.5 < low < 0.6 and high == pytest.approx(0.65)
    assert _decisive_wilson([0.5] * 10) == (0.5, 0.5)
    assert _decisive_wilson([1.0] * 20) == pytest.approx(wilson(1.0, 20))  # no tie: as before
    low, high = _decisive_wilson([1.0, 0.0] * 10 + [0.5] * 20)  # a coin among ties
    assert low < 0.5 < high


def test_wins_among_ties_are_better_and_each_rating_lies_in_its_interval() -> None:
    """A new user's τ² job: 12 wins, 28 ties, 0 losses read "within noise", and each variant's
    mu lay outside its own 95 % interval (25.71 in 25.75-29.76)."""
    groups = [
        Group(f"t{i}", (_result("A", True), _result("B", i >= 12)), EXPECTED) for i in range(40)
    ]
    report = grade(groups, rubric_judge, variants=["A", "B"], seed=7)
    assert [v["verdict"] for v in report.verdicts] == ["better"], report.verdicts
    assert report.uncertainty is not None
    for name in ("A", "B"):
        low, high = report.uncertainty["ratings"][name]["mu"]
        assert low <= report.standing(name).mu <= high, (name, low, high)
