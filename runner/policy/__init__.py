"""Policy files: models, loader and the decisions they make about tools and calls.

Public surface: `load_policy`, `Policy`, `PolicySpec` and its parts (`ArgRule`: argument
rules, docs/policy-format.md), `decide` (a tool) and `decide_call` (a call: the tool, then the
argument rules with the sandbox's evaluator), `diff_policies` (``policy diff``). The load-time
gate that applies a policy to workflows is `runner.admission`'s.

May import: `runner.domain`, `runner.tracetools` (``policy diff`` reads traces),
`runner.resources`, `runner.wire.argrules` (the call-time evaluator, shared with the sandbox),
`runner.ledger` (pricing reads earlier runs), `runner.sdk`, `runner.errors` and pydantic /
PyYAML; never a provider, a backend or anything above.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562), for start-up speed: importing
# one module of this package must not load the others (`check`, `--help`).
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.policy.calldecision import CallVerdict, decide_call
    from runner.policy.decisions import decide, disposition_for
    from runner.policy.diff import PolicyDiff, diff_policies
    from runner.policy.loader import Policy, find_policy, load_policy, policy_from_spec
    from runner.policy.models import Ceiling, Ceilings, Limits, PolicySpec, Price, ToolOverrides
    from runner.policy.rules import ArgRule

__all__ = [
    "ArgRule",
    "CallVerdict",
    "Ceiling",
    "Ceilings",
    "Limits",
    "Policy",
    "PolicyDiff",
    "PolicySpec",
    "Price",
    "ToolOverrides",
    "decide",
    "decide_call",
    "diff_policies",
    "disposition_for",
    "find_policy",
    "load_policy",
    "policy_from_spec",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ArgRule": "runner.policy.rules",
        "CallVerdict": "runner.policy.calldecision",
        "Ceiling": "runner.policy.models",
        "Ceilings": "runner.policy.models",
        "Limits": "runner.policy.models",
        "Policy": "runner.policy.loader",
        "PolicyDiff": "runner.policy.diff",
        "PolicySpec": "runner.policy.models",
        "Price": "runner.policy.models",
        "ToolOverrides": "runner.policy.models",
        "decide": "runner.policy.decisions",
        "decide_call": "runner.policy.calldecision",
        "diff_policies": "runner.policy.diff",
        "disposition_for": "runner.policy.decisions",
        "find_policy": "runner.policy.loader",
        "load_policy": "runner.policy.loader",
        "policy_from_spec": "runner.policy.loader",
    },
)
