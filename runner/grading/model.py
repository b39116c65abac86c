"""Values of tournament grading: the episodes of one task (a group) and a judge's ranking.

A group holds one `Result` per variant that ran the task; a judge turns it into a `Ranking`:
a listwise ranking where 1 is best and tied results share a rank (competition ranking:
1, 1, 3). Variant names are unique within a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.errors import GradingError

# Tool ids that are provider roles in a trace, not tools (docs/internals.md: trace lines).
_ROLES = frozenset({"model", "user"})


@dataclass(frozen=True)
class ToolCall:
    """One tool call an episode made.

    Attributes:
        tool: the tool id, e.g. ``ticket.get``.
        args: the call's arguments (JSON object).
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"tool", "args"}``."""
        return {"tool": self.tool, "args": dict(self.args)}


@dataclass(frozen=True)
class Result:
    """What one variant produced on one task.

    Attributes:
        variant: the variant's name.
        status: the episode status (``succeeded``, ``failed``, ``timeout``, ...).
        output: the workflow's output (any JSON value; None when it produced none).
        tool_calls: the tool calls in order (model and user turns excluded).
    """

    variant: str
    status: str
    output: Any = None
    tool_calls: tuple[ToolCall, ...] = ()

    @classmethod
    def from_trace(cls, variant: str, records: Iterable[Mapping[str, Any]]) -> Result:
        """Build from the parsed lines of an episode trace (``run``, ``call``..., ``end``).

        Args:
            variant: the variant that ran.
            records: trace lines as dicts, in file order.

        Raises:
            GradingError: the trace has no ``end`` line (the episode never finished).
        """
        calls: list[ToolCall] = []
        end: Mapping[str, Any] | None = None
        for record in records:
            kind = record.get("type")
            if kind == "call" and record.get("tool") not in _ROLES:
                args = record.get("args")
                calls.append(
                    ToolCall(str(record.get("tool")), args if isinstance(args, dict) else {})
                )
            elif kind == "end":
                end = record
        if end is None:
            raise GradingError(f"the trace of variant {variant!r} has no end line", variant=variant)
        return cls(variant, str(end.get("status")), end.get("output"), tuple(calls))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (what `module:function` and model judges see)."""
        return {
            "variant": self.variant,
            "status": self.status,
            "output": self.output,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
        }


@dataclass(frozen=True)
class Group:
    """The episodes of one task, graded together.

    Attributes:
        task_id: the task.
        results: one result per variant that ran the task (names unique).
        expected: the task's ``expected`` block (``output``, ``output_contains``,
            ``tool_calls``), or None.
        task_input: the task's ``input`` object, for judges that read it.
        repeat: which of the job's repeats (``submit --repeats K``: 0..K-1) these episodes are.
        incomplete: variant -> why it has no result here (its run's status: ``ceiling_reached``,
            ``infra_error``, ``interrupted``; ``not_run``; ``unreadable``): such a run is not
            scored, neither a pass nor a loss, and is counted in every verdict's denominator
            as an unknown outcome (`runner.grading.uncertainty`). Judges never see it.
    """

    task_id: str
    results: tuple[Result, ...]
    expected: Mapping[str, Any] | None = None
    task_input: Mapping[str, Any] | None = None
    repeat: int = 0
    incomplete: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [r.variant for r in self.results]
        if len(set(names)) != len(names):
            raise ValueError(f"task {self.task_id!r}: a variant appears twice in {names}")

    @property
    def variants(self) -> tuple[str, ...]:
        """Variant names in result order."""
        return tuple(r.variant for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: ``task_id``, ``repeat``, ``input``, ``expected``, results."""
        return {
            "task_id": self.task_id,
            "repeat": self.repeat,
            "input": dict(self.task_input) if self.task_input is not None else None,
            "expected": dict(self.expected) if self.expected is not None else None,
            "results": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class Ranking:
    """A judge's listwise verdict on one group.

    Attributes:
        task_id: the task.
        ranks: variant -> rank, 1 is best, ties share a rank (competition ranking).
        scores: variant -> score (higher is better) when the judge scored, else None.
        judge: the judge's name (``rubric``, ``module:function``, ``model:NAME``).
        detail: judge-specific data for the report (e.g. the model's raw answer; the order
            the judge saw the episodes in, ``order``).
        repeat: the group's repeat index.
    """

    task_id: str
    ranks: Mapping[str, int]
    scores: Mapping[str, float] | None = None
    judge: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    repeat: int = 0

    def ordered(self) -> list[str]:
        """Variant names best first (ties in name order)."""
        return sorted(self.ranks, key=lambda v: (self.ranks[v], v))

    def to_dict(self) -> dict[str, Any]:
        """Return ``{task_id, repeat, judge, ranking: [{variant, rank, score?}], detail}``."""
        ranking = []
        for variant in self.ordered():
            entry: dict[str, Any] = {"variant": variant, "rank": self.ranks[variant]}
            if self.scores is not None:
                entry["score"] = self.scores[variant]
            ranking.append(entry)
        return {
            "task_id": self.task_id,
            "repeat": self.repeat,
            "judge": self.judge,
            "ranking": ranking,
            "detail": dict(self.detail),
        }


def ranks_from_scores(scores: Mapping[str, float], *, places: int = 9) -> dict[str, int]:
    """Return competition ranks from scores (higher is better); equal scores tie.

    Scores equal when rounded to ``places`` decimals count as equal.

    Example: ``{"A": 0.5, "B": 1.0, "C": 1.0}`` gives ``{"B": 1, "C": 1, "A": 3}``.
    """
    rounded = {v: round(float(s), places) for v, s in scores.items()}
    return {v: 1 + sum(1 for other in rounded.values() if other > s) for v, s in rounded.items()}


def normalise_ranks(ranks: Mapping[str, float]) -> dict[str, int]:
    """Return competition ranks from any ranks where lower is better.

    Examples: ``{A: 1, B: 5}`` gives ``{A: 1, B: 2}``; ``{A: 2, B: 2, C: 7}`` gives
    ``{A: 1, B: 1, C: 3}``.
    """
    return {v: 1 + sum(1 for other in ranks.values() if other < r) for v, r in ranks.items()}


def check_covers(group: Group, names: Sequence[str], judge: str) -> None:
    """Check that a judge ranked exactly the group's variants.

    Raises:
        GradingError: a variant is missing or unknown (fields ``task_id``, ``judge``).
    """
    missing = sorted(set(group.variants) - set(names))
    unknown = sorted(set(names) - set(group.variants))
    if missing or unknown or len(names) != len(set(names)):
        raise GradingError(
            f"judge {judge} on task {group.task_id!r}: the ranking must name each variant once"
            f" (missing {missing}, unknown {unknown})",
            task_id=group.task_id,
            judge=judge,
        )
