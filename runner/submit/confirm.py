"""The gate's confirm-on-retry: a borderline FAIL's tasks run once more, then decided.

``submit --baseline B`` gates each other variant against B (`runner.grading.gate`). When a
candidate FAILs near the intervals' edge (`runner.grading.gate.borderline`: the 95 %
intervals apart, the 99 % ones not), one confirm runs, never more:

1. the tasks of the failing comparison -- every task on which both the candidate and the
   baseline were scored -- run once more, as one extra repeat (index ``plan.repeats``), for
   every borderline-FAILing candidate and for the baseline;
2. the job is graded again on the combined data (`runner.submit.report.grade_job` with
   ``confirm_tasks``: with one episode per task, a task's score is the mean of its two
   episodes and the intervals stay over tasks) and the gate answers again on it.

Why every compared task and not only the ones the candidate lost: choosing the tasks to re-run
by their first result is a biased sample (regression to the mean: the tasks it lost are the
ones where it was unlucky, and the baseline lucky), and the bias always favours the candidate.
Measured on simulated jobs (rubric 0/1, 20 tasks, one episode each, every episode a coin of
the variant's pass rate; the `CoinJob` of tests/unit/submit/test_gate_confirm.py): a real
regression (0.9 -> 0.5) FAILed in 41 of 100 jobs with no confirm, in 7 when only the tasks
the candidate lost were re-run, in 29 when every compared task was (the test's 20 seeds: 11,
0 and 6); an A/A job (0.5 and 0.5, 300 seeds) FAILed once with no confirm, never with either.
The confirm costs power on a real regression (a borderline FAIL is, by its choice, the lucky
side of the noise) and removes the rare A/A FAIL; the issue asks for the latter.

The extra runs go through the scheduler like any run: metered, under the replay ceiling (a
ceiling that stops them stops the job as for any run, exit 4), interrupted by Ctrl-C (the first
verdict then stands, and the job is interrupted). What ran and what it changed is the gate's
``confirm`` (`confirm_record`), printed under the gate's verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runner.domain.words import counted
from runner.grading.gate import BORDERLINE_RULE, gate
from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.grading.tournament import TournamentReport
    from runner.submit.plan import Plan
    from runner.submit.scheduler import PairOutcome

log = get_logger(__name__)

__all__ = ["borderline_fails", "confirm_on_retry", "confirm_record", "confirm_tasks"]

Episode = tuple[str, str, int]


def borderline_fails(verdicts: Mapping[str, Any]) -> list[str]:
    """The candidates whose FAIL is borderline, in the gate's order.

    Args:
        verdicts: `runner.grading.gate.gate`'s result.
    """
    return [v["variant"] for v in verdicts.get("verdicts") or [] if v.get("borderline")]


def confirm_tasks(
    grading: TournamentReport, baseline: str, candidates: Sequence[str], order: Sequence[str]
) -> list[str]:
    """The tasks the confirm runs again: those scored for ``baseline`` and a candidate.

    Args:
        grading: the job's grading.
        baseline: the baseline variant.
        candidates: the borderline-FAILing variants.
        order: every task id in plan order (the result follows it).
    """
    scored: dict[str, set[str]] = {}
    for ranking in grading.tasks:
        for variant in ranking.scores or {}:
            scored.setdefault(variant, set()).add(ranking.task_id)
    base = scored.get(baseline, set())
    compared = {t for name in candidates for t in scored.get(name, set()) if t in base}
    return [t for t in order if t in compared]


def confirm_record(
    before: Mapping[str, Any],
    after: Mapping[str, Any] | None,
    *,
    candidates: Sequence[str],
    tasks: Sequence[str],
    outcomes: Sequence[PairOutcome],
) -> dict[str, Any]:
    """What the confirm ran and what it changed: the gate's ``confirm`` object.

    Args:
        before: the gate's answer on the first data.
        after: its answer on the combined data; None when the confirm was interrupted (the
            first answer stands).
        candidates: the borderline-FAILing variants it was run for.
        tasks: the tasks run once more (`confirm_tasks`).
        outcomes: the confirm's runs.

    Returns:
        ``{"rule", "variants", "tasks", "runs", "runs_by_status", "before": {variant: verdict},
        "after": {variant: verdict}, "changed": [variant], "text"}``.
    """
    first = {v["variant"]: v["verdict"] for v in before.get("verdicts") or []}
    final = {v["variant"]: v["verdict"] for v in (after or before).get("verdicts") or []}
    statuses: dict[str, int] = {}
    for outcome in outcomes:
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    changed = [v for v in candidates if first.get(v) != final.get(v)]
    ran = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none"
    words = "; ".join(
        f"{v} {first.get(v)} -> {final.get(v)}" if v in changed else f"{v} {first.get(v)} stands"
        for v in candidates
    )
    plural = "s" if len(tasks) != 1 else ""
    text = (
        f"confirm-on-retry: borderline FAIL of {', '.join(candidates)}; re-ran its {len(tasks)}"
        f" compared task{plural} once more for {', '.join(candidates)} and the baseline"
        f" {before.get('baseline')} ({counted(len(outcomes), 'run')}: {ran}); "
        + (f"on the combined data: {words}" if after is not None else "interrupted: " + words)
    )
    return {
        "rule": BORDERLINE_RULE,
        "variants": list(candidates),
        "tasks": list(tasks),
        "runs": len(outcomes),
        "runs_by_status": dict(sorted(statuses.items())),
        "before": first,
        "after": final,
        "changed": changed,
        "text": text,
    }


def confirm_on_retry(
    plan: Plan,
    grading: TournamentReport,
    *,
    run: Callable[[Sequence[Episode]], Sequence[PairOutcome]],
    grade_again: Callable[[Collection[str]], TournamentReport],
    interrupted: Callable[[], bool],
    finished: Collection[Episode] = (),
) -> tuple[TournamentReport, dict[str, Any] | None]:
    """Run the confirm when the gate has a borderline FAIL (module doc); else change nothing.

    Args:
        plan: the job's plan (``baseline`` set).
        grading: the grading of the planned episodes.
        run: runs episodes (the job's scheduler) and returns their outcomes.
        grade_again: grades the job with these tasks' extra repeat (`grade_job`).
        interrupted: whether the job was interrupted (checked after the runs).
        finished: episodes the ledger holds finished (a resumed job's confirm runs are not
            run twice).

    Returns:
        The grading the report shows (the combined data's when the confirm ran to its end)
        and the `confirm_record` (None when no confirm ran).
    """
    if plan.baseline is None or grading.scores is None:
        return grading, None
    before = gate(grading.scores, plan.baseline)
    candidates = borderline_fails(before)
    if not candidates:
        return grading, None
    tasks = confirm_tasks(grading, plan.baseline, candidates, [t.task_id for t in plan.tasks])
    if not tasks:
        return grading, None
    names = [*candidates, plan.baseline]
    episodes = [
        (name, task, plan.repeats)
        for task in tasks
        for name in names
        if (name, task, plan.repeats) not in finished
    ]
    log.info("gate_confirm_started", variants=candidates, tasks=len(tasks), runs=len(episodes))
    outcomes = list(run(episodes)) if episodes else []
    if interrupted():
        return grading, confirm_record(
            before, None, candidates=candidates, tasks=tasks, outcomes=outcomes
        )
    combined = grade_again(tasks)
    after = gate(combined.scores or grading.scores, plan.baseline)
    record = confirm_record(before, after, candidates=candidates, tasks=tasks, outcomes=outcomes)
    log.info("gate_confirm_finished", changed=record["changed"])
    return combined, record
