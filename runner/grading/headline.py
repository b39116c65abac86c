"""The verdict in one sentence: who wins, by how much, how sure (the report's ``verdict``).

The **leader** is the variant with the best mean score (`runner.grading.scores`; ties and a
judge without scores: the standings' order, best rating first); the **runner-up** the next.
How sure comes from the head-to-head win rate of that pair (`runner.grading.uncertainty`'s
statement: its 95 % interval over tasks, incomplete tasks counted as unknowns): the leader
**wins** when the statement says it is better. When the win rate cannot tell (within noise,
too few tasks) but the two mean scores' 95 % intervals are apart (the gate's FAIL rule,
`runner.grading.gate`), the leader wins **on these tasks** (``how_sure``
``better_on_these_tasks``): repeats showed the difference is no noise of the runs, the tasks
are too few to say it holds beyond them. Otherwise there is no clear winner and the sentence
says why (within noise, too few tasks, never compared).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.domain.words import counted

__all__ = ["headline"]

_FLIP = {"better": "worse", "worse": "better"}


def _fmt(entry: Mapping[str, Any]) -> str:
    mean, interval = entry.get("mean"), entry.get("interval")
    if mean is None:
        return "not scored"
    return f"{mean:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def _pair(statements: Sequence[Mapping[str, Any]], a: str, b: str) -> dict[str, Any] | None:
    """The statement on (a, b) oriented from a's side, or None."""
    for s in statements:
        if s.get("a") == a and s.get("b") == b:
            return dict(s)
        if s.get("a") == b and s.get("b") == a:
            verdict = str(s.get("verdict"))
            return {**s, "a": a, "b": b, "verdict": _FLIP.get(verdict, verdict)}
    return None


def headline(
    scores: Mapping[str, Any] | None,
    statements: Sequence[Mapping[str, Any]],
    order: Sequence[str],
    win_rates: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Who wins, by how much, how sure (module docstring).

    Args:
        scores: `runner.grading.scores.summarise`'s result, or None.
        statements: the pairwise verdicts (`runner.grading.uncertainty.statements`).
        order: the variants in standings order (best rating first).
        win_rates: `bootstrap`'s ``win_rates`` ({a: {b: {"rate", "low", "high", "bounds"}}}).

    Returns:
        ``{"winner": name | None, "leader", "runner_up", "difference", "how_sure":
        better|better_on_these_tasks|within_noise|too_few_tasks|not_compared|worse|one_variant,
        "win_rate": {"rate",
        "interval": [low, high]} | None, "text"}``.
    """
    by_name = {v["variant"]: v for v in (scores or {}).get("variants") or []}
    names = list(order) or list(by_name)
    rank = {n: i for i, n in enumerate(names)}
    ranked = sorted(
        names,
        key=lambda n: (-(by_name.get(n, {}).get("mean") or float("-inf")), rank[n]),
    )
    if not ranked:
        return _out(None, None, None, None, "one_variant", None, "no variant was run")
    leader = ranked[0]
    lead = by_name.get(leader, {})
    if len(ranked) < 2:
        text = f"one variant, nothing to compare: {leader} mean score {_fmt(lead)}"
        return _out(None, leader, None, None, "one_variant", None, text)
    runner_up = ranked[1]
    second = by_name.get(runner_up, {})
    diff = (
        lead["mean"] - second["mean"]
        if lead.get("mean") is not None and second.get("mean") is not None
        else None
    )
    statement = _pair(statements, leader, runner_up) or {"verdict": "not_compared"}
    sure = str(statement["verdict"])
    rate = ((win_rates or {}).get(leader) or {}).get(runner_up) or {}
    interval = rate.get("bounds") or (
        [rate["low"], rate["high"]] if rate.get("low") is not None else None
    )
    share: float | None = rate.get("rate")
    win = {"rate": share, "interval": interval} if share is not None else None
    means = f"mean score {_fmt(lead)} against {runner_up} {_fmt(second)}" + (
        f", {diff:+.2f}" if diff is not None else ""
    )
    ranks = (
        f"{leader} ranks above {runner_up} in {100 * share:.0f}% of their comparisons"
        f" [{100 * interval[0]:.0f}%, {100 * interval[1]:.0f}%]"
        if share is not None and interval is not None
        else ""
    )
    if sure == "better":
        text = f"{leader} wins: {means}; {ranks}"
        return _out(leader, leader, runner_up, diff, sure, win, text)
    apart = lead.get("interval") and second.get("interval")
    if apart and lead["interval"][0] > second["interval"][1]:
        count = lead.get("tasks")
        tasks = counted(count, "task") if isinstance(count, int) else "tasks"
        text = (
            f"{leader} wins on these {tasks}: {means}, the 95% intervals"
            " are apart" + (f"; {ranks}" if ranks else "") + "; too few tasks to say it holds"
            " on others"
        )
        return _out(leader, leader, runner_up, diff, "better_on_these_tasks", win, text)
    why = {
        "within_noise": "the win rate's 95% interval includes 50%; more tasks or --repeats"
        " would tell",
        "too_few_tasks": "fewer than 5 tasks compared is too few to tell",
        "not_compared": "the two were never graded on one task",
        "worse": "its rankings against it say otherwise",
    }.get(sure, sure)
    text = f"no clear winner: {leader} leads, {means}" + (f"; {ranks}" if ranks else "")
    return _out(None, leader, runner_up, diff, sure, win, f"{text}; {why}")


def _out(
    winner: str | None,
    leader: str | None,
    runner_up: str | None,
    difference: float | None,
    how_sure: str,
    win_rate: Mapping[str, Any] | None,
    text: str,
) -> dict[str, Any]:
    return {
        "winner": winner,
        "leader": leader,
        "runner_up": runner_up,
        "difference": difference,
        "how_sure": how_sure,
        "win_rate": dict(win_rate) if win_rate is not None else None,
        "text": text,
    }
