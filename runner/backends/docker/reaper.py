"""The Docker reaper: remove leftover containers of dead owners, keeping what the engine recorded.

A container whose owner (host id, pid, start time: `runner.backends.labels`) is dead on this
host is a leftover of a crashed orchestrator. Before removing it the reaper inspects it and
reads ``State.StartedAt`` / ``State.FinishedAt``: the seconds the run really used, which the
ledger charges instead of the run's reservation (`runner.episode.reaping`). A container
still running is charged until its removal; one created but never started, 0 s. When the
inspect fails (the container went away meanwhile) the time is unknown (None).

A container labelled with another ledger (another state directory: several projects or CI
jobs on one engine) is left for that ledger's own commands, which can settle it: removing it
here would lose its measurement. Only when it has been idle (finished, or started while still
running) for `FOREIGN_GRACE_S` is it removed anyway, so that nothing is left behind forever.

Only the inspect and the remove are engine calls here; both are idempotent and retried on
transient errors (`runner.backends.docker.client.retrying`). A container of a live owner, of
another host or without owner labels is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from runner.backends import labels as L
from runner.backends.base import Reaped
from runner.backends.docker.client import retrying
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["engine_time", "reap_dead", "run_seconds"]

_NEVER = "0001-01-01"  # the engine's zero time: not started / not finished
FOREIGN_GRACE_S = 24 * 3600.0


def engine_time(text: Any) -> float | None:
    """Epoch seconds of an engine timestamp (RFC 3339, nanoseconds), or None for zero/invalid.

    ``2026-12-01T08:57:00.123456789Z`` -> 1796115420.123456; the engine's zero time
    ``0001-01-01T00:00:00Z`` (never happened) and anything unparseable -> None.
    """
    if not isinstance(text, str) or not text or text.startswith(_NEVER):
        return None
    value = text.strip()
    zone = ""
    if value.endswith("Z"):
        value, zone = value[:-1], "+00:00"
    else:
        for sign in ("+", "-"):
            cut = value.rfind(sign)
            if cut > value.find("T") > 0:
                value, zone = value[:cut], value[cut:]
                break
    if "." in value:
        whole, fraction = value.split(".", 1)
        value = f"{whole}.{fraction[:6].ljust(6, '0')}"
    try:
        parsed = datetime.fromisoformat(value + zone)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def run_seconds(state: Mapping[str, Any], now: float) -> float | None:
    """Seconds a container ran by its ``State`` (see the module docstring), or None.

    Args:
        state: ``State`` of ``inspect_container``.
        now: epoch seconds of the removal (for a container still running).
    """
    started = engine_time(state.get("StartedAt"))
    if started is None:
        return 0.0 if isinstance(state.get("StartedAt"), str) else None
    finished = engine_time(state.get("FinishedAt"))
    if finished is None or state.get("Running"):
        finished = now
    return round(max(0.0, finished - started), 3)


def _idle_s(state: Mapping[str, Any], now: float) -> float:
    """Seconds since the container last did anything (finished, else started); inf unknown."""
    last = engine_time(state.get("FinishedAt"))
    if last is None or state.get("Running"):
        last = engine_time(state.get("StartedAt"))
    return now - last if last is not None else float("inf")


def reap_dead(
    api: Any,
    containers: list[dict[str, Any]],
    this_host: str,
    *,
    ledger: str | None = None,
    clock: Callable[[], float] = time.time,
) -> list[Reaped]:
    """Inspect and remove the containers of ``containers`` whose owner is dead on this host.

    Args:
        api: the low-level client (``inspect_container``, ``remove_container``).
        containers: ``containers(all=True)`` summaries of this project's containers.
        this_host: this host's id (`runner.backends.labels.host_id`).
        ledger: the caller's ledger id; a container of another ledger is kept while it has
            been idle less than `FOREIGN_GRACE_S`.
        clock: epoch seconds now (injected for tests).

    Returns:
        The removed containers with their engine-recorded run time.
    """
    removed: list[Reaped] = []
    for summary in containers:
        found = summary.get("Labels") or {}
        owner = L.owner_from_labels(found)
        if owner is None or not L.owner_is_dead(owner, this_host=this_host):
            continue
        names = summary.get("Names") or [summary["Id"][:12]]
        name = str(names[0]).lstrip("/")
        foreign = found.get(L.LEDGER) not in (None, ledger)
        seconds: float | None = None
        try:
            info = retrying(f"inspect {name}", api.inspect_container, summary["Id"])
            state = info.get("State") or {}
            now = clock()
            if foreign and _idle_s(state, now) < FOREIGN_GRACE_S:
                log.debug("reap_left_for_its_ledger", container=name, ledger=found.get(L.LEDGER))
                continue
            seconds = run_seconds(state, now)
        except InfrastructureError as exc:  # gone meanwhile: its time is unknown
            log.info("reap_inspect_failed", container=name, error=str(exc))
        try:
            retrying(f"remove {name}", api.remove_container, summary["Id"], force=True)
        except InfrastructureError as exc:
            if exc.fields.get("status") != 404:
                log.warning("reap_failed", container=name, error=str(exc))
                continue
        removed.append(
            Reaped(
                name=name,
                run_id=found.get(L.RUN),
                labels={str(k): str(v) for k, v in found.items()},
                sandbox_s=seconds,
            )
        )
        log.info("container_reaped", container=name, owner=owner.label(), sandbox_s=seconds)
    return removed
