"""The concurrency a submission runs at: what was asked, within the engine's and host's room.

The rule is `runner.backends.capacity.bound_concurrency` (memory budget, pids, threads, file
descriptors; the shares and per-run costs are documented there). `admit_concurrency` applies
it with the submission's per-run limits (`runner.episode.limits.limits_in_effect`) and the
engine's memory when an engine is at hand: the CLI asks the engine before it prints the plan;
`readmit` weighs again once the job's backend exists, when the plan was made without one
(then the plan and ``plan.json`` show the bound the runs actually had). The Docker engine's
runs have a warm pool (``SANDBOX_REPLAY_POOL``, `runner.backends.docker.pooled`) whose spare
sandboxes count in the same bound (`ConcurrencyBound.spares`, the pool's size in the job).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runner.backends.capacity import (
    ConcurrencyBound,
    HostResources,
    backend_bounds,
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


def engine_memory(backend: Any) -> int | None:
    """The engine's memory in bytes, when ``backend`` can tell (else None, never raises)."""
    ask = getattr(backend, "engine_memory_bytes", None)
    if not callable(ask):
        return None
    try:
        value = ask()
    except InfrastructureError as exc:
        log.warning("engine_memory_unknown", error=str(exc))
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def engine_cpus(backend: Any) -> float | None:
    """The engine's CPU count, when ``backend`` can tell (else None, never raises)."""
    ask = getattr(backend, "engine_cpus", None)
    if not callable(ask):
        return None
    try:
        value = ask()
    except InfrastructureError as exc:
        log.warning("engine_cpus_unknown", error=str(exc))
        return None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _pool(engine: Any, settings: Settings) -> Callable[[int], int] | None:
    """The warm pool's size rule when ``engine``'s runs are pooled, else None.

    Pooled: the Docker engine (``name`` ``docker``), or a backend that says it pools
    (``warm_pool``: the namespace backend's zygote sandboxes; `runner.backends.docker.pooled.
    pooled_backend` pools nothing else), with the pool on (``SANDBOX_REPLAY_POOL``).
    """
    pools = getattr(engine, "name", None) == "docker" or getattr(engine, "warm_pool", 0) is True
    if not settings.pool or not pools:
        return None
    # imported on use, not at module top: start-up speed (the docker SDK, loaded already by
    # the Docker engine asked here)
    from runner.backends.docker.pool import pool_size

    return pool_size


def _is_local(backend: Any) -> bool:
    address = str(getattr(backend, "address", "") or "")
    return not address or address.startswith(("unix://", "npipe://", "/"))


def admit_concurrency(
    asked: int,
    policy: Any,
    settings: Settings,
    *,
    engine: Any = None,
) -> ConcurrencyBound:
    """The concurrency admitted for ``asked`` under the policy's (and settings') limits.

    Args:
        asked: ``--concurrency`` or the settings' default.
        policy: the loaded policy (its limits).
        settings: host settings (limit overrides).
        engine: a backend that may tell ``engine_memory_bytes`` (and an ``address``), or None
            when no engine was asked (the memory bound is then unknown).

    A sandbox-seconds ceiling is no bound here: the budget clock shares it among the running
    sandboxes (`runner.submit.budgetclock`; issue 25: it used to cap the runs at once at
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
        engine_is_local=_is_local(engine),
        extra=backend_bounds(engine),
        pool=_pool(engine, settings),
    )


def readmit(plan: Any, backend: Any, settings: Settings) -> Any:
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


def probe_engine(settings: Settings, make: Callable[[], Any] | None = None) -> Any:
    """The backend for the plan to ask its engine's memory; None when it is unusable.

    ``make`` makes it (default: Docker from the settings). An unusable engine is not an error
    here: ``--dry-run`` still prints the plan (its memory bound unknown), and a real run fails
    when the job connects (exit 6). The job reuses the backend (the CLI's factory returns it).
    """
    try:
        if make is not None:
            return make()
        # imported here: docker costs ~0.14 s to import, and ``check``/``--help`` need none of it
        from runner.backends.docker import DockerBackend

        return DockerBackend.from_settings(settings)
    except InfrastructureError:
        return None


def close_backend(backend: Any) -> None:
    """Close ``backend``'s connections, if it has any (None is fine)."""
    close = getattr(backend, "close", None)
    if callable(close):
        close()
