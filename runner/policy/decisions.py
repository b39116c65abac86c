"""What a policy decides about one tool: present or absent, and if present, executed or recorded.

Order of the rules (the first that applies decides):

1. ``tools.deny`` matches: absent (rule ``deny "<glob>"``).
2. ``tools.allow`` is non-empty and neither it nor ``unsafe_allow`` matches: absent
   (rule ``not in allow list``).
3. the effect class is in ``deny_effects``: present only when ``unsafe_allow`` matches (rule
   ``unsafe_allow "<glob>"``), else absent (rule ``deny effect <class>``; a matching ``allow``
   is noted: it cannot widen).
4. otherwise present (rule ``allow effect <class>``).

Disposition of a present tool, by mode: ``shadow`` executes ``pure`` and ``local`` tools and
serves everything else from recordings (``read`` from the task's observations; an
``unsafe_allow``-ed tool too: its code never runs); ``reproduce`` executes only ``pure`` tools.
A tool without code (from a tool manifest) is always ``recorded``.
"""

from __future__ import annotations

from runner.domain.registry import Decision, Disposition, ToolSpec
from runner.policy.models import PolicySpec, first_match
from runner.sdk import Effect

__all__ = ["decide", "disposition_for"]

_EXECUTED = {
    "shadow": frozenset({Effect.PURE, Effect.LOCAL}),
    "reproduce": frozenset({Effect.PURE}),
}


def disposition_for(mode: str, effect: Effect, has_code: bool) -> Disposition:
    """``execute`` or ``recorded`` for a tool that the policy lets in.

    Raises:
        KeyError: an unknown mode.
    """
    if has_code and effect in _EXECUTED[mode]:
        return "execute"
    return "recorded"


def decide(spec: PolicySpec, source: str, tool: ToolSpec) -> Decision:
    """Decide whether ``tool`` is present under ``spec`` and how it is served.

    Args:
        spec: the policy.
        source: where the policy came from, as shown in diagnostics (``policies/shadow.yaml``).
        tool: the tool.

    Returns:
        The decision with the rule that made it.
    """
    overrides = spec.tools
    denied_by = first_match(tool.id, overrides.deny)
    if denied_by is not None:
        return Decision(False, None, f'deny "{denied_by}"', source)
    widened_by = first_match(tool.id, overrides.unsafe_allow)
    allowed_by = first_match(tool.id, overrides.allow)
    if overrides.allow and allowed_by is None and widened_by is None:
        return Decision(False, None, "not in allow list", source)
    effect_label = tool.effect.value
    if tool.effect in spec.deny_effects:
        if widened_by is None:
            rule = f"deny effect {effect_label}"
            if allowed_by is not None:
                rule += f'; allow "{allowed_by}" cannot widen it, use unsafe_allow'
            return Decision(False, None, rule, source)
        disposition = "recorded" if spec.mode == "shadow" else _mode(spec, tool)
        return Decision(True, disposition, f'unsafe_allow "{widened_by}"', source)
    return Decision(True, _mode(spec, tool), f"allow effect {effect_label}", source)


def _mode(spec: PolicySpec, tool: ToolSpec) -> Disposition:
    return disposition_for(spec.mode, tool.effect, tool.has_code)
