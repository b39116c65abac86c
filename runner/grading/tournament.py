"""Tournament grading: judge every task's group, then rate the variants across tasks.

Each task's episodes form one group judged listwise (a `Ranking`, ties allowed). Ratings come
from openskill's Plackett-Luce model: one rating update per graded task, in task order, with the
group's ranks (lower is better, equal ranks tie). A group with fewer than two results, or one
its judge could not grade, updates nothing and is listed under ``ungraded`` with the reason.

When the judge ceiling is reached, the remaining groups are not sent to the judge: they are
listed as ungraded with reason ``ceiling_reached`` and the report carries the ceiling's fields
(the caller exits 4). Report data per variant: rating (mu, sigma, ordinal = mu - 3 sigma), mean
rank, wins/ties/losses against each other variant over the tasks both were graded on, episodes
by status; per task: the ranking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from openskill.models import PlackettLuce

from runner.errors import CeilingReached, GradingError
from runner.grading.model import Group, Ranking

log = structlog.get_logger(__name__)

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
    """

    judge: str
    standings: tuple[Standing, ...]
    tasks: tuple[Ranking, ...]
    ungraded: tuple[dict[str, str], ...] = ()
    ceiling_reached: dict[str, Any] | None = field(default=None)

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
        return {
            "judge": self.judge,
            "variants": [s.to_dict() for s in self.standings],
            "tasks": [r.to_dict() for r in self.tasks],
            "ungraded": list(self.ungraded),
            "ceiling_reached": self.ceiling_reached,
        }


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
    ungraded: Sequence[dict[str, str]] = (),
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
    model = PlackettLuce()
    ratings = {name: model.rating(name=name) for name in names}
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
        if len(players) < 2:
            continue
        rated = model.rate(
            [[ratings[name]] for name in players], ranks=[ranking.ranks[n] for n in players]
        )
        for name, team in zip(players, rated, strict=True):
            ratings[name] = team[0]
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
) -> TournamentReport:
    """Judge every group, then `aggregate`.

    Args:
        groups: one per task, in task order.
        judge: a callable ``Group -> Ranking`` (see `runner.grading.judges.make_judge`).
        variants: every variant of the job, in plan order.
        judge_name: the judge's name for the report; default its ``name`` attribute or
            ``rubric``.

    Returns:
        The report. A `GradingError` on one group makes that group ungraded (reason
        ``judge_error``); a `CeilingReached` makes it and every later group ungraded (reason
        ``ceiling_reached``) and is recorded in ``ceiling_reached``.
    """
    name = judge_name or str(getattr(judge, "name", "rubric"))
    rankings: list[Ranking] = []
    ungraded: list[dict[str, str]] = []
    stopped: dict[str, Any] | None = None
    for group in groups:
        if stopped is not None:
            ungraded.append({"task_id": group.task_id, "reason": "ceiling_reached"})
            continue
        if len(group.results) < 2:
            ungraded.append({"task_id": group.task_id, "reason": "fewer_than_two_results"})
            continue
        try:
            rankings.append(judge(group))
        except CeilingReached as exc:
            stopped = dict(exc.fields)
            ungraded.append(
                {"task_id": group.task_id, "reason": "ceiling_reached", "message": str(exc)}
            )
            log.warning("grading_stopped_by_ceiling", task_id=group.task_id, ceiling=exc.fields)
        except GradingError as exc:
            ungraded.append(
                {"task_id": group.task_id, "reason": "judge_error", "message": str(exc)}
            )
            log.warning("grading_failed", task_id=group.task_id, error=str(exc))
    return aggregate(
        rankings,
        groups,
        variants=variants,
        judge=name,
        ungraded=ungraded,
        ceiling_reached=stopped,
    )
