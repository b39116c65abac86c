"""The order a judge sees a group's episodes in: shuffled (seeded), and for a model, two orders.

A listwise judge reads the candidates in some order, and a model judge may prefer a position
(the first, the last) whatever the candidates are. So the variants are never shown in plan
order: each group is shown in an order drawn from ``random.Random`` seeded with the job's seed,
the task id and the repeat (`shown_order`; the same seed gives the same orders, and the report
records the seed and every order). A judge that declares itself ``order_sensitive`` (the
``model:`` judge) ranks the group twice, in the drawn order and in its reverse, so that every
candidate changes position (all but the middle one of an odd group); when the two rankings
differ, the disagreement is recorded and the group's ranking is the one of the mean ranks
(`judge_in_orders`). Rubric and function judges rank once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runner.grading.model import Group, Ranking

__all__ = ["judge_in_orders", "mean_ranks", "shown_order"]


def shown_order(group: Group, seed: int) -> tuple[str, ...]:
    """The variants of ``group`` in the order the judge sees them.

    Args:
        group: the group (its ``task_id`` and ``repeat`` pick the draw).
        seed: the job's grading seed.

    Returns:
        A permutation of ``group.variants``: the same for the same seed, task and repeat.
    """
    names = list(group.variants)
    random.Random(f"{seed}/{group.task_id}/{group.repeat}").shuffle(names)  # noqa: S311
    return tuple(names)


def _in_order(group: Group, order: Sequence[str]) -> Group:
    by_name = {r.variant: r for r in group.results}
    return replace(group, results=tuple(by_name[name] for name in order))


def mean_ranks(rankings: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Competition ranks of the mean rank of each variant over ``rankings`` (lower is better).

    Example: ``[{A: 1, B: 2}, {A: 2, B: 1}]`` gives ``{A: 1, B: 1}`` (a tie).
    """
    names = list(rankings[0])
    means = {n: sum(r[n] for r in rankings) / len(rankings) for n in names}
    return {n: 1 + sum(1 for other in means.values() if other < m) for n, m in means.items()}


def judge_in_orders(group: Group, judge: Callable[[Group], Ranking], seed: int) -> Ranking:
    """Rank ``group`` with ``judge``, shown in the seeded order (and reversed, if it matters).

    Args:
        group: the episodes of one task and repeat.
        judge: ``Group -> Ranking``; an ``order_sensitive`` attribute that is true makes it
            rank the group twice.
        seed: the job's grading seed.

    Returns:
        The ranking, its ``repeat`` set and ``detail`` extended with ``order`` (the variants as
        shown); for two orders also ``orders``, ``rankings`` (one per order), ``agree`` and
        ``answers`` (each call's own detail, e.g. the model's answer and its cost).

    Raises:
        GradingError: the judge failed on either order.
        CeilingReached: the judge ceiling has no room for a call.
    """
    order = shown_order(group, seed)
    first = judge(_in_order(group, order))
    if not getattr(judge, "order_sensitive", False) or len(order) < 2:
        return replace(first, repeat=group.repeat, detail={**first.detail, "order": list(order)})
    reverse = tuple(reversed(order))
    second = judge(_in_order(group, reverse))
    agree = dict(first.ranks) == dict(second.ranks)
    ranks = dict(first.ranks) if agree else mean_ranks([first.ranks, second.ranks])
    detail: dict[str, Any] = {
        "order": list(order),
        "orders": [list(order), list(reverse)],
        "rankings": [dict(first.ranks), dict(second.ranks)],
        "agree": agree,
        "answers": [dict(first.detail), dict(second.detail)],
    }
    return Ranking(group.task_id, ranks, judge=first.judge, detail=detail, repeat=group.repeat)
