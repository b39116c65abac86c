"""The concurrency a submission runs at: what was asked, within the engine's and host's room.

The rule is `runner.backends.capacity.bound_concurrency` (memory budget, pids, threads, file
descriptors; the shares and per-run costs are documented there). `admit_concurrency` applies
it with the submission's per-run limits (`runner.episode.limits.limits_in_effect`) and the
engine's memory when an engine is at hand: the CLI asks the engine before it prints the plan;
`readmit` weighs again once the job's backend exists, when the plan was made without one
(then the plan and ``plan.json`` show the bound the runs actually had). A backend's
runs may have a warm pool (``SANDBOX_REPLAY_POOL``; `Backend.pool_size`: the Docker engine's)
whose spare sandboxes count in the same bound (`ConcurrencyBound.spares`, the pool's size in
the job).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runner.backends.base import Backend
from runner.backends.capacity import (
    ConcurrencyBound,
    HostResources,
    bound_concurrency,
    raise_nofile,
)
from runner.episode.limits import limits_in_effect
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.settings import Settings

log = get_logger(__name__)

__all__ = [
    "admit_concurrency",
    "close_backend",
    "engine_cpus",
    "engine_memory",
    "probe_engine",
    "readmit",
]


def engine_memory(backend: Backend) -> int | None:
    """The engine's memory in bytes, when ``backend`` can tell (else None, never raises)."""
    try:
        value = backend.engine_memory_bytes()
    except InfrastructureError as exc:
        log.warning("engine_memory_unknown", error=str(exc))
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def engine_cpus(backend: Backend) -> float | None:
    """The engine's CPU count, when ``backend`` can tell (else None, never raises)."""
    try:
        value = backend.engine_cpus()
    except InfrastructureError as exc:
        log.warning("engine_cpus_unknown", error=str(exc))
        return None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def admit_concurrency(
    asked: int,
    policy: Any,
    settings: Settings,
    *,
    engine: Backend | None = None,
) -> ConcurrencyBound:
    """The concurrency admitted for ``asked`` under the policy's (and settings') limits.

    Args:
        asked: ``--concurrency`` or the settings' default.
        policy: the loaded policy (its limits).
        settings: host settings (limit overrides).
        engine: the backend whose engine is asked (its memory, whether it is local, its own
            bounds, its warm pool's size), or None when no engine was asked (the memory bound
            is then unknown).

    A sandbox-seconds ceiling is no bound here: the budget clock shares it among the running
    sandboxes (`runner.submit.budgetclock`; it used to cap the runs at once at
    ceiling ÷ timeout, 19 of 128 asked under ``shadow``).
    """
    raise_nofile()
    limits = limits_in_effect(policy, settings)
    return bound_concurrency(
        asked,
        memory_mb=int(limits["memory_mb"]["value"]),
        pids_limit=int(limits["pids_limit"]["value"]),
        engine_memory_bytes=engine_memory(engine) if engine is not None else None,
        host=HostResources.read(),
        engine_is_local=engine.is_local if engine is not None else True,
        extra=engine.concurrency_bounds() if engine is not None else (),
        # the warm pool's size rule (0 for a backend without one; SANDBOX_REPLAY_POOL=0: off)
        pool=engine.pool_size if engine is not None and settings.pool else None,
    )


def readmit(plan: Any, backend: Backend, settings: Settings) -> Any:
    """``plan`` with its concurrency weighed again against ``backend``'s engine, if it was not.

    A plan whose memory bound is known is returned as it is (the engine was asked already).
    """
    bound: ConcurrencyBound | None = plan.capacity
    if bound is not None and all(b.runs is not None for b in bound.bounds if b.name == "memory"):
        return plan
    asked = bound.asked if bound is not None else plan.concurrency
    again = admit_concurrency(asked, plan.policy, settings, engine=backend)
    if again.admitted != plan.concurrency:
        log.info("concurrency_readmitted", asked=asked, admitted=again.admitted)
    return replace(plan, concurrency=again.admitted, capacity=again)


def probe_engine(make: Callable[[], Backend]) -> Backend | None:
    """The backend for the plan to ask its engine's memory; None when it is unusable.

    An unusable engine is not an error here: ``--dry-run`` still prints the plan (its memory
    bound unknown), and a real run fails when the job connects (exit 6). The job reuses the
    backend (the CLI's factory returns it).
    """
    try:
        return make()
    except InfrastructureError:
        return None


def close_backend(backend: Backend | None) -> None:
    """Close ``backend``'s connections (None is fine)."""
    if backend is not None:
        backend.close()
