"""What a policy decides about one call: its tool resolvable or not, then its argument rules.

Two layers, in the order the product applies them:

1. structural (load time, `runner.policy.decisions.decide`): a tool of a denied effect class or
   one a ``tools:`` override removes is absent from the registry; a call of it cannot be made
   (``unresolvable``, the rule that removed it named);
2. argument rules (call time, `runner.wire.argrules.RuleSet.decide`, the very function the
   runtime's guard calls in the sandbox): ``allowed`` or ``denied``, the rule named.

`decide_call` is the one function ``policy diff`` decides recorded calls with; the sandbox
makes the second decision with the same evaluator and the same rules (the manifest's
``policy.rules``), so a recorded call is decided here as it would be decided at call time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from runner.domain.registry import Denial, ToolSpec
from runner.policy.loader import Policy
from runner.policy.rules import ArgRule
from runner.sdk import Effect

__all__ = ["CallVerdict", "conditional_rules", "decide_call", "recorded_tool"]

Outcome = Literal["allowed", "denied", "unresolvable"]


@dataclass(frozen=True)
class CallVerdict:
    """A policy's verdict on one call.

    Attributes:
        outcome: ``allowed``, ``denied`` (an argument rule refused it at call time) or
            ``unresolvable`` (the tool is absent from the policy's registry).
        rule: the rule that decided: an argument rule's name, a structural rule
            (``deny effect unsafe``), or None when nothing but the default applied.
        reason: one line saying why.
        matched: True when an argument rule's conditions held (what counts as the rule being
            used); False otherwise.
    """

    outcome: Outcome
    rule: str | None
    reason: str
    matched: bool = False

    @property
    def allowed(self) -> bool:
        """True when the call goes ahead."""
        return self.outcome == "allowed"

    def to_json(self) -> dict[str, Any]:
        """``{outcome, rule, reason}``."""
        return {"outcome": self.outcome, "rule": self.rule, "reason": self.reason}


def recorded_tool(tool_id: str, effect: str | None) -> ToolSpec:
    """A `ToolSpec` of a recorded call: its id and the effect class the trace recorded.

    A call recorded without an effect class (or with an unknown one) is ``unsafe``: fail closed.
    """
    try:
        known = Effect(effect) if effect is not None else Effect.UNSAFE
    except ValueError:
        known = Effect.UNSAFE
    return ToolSpec(
        id=tool_id,
        effect=known,
        declared_effect=effect if effect == known.value else None,
        description="",
        schema={},
        schema_hash="",
        module=None,
        qualname=None,
        file="(recorded call)",
        line=None,
        origin="trace",
    )


def decide_call(policy: Policy, tool_id: str, effect: str | None, args: Any) -> CallVerdict:
    """Decide one call of ``tool_id`` (effect class ``effect``) with ``args`` under ``policy``.

    Args:
        policy: the policy.
        tool_id: the tool called.
        effect: its effect class as recorded (None: ``unsafe``).
        args: the call's arguments, a JSON value.

    Returns:
        The verdict: structural first, then the argument rules (module docstring).
    """
    tool = recorded_tool(tool_id, effect)
    decision = policy.decide(tool)
    if not decision.allowed:
        return CallVerdict("unresolvable", decision.rule, Denial(tool, decision).message())
    by_rules = policy.rules.decide(tool_id, args)
    return CallVerdict(
        "allowed" if by_rules.allowed else "denied",
        by_rules.rule,
        by_rules.reason,
        by_rules.matched,
    )


def conditional_rules(policy: Policy, tool_id: str) -> list[ArgRule]:
    """The argument rules of ``policy`` that target ``tool_id`` (``check`` shows them)."""
    targeting = set(policy.rules.for_tool(tool_id).names())
    return [rule for rule in policy.spec.rules if rule.name in targeting]
