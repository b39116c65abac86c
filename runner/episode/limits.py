"""The per-run limits in effect: the policy's, overridden by settings, checked against the engine.

SPEC.md: "Resource limits come from the policy; settings and CLI flags override them for a run;
the report shows the limits in effect." `limits_in_effect` is that merge with each value's
source; `resource_limits` the `ResourceLimits` a sandbox gets; `check_engine_limits` the one
bound that depends on the engine (its CPU count). The static bounds are validated when the
policy and the settings load (`runner.policy.models.LIMIT_BOUNDS`).
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from runner.backends.base import Backend, ResourceLimits
from runner.errors import InputError
from runner.settings import Settings

if TYPE_CHECKING:
    from runner.policy.loader import Policy

__all__ = [
    "LIMIT_NAMES",
    "check_engine_limits",
    "limits_in_effect",
    "max_rate_limit_wait_s",
    "resource_limits",
]

LIMIT_NAMES = tuple(f.name for f in fields(ResourceLimits))


def limits_in_effect(policy: Policy, settings: Settings) -> dict[str, dict[str, Any]]:
    """Every per-run limit in effect with where it came from (the report shows this).

    Returns:
        ``{name: {"value", "source"}}`` in `ResourceLimits` order; ``source`` is
        ``SANDBOX_REPLAY_<NAME>`` for a setting, ``policy NAME`` for the policy's value and
        ``default`` for a limit neither sets.
    """
    base = ResourceLimits()
    policy_limits = getattr(policy, "limits", None)
    out: dict[str, dict[str, Any]] = {}
    for name in LIMIT_NAMES:
        value = getattr(settings, name, None)
        source = f"SANDBOX_REPLAY_{name.upper()}"
        if value is None and policy_limits is not None:
            value = getattr(policy_limits, name, None)
            source = f"policy {getattr(policy, 'name', '?')}"
        if value is None:
            value, source = getattr(base, name), "default"
        out[name] = {"value": value, "source": source}
    return out


def check_engine_limits(backend: Backend, policy: Policy, settings: Settings) -> None:
    """Refuse, before any run, a limit the engine itself would refuse (``cpus`` above its CPUs).

    The static bounds are checked when the policy and the settings load
    (`runner.policy.models.LIMIT_BOUNDS`); this is the one that depends on the engine.

    Raises:
        InputError: ``cpus`` is more than the engine's CPU count (field ``limits.cpus`` or the
            setting's name, file the policy's source).
        InfrastructureError: the engine could not be asked.
    """
    available = backend.engine_cpus()  # None: a backend that cannot tell bounds nothing
    cpus = limits_in_effect(policy, settings)["cpus"]
    if available is None or cpus["value"] <= available:
        return
    from_setting = cpus["source"].startswith("SANDBOX_REPLAY_")
    raise InputError(
        f"{cpus['value']:g} is more than the {available:g} CPUs the engine has (Docker: "
        f"'Range of CPUs is from 0.01 to {available:.2f}'); lower it",
        file="environment" if from_setting else str(getattr(policy, "source", "policy")),
        field=cpus["source"] if from_setting else "limits.cpus",
    )


def resource_limits(policy: Policy, settings: Settings) -> ResourceLimits:
    """Return the limits in effect: the policy's, each overridden by a set setting."""
    values = {k: v["value"] for k, v in limits_in_effect(policy, settings).items()}
    return ResourceLimits(**values)


def max_rate_limit_wait_s(policy: Policy) -> float:
    """The policy's ``rate_limits.max_wait_s``: the longest a run may wait on rate limits.

    0 for a policy without rate limits (one built in code).
    """
    value = getattr(getattr(policy, "rate_limits", None), "max_wait_s", 0.0)
    return float(value) if isinstance(value, int | float) else 0.0
