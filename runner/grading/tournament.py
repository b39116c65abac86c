"""Tournament grading: judge every task's group, then rate the variants across tasks.

Each task's episodes form one group judged listwise (a `Ranking`, ties allowed). Ratings come
from openskill's Plackett-Luce model: one rating update per graded task, in task order, with the
group's ranks (lower is better, equal ranks tie). A group with fewer than two results, or one
its judge could not grade, updates nothing and is listed under ``ungraded`` with the reason.

When the judge ceiling is reached, the remaining groups are not sent to the judge: they are
listed as ungraded with reason ``ceiling_reached`` and the report carries the ceiling's fields
(the caller exits 4). Report data per variant: rating (mu, sigma, ordinal = mu - 3 sigma), mean
rank, wins/ties/losses against each other variant over the groups both were graded on, episodes
by status; per task (and repeat): the ranking.

`grade` shows every group to the judge in a seeded shuffled order (a ``model:`` judge in two
orders, `runner.grading.order`) and adds the seeded bootstrap over tasks
(`runner.grading.uncertainty`): rating intervals, win rates with intervals and the verdict on
each pair in words, and the scores people know (`runner.grading.scores`: mean score, pass rate,
pass@k and pass^k with their intervals). The seed, the orders and any disagreement of the two
orders are reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from openskill.models import PlackettLuce

from runner.errors import CeilingReached, GradingError
from runner.grading.model import Group, Ranking
from runner.grading.order import judge_in_orders
from runner.grading.scores import summarise
from runner.grading.uncertainty import bootstrap, count_incomplete, statements
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["Standing", "TournamentReport", "aggregate", "grade"]


@dataclass(frozen=True)
class Standing:
    """One variant's result over the tournament.

    Attributes:
        variant: the variant's name.
        mu: rating mean (openskill Plackett-Luce; starts at 25).
        sigma: rating uncertainty (starts at 25/3).
        ordinal: ``mu - 3 * sigma``, the conservative skill estimate the report sorts by.
        mean_rank: mean rank over graded tasks (1 is best), None when never graded.
        tasks_graded: graded tasks this variant took part in.
        versus: other variant -> ``{"wins", "ties", "losses"}`` over tasks both were graded on.
        episodes_by_status: episode status -> count, over every group given.
    """

    variant: str
    mu: float
    sigma: float
    ordinal: float
    mean_rank: float | None
    tasks_graded: int
    versus: dict[str, dict[str, int]]
    episodes_by_status: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "variant": self.variant,
            "rating": {"mu": self.mu, "sigma": self.sigma, "ordinal": self.ordinal},
            "mean_rank": self.mean_rank,
            "tasks_graded": self.tasks_graded,
            "versus": self.versus,
            "episodes_by_status": dict(sorted(self.episodes_by_status.items())),
        }


@dataclass(frozen=True)
class TournamentReport:
    """Grading result of one job.

    Attributes:
        judge: the judge's name.
        standings: one per variant, best ordinal first (ties by name).
        tasks: the ranking of every graded task, in task order.
        ungraded: ``{"task_id", "reason", "message"?}`` for every group not graded.
        ceiling_reached: the `CeilingReached` fields when the judge ceiling stopped grading.
        seed: the seed of the shown orders and the bootstrap (None: `aggregate` alone).
        uncertainty: `runner.grading.uncertainty.bootstrap`'s result, or None.
        verdicts: `runner.grading.uncertainty.statements`, the verdict on each pair in words.
        consistency: for a judge asked in two orders, ``{"checked", "agreed", "disagreed":
            [{task_id, repeat, rankings}]}``; None for a judge asked once.
        scores: `runner.grading.scores.summarise`'s result (None: `aggregate` alone); not
            part of `to_dict` (the job's report carries it at its top level).
    """

    judge: str
    standings: tuple[Standing, ...]
    tasks: tuple[Ranking, ...]
    ungraded: tuple[dict[str, Any], ...] = ()
    ceiling_reached: dict[str, Any] | None = field(default=None)
    seed: int | None = None
    uncertainty: dict[str, Any] | None = None
    verdicts: tuple[dict[str, Any], ...] = ()
    consistency: dict[str, Any] | None = None
    scores: dict[str, Any] | None = None

    def standing(self, variant: str) -> Standing:
        """Return the standing of ``variant``.

        Raises:
            KeyError: no such variant.
        """
        for standing in self.standings:
            if standing.variant == variant:
                return standing
        raise KeyError(variant)

    def to_dict(self) -> dict[str, Any]:
        """Return the report data as a JSON-ready dict (``report.json``'s ``grading`` part)."""
        intervals = (self.uncertainty or {}).get("ratings", {})
        variants = []
        for standing in self.standings:
            entry = standing.to_dict()
            entry["interval"] = intervals.get(standing.variant)
            variants.append(entry)
        return {
            "judge": self.judge,
            "variants": variants,
            "tasks": [r.to_dict() for r in self.tasks],
            "ungraded": list(self.ungraded),
            "ceiling_reached": self.ceiling_reached,
            "seed": self.seed,
            "uncertainty": self.uncertainty,
            "verdicts": list(self.verdicts),
            "consistency": self.consistency,
        }


def rate(rankings: Sequence[Ranking], names: Sequence[str]) -> dict[str, Any]:
    """Openskill Plackett-Luce ratings after one update per ranking, in order.

    Args:
        rankings: graded groups in grading order (a group of fewer than two updates nothing).
        names: every variant (each starts at the model's default rating).

    Returns:
        variant -> openskill rating (``mu``, ``sigma``, ``ordinal()``).
    """
    model = PlackettLuce()
    ratings = {name: model.rating(name=name) for name in names}
    for ranking in rankings:
        players = ranking.ordered()
        if len(players) < 2:
            continue
        rated = model.rate(
            [[ratings[name]] for name in players], ranks=[ranking.ranks[n] for n in players]
        )
        for name, team in zip(players, rated, strict=True):
            ratings[name] = team[0]
    return ratings


def _variant_order(variants: Sequence[str] | None, groups: Iterable[Group]) -> list[str]:
    names = list(variants or ())
    for group in groups:
        names.extend(v for v in group.variants if v not in names)
    return names


def aggregate(
    rankings: Sequence[Ranking],
    groups: Sequence[Group] = (),
    *,
    variants: Sequence[str] | None = None,
    judge: str = "",
    ungraded: Sequence[dict[str, Any]] = (),
    ceiling_reached: dict[str, Any] | None = None,
) -> TournamentReport:
    """Rate variants from per-task rankings with openskill's Plackett-Luce model.

    Args:
        rankings: one per graded task, in task order (rating updates depend on the order).
        groups: every group, graded or not, for the episodes-by-status counts.
        variants: every variant of the job (shown even when never graded), in plan order.
        judge: the judge's name, for the report.
        ungraded: groups that were not graded, with reasons.
        ceiling_reached: fields of the `CeilingReached` that stopped grading, if any.
    """
    names = _variant_order(variants, groups)
    for ranking in rankings:
        names.extend(v for v in ranking.ranks if v not in names)
    ratings = rate(rankings, names)
    rank_sums = dict.fromkeys(names, 0)
    graded = dict.fromkeys(names, 0)
    versus = {a: {b: {"wins": 0, "ties": 0, "losses": 0} for b in names if b != a} for a in names}
    for ranking in rankings:
        players = ranking.ordered()
        for name in players:
            rank_sums[name] += ranking.ranks[name]
            graded[name] += 1
            for other in players:
                if other != name:
                    mine, theirs = ranking.ranks[name], ranking.ranks[other]
                    outcome = "wins" if mine < theirs else "losses" if mine > theirs else "ties"
                    versus[name][other][outcome] += 1
    by_status: dict[str, dict[str, int]] = {name: {} for name in names}
    for group in groups:
        for result in group.results:
            counts = by_status[result.variant]
            counts[result.status] = counts.get(result.status, 0) + 1
    standings = [
        Standing(
            variant=name,
            mu=float(ratings[name].mu),
            sigma=float(ratings[name].sigma),
            ordinal=float(ratings[name].ordinal()),
            mean_rank=rank_sums[name] / graded[name] if graded[name] else None,
            tasks_graded=graded[name],
            versus=versus[name],
            episodes_by_status=by_status[name],
        )
        for name in names
    ]
    standings.sort(key=lambda s: (-round(s.ordinal, 9), s.variant))
    return TournamentReport(
        judge=judge,
        standings=tuple(standings),
        tasks=tuple(rankings),
        ungraded=tuple(ungraded),
        ceiling_reached=ceiling_reached,
    )


def grade(
    groups: Sequence[Group],
    judge: Any,
    *,
    variants: Sequence[str] | None = None,
    judge_name: str | None = None,
    seed: int = 0,
    resamples: int | None = None,
    repeats: int | None = None,
    spread: str | None = None,
) -> TournamentReport:
    """Judge every group (in a seeded shown order), `aggregate`, then bootstrap over tasks.

    Args:
        groups: one per task and repeat, in task order (repeats of a task together).
        judge: a callable ``Group -> Ranking`` (see `runner.grading.judges.make_judge`).
        variants: every variant of the job, in plan order.
        judge_name: the judge's name for the report; default its ``name`` attribute or
            ``rubric``.
        seed: seeds the order each group is shown in and the bootstrap (recorded).
        resamples: bootstrap resamples (default: `runner.grading.uncertainty.resample_count`).
        repeats: K of pass@k and pass^k (default: the groups' highest repeat + 1).
        spread: the scores' interval units (`runner.grading.scores.summarise`; None: by data).

    Returns:
        The report. A group of one result is ungraded (``fewer_than_two_results``); a judge
        that runs on the host (not ``order_sensitive``) still scores it for the report's
        ``scores``. A `GradingError` on one group makes that group ungraded (reason
        ``judge_error``); a `CeilingReached` makes it and every later group ungraded (reason
        ``ceiling_reached``) and is recorded in ``ceiling_reached``.
    """
    name = judge_name or str(getattr(judge, "name", "rubric"))
    rankings: list[Ranking] = []
    solo: list[Ranking] = []  # groups of one result: scored for the means, never rated
    ungraded: list[dict[str, Any]] = []
    stopped: dict[str, Any] | None = None
    for group in groups:
        where = {"task_id": group.task_id, "repeat": group.repeat}
        if stopped is not None:
            ungraded.append({**where, "reason": "ceiling_reached"})
            continue
        if len(group.results) < 2:
            ungraded.append({**where, "reason": "fewer_than_two_results"})
            if group.results and not getattr(judge, "order_sensitive", False):
                try:  # a host judge (rubric, function) scores one episode for nothing
                    solo.append(replace(judge(group), repeat=group.repeat))
                except (GradingError, CeilingReached) as exc:
                    log.warning("scoring_failed", task_id=group.task_id, error=str(exc))
            continue
        try:
            rankings.append(judge_in_orders(group, judge, seed))
        except CeilingReached as exc:
            stopped = dict(exc.fields)
            ungraded.append({**where, "reason": "ceiling_reached", "message": str(exc)})
            log.warning("grading_stopped_by_ceiling", task_id=group.task_id, ceiling=exc.fields)
        except GradingError as exc:
            ungraded.append({**where, "reason": "judge_error", "message": str(exc)})
            log.warning("grading_failed", task_id=group.task_id, error=str(exc))
    report = aggregate(
        rankings,
        groups,
        variants=variants,
        judge=name,
        ungraded=ungraded,
        ceiling_reached=stopped,
    )
    names = [s.variant for s in report.standings]

    def rated(sample: Sequence[Ranking]) -> dict[str, tuple[float, float]]:
        ratings = rate(sample, names)
        return {n: (float(r.mu), float(r.ordinal())) for n, r in ratings.items()}

    uncertainty = count_incomplete(
        bootstrap(rankings, names, rated, seed=seed, resamples=resamples), groups, ungraded
    )
    consistency = None
    if getattr(judge, "order_sensitive", False):
        checked = [r for r in rankings if "agree" in r.detail]
        consistency = {
            "checked": len(checked),
            "agreed": sum(1 for r in checked if r.detail["agree"]),
            "disagreed": [
                {"task_id": r.task_id, "repeat": r.repeat, "rankings": r.detail["rankings"]}
                for r in checked
                if not r.detail["agree"]
            ],
        }
    repeats = repeats or 1 + max((g.repeat for g in groups), default=0)
    return replace(
        report,
        scores=summarise(
            [*rankings, *solo],
            groups,
            [n for n in _variant_order(variants, groups) if n in names],  # plan order
            repeats=repeats,
            ungraded=ungraded,
            spread=spread,
        ),
        seed=seed,
        uncertainty=uncertainty,
        verdicts=tuple(statements(names, uncertainty)),
        consistency=consistency,
    )
