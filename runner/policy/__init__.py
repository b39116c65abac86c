"""Policy files: models, loader and the decisions they make about tools.

Public surface: `load_policy`, `Policy`, `PolicySpec` and its parts, `decide`.
"""

from runner.policy.decisions import decide, disposition_for
from runner.policy.loader import Policy, find_policy, load_policy, policy_from_spec
from runner.policy.models import Ceiling, Ceilings, Limits, PolicySpec, Price, ToolOverrides

__all__ = [
    "Ceiling",
    "Ceilings",
    "Limits",
    "Policy",
    "PolicySpec",
    "Price",
    "ToolOverrides",
    "decide",
    "disposition_for",
    "find_policy",
    "load_policy",
    "policy_from_spec",
]
