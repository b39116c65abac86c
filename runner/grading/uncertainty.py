"""How sure the verdict is: a seeded bootstrap over tasks, win rates, and "within noise" in words.

One stochastic episode per (variant, task) cannot say that one version is better; several tasks
and repeats can, within limits this module measures. The unit resampled is the **task** (with
all its repeats): tasks are what the verdict must generalise over, and repeats of one task are
not independent of each other.

- Ratings: ``resamples`` times, draw M tasks with replacement from the M graded ones (seeded
  ``random.Random``), rate the drawn rankings with openskill exactly as `aggregate` does, and
  keep each variant's ``mu`` and ``ordinal``; the interval is the 2.5th and 97.5th percentile
  (a percentile bootstrap, 95 %), widened to hold the rating of all the tasks: a rating is
  biased under resampling (a drawn task counted twice moves it further than once), and a
  reader shown a rating outside its own interval (mu 25.71, interval 25.75-29.76) trusts
  neither.
- Win rates: for variants A and B, per task, the share of that task's groups (repeats) where A
  ranked better than B, a tie counting one half; the win rate is the mean over the tasks both
  were graded on, its interval the same percentiles over the same resamples, widened to at
  least a Wilson score interval (`wilson`): a percentile bootstrap of a clean sweep collapses
  to the point 100 %, which would claim certainty from 5 tasks as from 500. The Wilson
  interval is taken over the *decisive* tasks only (a task's share other than one half) and
  mapped back to the rate with its ties at one half (`_decisive_wilson`): ties say nothing of
  which is better, as in the sign test, which drops them. Over every task, 12 wins, 28 ties and
  no loss read "within noise" (65 %, Wilson 50–78 %) where the sign test gives p ≈ 0.0005.
- Incomplete tasks (`count_incomplete`): a task the pair was never compared on (a
  run cut by a ceiling, an infrastructure error, an interruption, a judge failure) is neither
  a win nor a loss; it stays in the denominator as an *unknown* outcome: over the P planned
  tasks, C of them compared, the interval becomes ``[low C / P, (high C + P - C) / P]`` (every
  unknown a loss, every unknown a win). The reasons are counted per pair.
- Words (`statements`): a pair whose interval (with its incomplete tasks) contains one half is
  *within noise*; one whose interval lies above (below) one half is better (worse); with fewer
  than `MIN_TASKS` compared tasks there are too few tasks to tell, whatever the numbers.

Cost: one openskill update is ~0.13 ms here, so the number of resamples is chosen to keep the
bootstrap near `UPDATE_BUDGET` updates (between `MIN_RESAMPLES` and `MAX_RESAMPLES`); the
report records how many were drawn and the seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.domain.words import counted
from runner.grading.model import Group, Ranking

__all__ = [
    "MIN_TASKS",
    "bootstrap",
    "count_incomplete",
    "resample_count",
    "statements",
    "wilson",
]

LEVEL = 0.95
MIN_TASKS = 5  # shared tasks below which no verdict is given in words
UPDATE_BUDGET = 10_000
MIN_RESAMPLES = 50
MAX_RESAMPLES = 1000

Rater = Callable[[Sequence[Ranking]], Mapping[str, tuple[float, float]]]


def resample_count(groups: int) -> int:
    """Resamples for ``groups`` graded groups: ~`UPDATE_BUDGET` openskill updates in all."""
    return max(MIN_RESAMPLES, min(MAX_RESAMPLES, UPDATE_BUDGET // max(1, groups)))


def _percentiles(values: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(values)
    tail = (1 - LEVEL) / 2

    def at(q: float) -> float:
        pos = q * (len(ordered) - 1)
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return at(tail), at(1 - tail)


def wilson(rate: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion ``rate`` observed over ``n`` units (95 %: z 1.96).

    Source: E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927). For 22 of 22 it gives about [0.85, 1].
    """
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _task_scores(by_task: Mapping[str, Sequence[Ranking]], a: str, b: str) -> dict[str, float]:
    """Per task, A's share of the groups it shared with B in which it ranked better."""
    out: dict[str, float] = {}
    for task_id, rankings in by_task.items():
        points = [
            1.0 if r.ranks[a] < r.ranks[b] else 0.5 if r.ranks[a] == r.ranks[b] else 0.0
            for r in rankings
            if a in r.ranks and b in r.ranks
        ]
        if points:
            out[task_id] = sum(points) / len(points)
    return out


def _holding(interval: tuple[float, float], value: float) -> list[float]:
    """``interval`` widened to hold ``value`` (the statistic over every task)."""
    return [min(interval[0], value), max(interval[1], value)]


def _decisive_wilson(scores: Sequence[float]) -> tuple[float, float]:
    """The Wilson interval of the decisive tasks' mean, mapped onto the rate with ties at 1/2.

    Args:
        scores: per task, A's share of the groups it ranked better than B (ties one half).

    Returns:
        ``(low, high)`` on the scale of the mean of ``scores``; ``(0.5, 0.5)`` when every task
        was a tie (nothing says which is better). Without ties it is the Wilson interval of
        the rate over the tasks, as before.
    """
    decisive = [s for s in scores if s != 0.5]
    if not decisive:
        return 0.5, 0.5
    n, d = len(scores), len(decisive)
    low, high = wilson(sum(decisive) / d, d)
    ties = (n - d) * 0.5
    return (d * low + ties) / n, (d * high + ties) / n


def bootstrap(
    rankings: Sequence[Ranking],
    names: Sequence[str],
    rate: Rater,
    *,
    seed: int,
    resamples: int | None = None,
) -> dict[str, Any]:
    """Intervals of the ratings and the pairwise win rates, by resampling tasks.

    Args:
        rankings: the graded groups, in grading order (several per task with repeats).
        names: every variant.
        rate: rankings -> ``{variant: (mu, ordinal)}`` (the tournament's own rating).
        seed: the bootstrap's seed (the job's grading seed).
        resamples: how many; default `resample_count` of the number of groups.

    Returns:
        ``{"method", "level", "seed", "resamples", "tasks", "ratings": {variant: {"mu": [lo,
        hi], "ordinal": [lo, hi]}}, "win_rates": {a: {b: {"rate", "low", "high", "tasks",
        "groups"}}}}``; intervals are None when no task was graded.
    """
    by_task: dict[str, list[Ranking]] = {}
    for ranking in rankings:
        by_task.setdefault(ranking.task_id, []).append(ranking)
    tasks = list(by_task)
    count = resamples if resamples is not None else resample_count(len(rankings))
    rng = random.Random(seed)  # noqa: S311 - a statistical draw, not a secret
    draws = [[rng.choice(tasks) for _ in tasks] for _ in range(count)] if tasks else []
    mus: dict[str, list[float]] = {n: [] for n in names}
    ordinals: dict[str, list[float]] = {n: [] for n in names}
    for draw in draws:
        rated = rate([r for task_id in draw for r in by_task[task_id]])
        for name in names:
            mu, ordinal = rated[name]
            mus[name].append(mu)
            ordinals[name].append(ordinal)
    whole = rate(list(rankings)) if draws else {}
    ratings = {
        n: {
            "mu": _holding(_percentiles(mus[n]), whole[n][0]) if draws else None,
            "ordinal": _holding(_percentiles(ordinals[n]), whole[n][1]) if draws else None,
        }
        for n in names
    }
    win_rates: dict[str, dict[str, Any]] = {}
    for a in names:
        win_rates[a] = {}
        for b in names:
            if a == b:
                continue
            scores = _task_scores(by_task, a, b)
            entry: dict[str, Any] = {
                "rate": None,
                "low": None,
                "high": None,
                "tasks": len(scores),
                "groups": sum(1 for r in rankings if a in r.ranks and b in r.ranks),
            }
            if scores:
                entry["rate"] = sum(scores.values()) / len(scores)
                means = []
                for draw in draws:
                    drawn = [scores[t] for t in draw if t in scores]
                    if drawn:
                        means.append(sum(drawn) / len(drawn))
                low, high = _percentiles(means) if means else (entry["rate"], entry["rate"])
                w_low, w_high = _decisive_wilson(list(scores.values()))
                entry["low"], entry["high"] = min(low, w_low), max(high, w_high)
            win_rates[a][b] = entry
    return {
        "method": "percentile bootstrap over tasks (repeats of a task stay together)",
        "level": LEVEL,
        "seed": seed,
        "resamples": count,
        "tasks": len(tasks),
        "ratings": ratings,
        "win_rates": win_rates,
    }


def count_incomplete(
    uncertainty: dict[str, Any], groups: Sequence[Group], ungraded: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Add each pair's incomplete tasks to ``uncertainty``'s win rates (module docstring).

    Args:
        uncertainty: `bootstrap`'s result; its ``win_rates`` entries gain ``planned``,
            ``incomplete``, ``incomplete_by_reason`` ({reason: tasks}) and ``bounds`` ([low,
            high] over every planned task, None when nothing was compared).
        groups: every group of the job (graded or not), with its ``incomplete`` runs.
        ungraded: the groups the judge did not grade (``task_id``, ``repeat``, ``reason``).

    Returns:
        ``uncertainty``, changed in place.
    """
    planned = list(dict.fromkeys(g.task_id for g in groups))
    judge_failed = {(u["task_id"], u.get("repeat", 0)): str(u["reason"]) for u in ungraded}
    for a, row in uncertainty["win_rates"].items():
        for b, entry in row.items():
            compared = int(entry.get("tasks") or 0)
            reasons: dict[str, int] = {}
            for task_id in planned:
                why = _why_not_compared(task_id, a, b, groups, judge_failed)
                if why is not None:
                    reasons[why] = reasons.get(why, 0) + 1
            total = max(len(planned), compared)
            missing = total - compared
            entry["planned"] = total
            entry["incomplete"] = missing
            entry["incomplete_by_reason"] = dict(sorted(reasons.items()))
            low, high = entry.get("low"), entry.get("high")
            entry["bounds"] = (
                None
                if low is None or high is None or total == 0
                else [low * compared / total, (high * compared + missing) / total]
            )
    return uncertainty


def _why_not_compared(
    task_id: str,
    a: str,
    b: str,
    groups: Sequence[Group],
    judge_failed: Mapping[tuple[str, int], str],
) -> str | None:
    """Why ``a`` and ``b`` were never compared on ``task_id`` (None: they were, somewhere)."""
    reasons = []
    for group in groups:
        if group.task_id != task_id:
            continue
        both = a in group.variants and b in group.variants
        failed = judge_failed.get((group.task_id, group.repeat))
        if both and failed in (None, "fewer_than_two_results"):
            return None  # compared in this group
        if both:
            reasons.append(f"judge {failed}" if failed != "judge_error" else "judge_error")
        else:
            reasons.extend(
                group.incomplete.get(v, "not_run") for v in (a, b) if v not in group.variants
            )
    return reasons[0] if reasons else "not_run"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def statements(order: Sequence[str], uncertainty: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The verdict on each pair of variants in words, best-rated first.

    Args:
        order: the variants in standings order.
        uncertainty: `bootstrap`'s result.

    Returns:
        ``[{"a", "b", "verdict": better|worse|within_noise|too_few_tasks|not_compared,
        "text"}]``, one per unordered pair (``a`` before ``b`` in ``order``).
    """
    out: list[dict[str, Any]] = []
    rates = uncertainty["win_rates"]
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            entry = rates.get(a, {}).get(b) or {}
            tasks, rate = int(entry.get("tasks") or 0), entry.get("rate")
            low, high = entry.get("low"), entry.get("high")
            missing = int(entry.get("incomplete") or 0)
            if missing and entry.get("bounds") is not None:
                low, high = entry["bounds"]
            if rate is None or low is None or high is None:
                verdict, text = "not_compared", f"{a} and {b} were never graded on one task"
            else:
                shown = (
                    f"{a} ranks above {b} in {_pct(rate)} of their comparisons"
                    f" ({int(LEVEL * 100)}% interval {_pct(low)}–{_pct(high)},"
                    f" {counted(tasks, 'task')}, {counted(entry.get('groups') or 0, 'group')}"
                    + (_incomplete_words(entry) if missing else "")
                    + ")"
                )
                if tasks < MIN_TASKS:
                    verdict = "too_few_tasks"
                    text = (
                        f"{a} and {b} cannot be told apart: {shown}; fewer than {MIN_TASKS}"
                        " tasks is too few to tell"
                    )
                elif low <= 0.5 <= high:
                    verdict = "within_noise"
                    text = (
                        f"{a} and {b} are within noise: {shown}; the interval includes 50%,"
                        " so this evaluation cannot say which is better (more tasks or"
                        " --repeats would narrow it)"
                    )
                else:
                    verdict = "better" if low > 0.5 else "worse"
                    word = "better than" if verdict == "better" else "worse than"
                    text = f"{a} is {word} {b}: {shown}"
            out.append({"a": a, "b": b, "verdict": verdict, "text": text})
    return out


def _incomplete_words(entry: Mapping[str, Any]) -> str:
    """``; 3 of 10 planned tasks not compared (2 ceiling_reached, 1 infra_error), unknown``."""
    reasons = ", ".join(
        f"{n} {why}" for why, n in (entry.get("incomplete_by_reason") or {}).items()
    )
    return (
        f"; {entry['incomplete']} of {entry['planned']} planned tasks not compared"
        + (f" ({reasons})" if reasons else "")
        + ", counted as unknown: the interval is over every planned task"
    )
