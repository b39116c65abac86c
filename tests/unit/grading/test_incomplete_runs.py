"""Honest partial runs: a run a ceiling, an infrastructure error or a judge failure
cut is never scored, and every verdict counts it in its denominator as an unknown outcome.

On main such a task simply dropped out of the pair's comparisons: 6 clean wins of 10 planned
tasks, the other 4 stopped by the ceiling, read "A is better than B" as if 6 were all there was.
"""

from __future__ import annotations

from runner.errors import GradingError
from runner.grading import Group, Ranking, Result, grade, rubric_judge

EXPECTED = {"output": "ok"}


def _group(task: str, a_ok: bool, b_status: str | None) -> Group:
    results = [Result("A", "succeeded", "ok" if a_ok else "no")]
    incomplete = {}
    if b_status is None:
        results.append(Result("B", "succeeded", "no"))
    else:
        incomplete["B"] = b_status
    return Group(task, tuple(results), expected=EXPECTED, incomplete=incomplete)


def _verdict(report: object) -> dict[str, object]:
    (verdict,) = report.verdicts  # type: ignore[attr-defined]
    return dict(verdict)


def test_tasks_a_ceiling_cut_are_unknowns_in_the_verdict_not_dropped() -> None:
    groups = [_group(f"t{i}", True, None) for i in range(6)]
    groups += [_group(f"t{i}", True, "ceiling_reached") for i in range(6, 9)]
    groups += [_group("t9", True, "infra_error")]
    report = grade(groups, rubric_judge, variants=["A", "B"], seed=1, resamples=200)
    entry = report.uncertainty["win_rates"]["A"]["B"]  # type: ignore[index]
    assert entry["tasks"] == 6 and entry["planned"] == 10 and entry["incomplete"] == 4
    assert entry["incomplete_by_reason"] == {"ceiling_reached": 3, "infra_error": 1}
    low, high = entry["bounds"]
    assert low <= 0.6 and high == 1.0  # at best 6 wins + 4 unknowns, at worst 6 wins of 10
    verdict = _verdict(report)
    # 6 of 6 alone would be "better"; with 4 of 10 unknown it cannot be told
    assert verdict["verdict"] == "within_noise"
    assert "4 of 10 planned tasks not compared (3 ceiling_reached, 1 infra_error)" in str(
        verdict["text"]
    )
    # never scored: B has no result, so no loss, on the incomplete tasks
    b = report.standing("B")
    assert b.tasks_graded == 6 and b.episodes_by_status == {"succeeded": 6}


def test_complete_results_keep_their_verdict() -> None:
    groups = [_group(f"t{i}", True, None) for i in range(10)]
    report = grade(groups, rubric_judge, variants=["A", "B"], seed=1, resamples=200)
    entry = report.uncertainty["win_rates"]["A"]["B"]  # type: ignore[index]
    assert entry["incomplete"] == 0 and entry["bounds"] == [entry["low"], entry["high"]]
    assert _verdict(report)["verdict"] == "better"


def test_a_judge_failure_is_an_unknown_too() -> None:
    groups = [_group(f"t{i}", True, None) for i in range(8)]

    def judge(group: Group) -> Ranking:
        if group.task_id in ("t6", "t7"):
            raise GradingError("the judge's answer is not a ranking")
        return rubric_judge(group)

    report = grade(groups, judge, variants=["A", "B"], seed=1, resamples=200)
    entry = report.uncertainty["win_rates"]["A"]["B"]  # type: ignore[index]
    assert entry["incomplete"] == 2 and entry["incomplete_by_reason"] == {"judge_error": 2}
    assert [u["reason"] for u in report.ungraded] == ["judge_error", "judge_error"]
