"""Scores people know: mean score, pass rate, pass@k, pass^k, each with a 95 % interval.

Pure functions over the judge's per-episode scores (`runner.grading.model.Ranking.scores`);
the one home of this arithmetic (the gate reads it: `runner.grading.gate`).

- **Mean score** of a variant: the mean over tasks of its per-task mean score (every task
  weighs the same, however many of its repeats were scored). Its 95 % interval is a Student t
  interval, mean ± t(0.975, df)·SE (`mean_interval`, `stratified_interval`):
  - with ``--repeats`` (a task scored twice or more) the tasks are fixed and the repeats are
    the random draw, so the standard error is the stratified one, from the pooled within-task
    variance s² (df = episodes − tasks): SE² = s²·Σ(1/n_t)/M² over the M tasks with n_t
    scored repeats each. This answers "how does this variant score on these tasks", the
    question of a gate comparing two versions on the same tasks; the differences between
    tasks are not noise there.
  - with one episode per task the only spread there is mixes task and run: the t interval of
    the per-task scores (df = M − 1).
  The t quantile comes from the standard table (Student 1908; NIST/SEMATECH e-Handbook,
  1.3.6.7.2) for 1 to 30 degrees of freedom and the Cornish-Fisher expansion beyond
  (Abramowitz & Stegun 26.7.5; 3 decimals). No degree of freedom, no interval (None).
  On the rubric's scale (every score in [0, 1]) the interval is widened to at least the
  Wilson score interval of the mean over the scored episodes and clipped to [0, 1]: a
  variable in [0, 1] with mean m varies at most as a pass/fail one does (variance m(1−m)), and
  a t interval of five equal scores is a single point, which would claim certainty from five
  tries (the win rates of `runner.grading.uncertainty` are widened the same way).
- **Pass**: an episode passes when its score is `PASS_SCORE` (1: the rubric found every
  expectation met). Pass figures exist only when every score lies in [0, 1].
- **Pass rate**: the share of scored episodes that passed, with its **Wilson** score interval
  over those episodes (E. B. Wilson, JASA 22, 1927; `uncertainty.wilson`).
- **pass@k** (``--repeats K``, k = K): the unbiased estimator of Chen et al. 2021, "Evaluating
  Large Language Models Trained on Code" (arXiv:2107.03374, eq. 1): per task with n scored
  repeats of which c passed, ``1 - C(n-c, k) / C(n, k)``, averaged over tasks; the chance that
  at least one of k tries passes. **pass^k**: ``C(c, k) / C(n, k)`` (Yao et al. 2024,
  "τ-bench", arXiv:2406.12045): the chance that all k tries pass. A task with fewer than k
  scored repeats has neither (counted in ``short_tasks``). Their interval: Wilson over tasks.
- **Flaky** tasks of a variant: scored in two repeats or more with different scores.
- **Not scored**: a run cut short (``infra_error``, ``ceiling_reached``, ``interrupted``,
  ``not_run``, ``unreadable``) or a group the judge could not grade is in no denominator; it is
  counted per reason in ``not_scored``.

Measured with the coin job of tests/unit/grading/test_gate_verdicts.py (a coin per episode,
200 seeds): an A/A gate of 4 tasks x 5 repeats of a fair coin gave 194 PASS, 5 INCONCLUSIVE,
1 FAIL (1 task x 5: 193, 7, 0); a coin from 95 % to 10 % heads FAILed in 100 of 100 seeds,
one from 90 % to 50 % in 27 of 100 at 4 tasks (59 INCONCLUSIVE) and 80 of 100 at 8 tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from runner.grading.model import Group, Ranking
from runner.grading.uncertainty import LEVEL, wilson

__all__ = [
    "PASS_SCORE",
    "mean_interval",
    "pass_at_k",
    "pass_hat_k",
    "stratified_interval",
    "summarise",
    "t_quantile",
]

PASS_SCORE = 1.0
METHODS = {
    "repeats": "Student t interval, stratified over tasks (pooled within-task variance)",
    "tasks": "Student t interval over the per-task scores",
}
PASS_METHOD = "Wilson score interval over the scored episodes"  # noqa: S105 - not a secret

# t(0.975, df) for df = 1..30 (NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959964


def t_quantile(df: int) -> float:
    """The 97.5th percentile of Student's t with ``df`` degrees of freedom (95 % two-sided).

    Raises:
        ValueError: ``df`` below 1.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975  # Cornish-Fisher expansion of t in powers of 1/df (A&S 26.7.5)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def _finish(mean: float, se: float, df: int, episodes: int, *, unit_scale: bool) -> list[float]:
    """[low, high] = mean ± t(df)·se, widened to Wilson over ``episodes`` on the unit scale."""
    half = t_quantile(df) * se
    low, high = mean - half, mean + half
    if unit_scale:
        w_low, w_high = wilson(min(1.0, max(0.0, mean)), episodes)
        low, high = max(0.0, min(low, w_low)), min(1.0, max(high, w_high))
    return [low, high]


def mean_interval(values: Sequence[float], *, unit_scale: bool = False) -> dict[str, Any]:
    """Mean of ``values`` with its 95 % Student t interval (df = n - 1).

    Args:
        values: one number per independent unit.
        unit_scale: scores on the rubric's scale: widen the interval to at least the Wilson
            interval of the mean over the n values, then clip it to [0, 1] (module docstring).

    Returns:
        ``{"mean": float | None, "interval": [low, high] | None, "n": len(values)}``: no mean
        for no value, no interval for fewer than two.
    """
    n = len(values)
    if n == 0:
        return {"mean": None, "interval": None, "n": 0}
    mean = sum(values) / n
    if n < 2:
        return {"mean": mean, "interval": None, "n": n}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    interval = _finish(mean, sd / math.sqrt(n), n - 1, n, unit_scale=unit_scale)
    return {"mean": mean, "interval": interval, "n": n}


def stratified_interval(
    per_task: Sequence[Sequence[float]], *, unit_scale: bool = False
) -> dict[str, Any]:
    """Mean over tasks of each task's mean, with the stratified 95 % t interval (module doc).

    Args:
        per_task: per task, the scores of its scored repeats (each list non-empty).
        unit_scale: as in `mean_interval` (Wilson over every episode, clip to [0, 1]).

    Returns:
        ``{"mean", "interval": [low, high] | None, "n": episodes}``; no interval when no task
        has two scored repeats (no within-task degree of freedom).
    """
    tasks = [list(v) for v in per_task if v]
    episodes = sum(len(v) for v in tasks)
    if not tasks:
        return {"mean": None, "interval": None, "n": 0}
    means = [sum(v) / len(v) for v in tasks]
    mean = sum(means) / len(means)
    df = episodes - len(tasks)
    if df < 1:
        return {"mean": mean, "interval": None, "n": episodes}
    pooled = sum((x - m) ** 2 for v, m in zip(tasks, means, strict=True) for x in v) / df
    se = math.sqrt(pooled * sum(1 / len(v) for v in tasks)) / len(tasks)
    interval = _finish(mean, se, df, episodes, unit_scale=unit_scale)
    return {"mean": mean, "interval": interval, "n": episodes}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. 2021 (eq. 1): ``1 - C(n-c, k) / C(n, k)``.

    Args:
        n: tries scored.
        c: tries that passed (0 <= c <= n).
        k: tries drawn (1 <= k <= n).

    Raises:
        ValueError: the counts are out of range.
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of Yao et al. 2024 (τ-bench): ``C(c, k) / C(n, k)``, all k tries pass.

    Args:
        n: tries scored.
        c: tries that passed (0 <= c <= n).
        k: tries drawn (1 <= k <= n).

    Raises:
        ValueError: the counts are out of range.
    """
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def _rate(values: Sequence[float]) -> dict[str, Any]:
    """Mean of per-unit shares in [0, 1] with its Wilson interval over the units."""
    if not values:
        return {"rate": None, "interval": None}
    rate = sum(values) / len(values)
    return {"rate": rate, "interval": list(wilson(rate, len(values)))}


def _scored(rankings: Sequence[Ranking]) -> dict[str, dict[str, list[float]]]:
    """Per variant and task, the scores of its scored episodes, in grading order."""
    out: dict[str, dict[str, list[float]]] = {}
    for ranking in rankings:
        for variant, score in (ranking.scores or {}).items():
            out.setdefault(variant, {}).setdefault(ranking.task_id, []).append(float(score))
    return out


def _not_scored(
    rankings: Sequence[Ranking],
    groups: Sequence[Group],
    ungraded: Sequence[Mapping[str, Any]],
    names: Sequence[str],
) -> dict[str, dict[str, int]]:
    """Per variant and reason, the episodes that are in no denominator."""
    out: dict[str, dict[str, int]] = {n: {} for n in names}
    scored = {(r.task_id, r.repeat, v) for r in rankings for v in r.scores or {}}
    failed = {(u["task_id"], u.get("repeat", 0)): str(u["reason"]) for u in ungraded}
    for group in groups:
        for variant, why in group.incomplete.items():
            counts = out.setdefault(variant, {})
            counts[why] = counts.get(why, 0) + 1
        failure = failed.get((group.task_id, group.repeat))
        if failure is None:
            continue
        reason = failure if failure.startswith(("judge", "fewer")) else "judge_" + failure
        for variant in group.variants:
            if (group.task_id, group.repeat, variant) in scored:
                continue  # a group of one result, scored alone
            counts = out.setdefault(variant, {})
            counts[reason] = counts.get(reason, 0) + 1
    return {v: dict(sorted(c.items())) for v, c in out.items()}


def summarise(
    rankings: Sequence[Ranking],
    groups: Sequence[Group],
    names: Sequence[str],
    *,
    repeats: int = 1,
    ungraded: Sequence[Mapping[str, Any]] = (),
    spread: str | None = None,
) -> dict[str, Any]:
    """Every variant's mean score, pass rate, pass@k and pass^k with intervals (module doc).

    Args:
        rankings: the judged groups (their ``scores``; a ranks-only judge scores nothing),
            groups of one result scored alone included.
        groups: every group of the job, for the runs not scored (``incomplete``).
        names: every variant, in the order to report them.
        repeats: K of ``--repeats`` (pass@k and pass^k when K > 1).
        ungraded: the groups the judge did not grade (``task_id``, ``repeat``, ``reason``).
        spread: ``tasks`` to keep tasks the interval's units whatever the repeats (a task's
            score is then the mean of its episodes): a job of one episode per task whose gate
            re-ran some tasks once more (`runner.submit.confirm`) is still judged over tasks;
            None decides by the data (below).

    Returns:
        ``{"level", "spread": "repeats"|"tasks", "methods": {"mean", "pass_rate",
        "pass_at_k", "pass_hat_k"}, "pass_score", "k", "variants": [{"variant", "mean",
        "interval": [low, high] | None, "episodes", "tasks", "pass_rate", "pass_interval",
        "pass_at_k", "pass_at_k_interval", "pass_hat_k", "pass_hat_k_interval",
        "short_tasks", "flaky": [task_id], "not_scored": {reason: n}}]}``; a figure that
        cannot be computed is None. ``spread`` says which interval the means carry: over
        repeats within tasks (a task scored twice or more) or over tasks.
    """
    scored = _scored(rankings)
    every = [s for per in scored.values() for values in per.values() for s in values]
    spread = spread or (
        "repeats" if any(len(v) > 1 for per in scored.values() for v in per.values()) else "tasks"
    )
    unit_scale = all(0.0 <= s <= 1.0 for s in every)
    missing = _not_scored(rankings, groups, ungraded, names)
    variants = []
    for name in names:
        per_task = scored.get(name, {})
        if spread == "repeats":
            figures = stratified_interval(list(per_task.values()), unit_scale=unit_scale)
        else:
            figures = mean_interval(
                [sum(v) / len(v) for v in per_task.values()], unit_scale=unit_scale
            )
        entry: dict[str, Any] = {"variant": name}
        entry.update(mean=figures["mean"], interval=figures["interval"])
        entry.update(episodes=sum(len(v) for v in per_task.values()), tasks=len(per_task))
        entry.update(_passes(per_task, repeats) if unit_scale else _no_passes())
        entry["flaky"] = sorted(t for t, v in per_task.items() if len(set(v)) > 1)
        entry["not_scored"] = missing.get(name, {})
        variants.append(entry)
    return {
        "level": LEVEL,
        "spread": spread,
        "methods": {
            "mean": METHODS[spread],
            "pass_rate": PASS_METHOD,
            "pass_at_k": "Chen et al. 2021 unbiased estimator, Wilson interval over tasks",
            "pass_hat_k": "Yao et al. 2024 (tau-bench), Wilson interval over tasks",
        },
        "pass_score": PASS_SCORE,
        "k": repeats,
        "variants": variants,
    }


def _no_passes() -> dict[str, Any]:
    return {
        "pass_rate": None,
        "pass_interval": None,
        "pass_at_k": None,
        "pass_at_k_interval": None,
        "pass_hat_k": None,
        "pass_hat_k_interval": None,
        "short_tasks": 0,
    }


def _passes(per_task: Mapping[str, Sequence[float]], k: int) -> dict[str, Any]:
    passed = {t: [s >= PASS_SCORE for s in v] for t, v in per_task.items()}
    rate = _rate([float(x) for p in passed.values() for x in p])
    out = _no_passes()
    out.update(pass_rate=rate["rate"], pass_interval=rate["interval"])
    if k > 1:
        full = {t: p for t, p in passed.items() if len(p) >= k}
        at = _rate([pass_at_k(len(p), sum(p), k) for p in full.values()])
        hat = _rate([pass_hat_k(len(p), sum(p), k) for p in full.values()])
        out.update(pass_at_k=at["rate"], pass_at_k_interval=at["interval"])
        out.update(pass_hat_k=hat["rate"], pass_hat_k_interval=hat["interval"])
        out["short_tasks"] = len(passed) - len(full)
    return out
