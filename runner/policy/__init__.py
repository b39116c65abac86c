"""Policy files: models, loader, the decisions they make about tools, and the eligibility gate.

Public surface: `load_policy`, `Policy`, `PolicySpec` and its parts, `decide`; the load-time
gate that ``check``, ``submit`` and ``run`` pass (`check_eligibility`; ``run`` and ``submit``
admit through `runner.episode.toolmanifest.admission`, which also describes the tools in a sandbox).

May import: `runner.domain`, `runner.resources`, `runner.sdk`, `runner.errors` and pydantic /
PyYAML; never a backend, the ledger or anything above (the gate starts no sandbox).
"""

from runner.policy.decisions import decide, disposition_for
from runner.policy.eligibility import EligibilityReport, check_eligibility
from runner.policy.loader import Policy, find_policy, load_policy, policy_from_spec
from runner.policy.models import Ceiling, Ceilings, Limits, PolicySpec, Price, ToolOverrides

__all__ = [
    "Ceiling",
    "Ceilings",
    "EligibilityReport",
    "Limits",
    "Policy",
    "PolicySpec",
    "Price",
    "ToolOverrides",
    "check_eligibility",
    "decide",
    "disposition_for",
    "find_policy",
    "load_policy",
    "policy_from_spec",
]
