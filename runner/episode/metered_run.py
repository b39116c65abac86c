"""Metering of one-off runs (``record``, ``reproduce``): one ledger job, one run, one charge.

``record`` charges its run under purpose ``live``; ``reproduce`` under ``replay`` (it never
charges ``live``: SPEC.md, issue 6). The run is reserved before it starts (against the
policy's ceiling of that purpose) and settled with the episode's actual spend when it ends;
a run that never started is released, so nothing is charged for it.

A run's sandbox seconds are charged from container start until after its teardown, so its
reservation (`run_sandbox_s`) is the effective timeout (a settings override wins over the
policy) plus the host's grace past the deadline (`RUN_GRACE_S`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from runner.domain.ids import timestamped_ids
from runner.episode.driver import (
    KILL_DRAIN_S,
    MIN_WRITE_S,
    POLL_S,
    SHUTDOWN_GRACE_S,
)
from runner.episode.limits import max_rate_limit_wait_s, resource_limits
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger, Purpose, run_key
from runner.settings import Settings

# Seconds a run may be charged past its timeout: the deadline is checked once a poll, a write
# past it still gets MIN_WRITE_S, the killed sandbox's output is drained up to KILL_DRAIN_S and
# its exit awaited up to SHUTDOWN_GRACE_S (container removal is not bounded by the host).
RUN_GRACE_S = POLL_S + MIN_WRITE_S + KILL_DRAIN_S + SHUTDOWN_GRACE_S


def run_sandbox_s(policy: Any, settings: Settings) -> float:
    """Return the sandbox seconds to reserve for one run, in seconds.

    Args:
        policy: the policy (its ``limits.timeout_s``).
        settings: host settings; a set ``timeout_s`` overrides the policy's.

    Returns:
        The effective timeout, plus the policy's longest rate-limit wait (it does not count
        against the timeout: `runner.providers.ratelimit`), plus `RUN_GRACE_S`.
    """
    timeout_s = float(resource_limits(policy, settings).timeout_s)
    return timeout_s + max_rate_limit_wait_s(policy) + RUN_GRACE_S


@dataclass
class MeteredRun:
    """The ledger entries of one run; `finish` settles them from the trace's end line.

    Attributes:
        ledger: the open ledger.
        guard: the job's ceiling guard.
        job_id: the job (``record-…`` or ``reproduce-…``).
        key: the run's idempotency key.
        reservation_key: the run's charge.
    """

    ledger: Ledger
    guard: CeilingGuard
    job_id: str
    key: str
    reservation_key: str

    def finish(
        self,
        status: str,
        end: dict[str, Any],
        trace_path: str,
        *,
        model_spend: bool = True,
        calls_charged: Amount | None = None,
    ) -> None:
        """Settle the charge and close the run with the episode's meter totals.

        Args:
            status: the episode status.
            end: the trace's end line (its ``meter``).
            trace_path: the trace written.
            model_spend: False when model turns were served from a trace (reproduce): they
                cost nothing, only the run and its sandbox seconds are charged.
            calls_charged: what the run's model calls were already charged, each on its own
                reservation (a `MeteredProvider`): the run's charge is then the run and its
                sandbox seconds, and the run row shows these tokens and USD (counted once).
        """
        meter = end.get("meter") or {}
        sandbox_s = float(meter.get("sandbox_s") or 0.0)
        if calls_charged is not None:
            run_charge = Amount(runs=1, sandbox_s=sandbox_s)
            actual = Amount(
                runs=1,
                tokens_in=calls_charged.tokens_in,
                tokens_out=calls_charged.tokens_out,
                usd=calls_charged.usd,
                sandbox_s=sandbox_s,
            )
        else:
            actual = Amount(
                runs=1,
                tokens_in=int(meter.get("tokens_in") or 0) if model_spend else 0,
                tokens_out=int(meter.get("tokens_out") or 0) if model_spend else 0,
                usd=float(meter.get("usd") or 0.0) if model_spend else 0.0,
                sandbox_s=sandbox_s,
            )
            run_charge = actual
        with self.ledger.transaction():
            self.guard.settle(self.reservation_key, run_charge)
            self.ledger.finish_run(self.key, status, actual, trace_path)


@contextmanager
def metered_run(
    settings: Settings,
    purpose: Purpose,
    command: str,
    variant: str,
    task_id: str,
    policy: Any,
    estimate: Amount | None = None,
) -> Iterator[MeteredRun]:
    """Open the ledger, create a job and reserve one run of ``purpose`` for the block.

    ``estimate`` is the reservation (default: one run and `run_sandbox_s` sandbox seconds).

    An exception escaping the block releases the reservation (the run did not happen) and
    marks the run ``interrupted``.

    Raises:
        CeilingReached: the policy's ceiling of ``purpose`` leaves no room for one more run.
    """
    job_id = timestamped_ids(prefix=command)()
    ceilings = getattr(policy, "ceilings", None)
    limit = getattr(ceilings, purpose, None) if ceilings is not None else None
    ceiling = Ceiling.of(limit) if limit is not None else Ceiling()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        ledger.create_job(job_id, {"command": command, "variant": variant, "task": task_id}, {})
        guard = CeilingGuard(ledger, job_id, {purpose: ceiling})
        key = run_key(job_id, variant, task_id, 1, purpose)
        if estimate is None:
            estimate = Amount(runs=1, sandbox_s=run_sandbox_s(policy, settings))
        reservation = guard.reserve(
            purpose, estimate, key=f"{key}:run", variant=variant, task_id=task_id, run_key=key
        )
        ledger.start_run(job_id, variant, task_id, 1, purpose, key=key)
        run = MeteredRun(ledger, guard, job_id, key, reservation.key)
        try:
            yield run
        except BaseException:
            guard.release(reservation.key)
            ledger.finish_run(key, "interrupted")
            ledger.set_job_status(job_id, "interrupted")
            raise
        ledger.set_job_status(job_id, "complete")
