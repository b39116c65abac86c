"""The ceilings and per-run limits in effect for a submission, each value with its source.

A purpose's ceiling (``replay``, ``judge``) is the policy's, overridden by the user's values
(flags or a job file: the user's win); `CeilingInEffect` keeps where each value came from, so
that the plan and the report can say it (``runs 5 (--ceiling-runs), usd 10 (policy shadow)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.errors import InputError
from runner.ledger import Ceiling
from runner.submit.options import DIMENSIONS, CeilingFlags

if TYPE_CHECKING:
    from runner.policy.loader import Policy

__all__ = ["CeilingInEffect", "ceiling_in_effect", "describe_limits", "figure"]


@dataclass(frozen=True)
class CeilingInEffect:
    """A purpose's ceiling after flags overrode the policy, with each value's source.

    Attributes:
        purpose: ``replay`` or ``judge``.
        ceiling: the limits enforced.
        sources: dimension -> ``policy NAME``, ``--ceiling-usd``, a job file name, ...
    """

    purpose: str
    ceiling: Ceiling
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{dimension: {"value", "source"}}`` for every bounded dimension."""
        limits = self.ceiling.to_dict()
        return {
            dim: {"value": limits[dim], "source": self.sources.get(dim, "")}
            for dim in DIMENSIONS
            if limits[dim] is not None
        }

    def describe(self) -> str:
        """``runs 5 (--ceiling-runs), usd 10 (policy shadow)`` or ``unbounded``."""
        parts = [f"{dim} {figure(v['value'])} ({v['source']})" for dim, v in self.to_json().items()]
        return ", ".join(parts) or "unbounded"


def figure(value: float) -> str:
    """A limit for people: ``5,000,000`` rather than ``5e+06``; ``0.5`` stays ``0.5``."""
    return f"{value:,}" if float(value).is_integer() and value >= 1e4 else f"{value:g}"


def describe_limits(limits: Mapping[str, Mapping[str, Any]]) -> str:
    """``timeout_s 300 (policy shadow), max_calls 50 (SANDBOX_REPLAY_MAX_CALLS), ...``."""
    return ", ".join(f"{name} {figure(v['value'])} ({v['source']})" for name, v in limits.items())


def ceiling_in_effect(purpose: str, policy: Policy, flags: CeilingFlags) -> CeilingInEffect:
    """Merge the policy's ceiling of ``purpose`` with user values (the user's win).

    Raises:
        InputError: a negative value (field named after the dimension).
    """
    base = policy.ceilings.for_purpose(purpose)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for dim in DIMENSIONS:
        value = getattr(base, dim)
        if value is not None:
            values[dim], sources[dim] = value, f"policy {policy.name}"
        if dim in flags.values:
            values[dim], sources[dim] = flags.values[dim], flags.sources.get(dim, "flag")
    try:
        return CeilingInEffect(purpose, Ceiling(**values), sources)
    except ValueError as exc:
        raise InputError(str(exc), field=f"ceilings.{purpose}") from None
