"""Rows of the ledger as frozen values: jobs, runs, reservations, and totals per purpose."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from runner.ledger.amounts import ZERO, Amount, Purpose, check_purpose
from runner.trace.format import STATUSES

JobStatus = Literal["running", "complete", "interrupted", "ceiling_reached"]
JOB_STATUSES: Final[tuple[str, ...]] = ("running", "complete", "interrupted", "ceiling_reached")

ChargeKind = Literal["run", "model_call"]
ChargeState = Literal["reserved", "settled", "released"]

# A run row is `running` until its episode ends with one of the trace statuses
# (runner.trace.format.STATUSES), or `interrupted` when its orchestrator died or was stopped.
RUNNING: Final[str] = "running"
INTERRUPTED: Final[str] = "interrupted"

# Runs cut short by something else than the workflow: a ceiling, the infrastructure, an
# interruption. `submit --resume` runs them again and the report grades none of them.
CUT_SHORT_STATUSES: Final[tuple[str, ...]] = ("ceiling_reached", "infra_error", INTERRUPTED)
# Statuses that make a (variant, task) pair done for `submit --resume`: the episode ended on its
# own terms (`limit_exceeded`: the workflow itself made too many calls or too much trace; a
# second attempt would hit the same limit): every episode status but the cut-short ones.
# `running` is run again too. The report grades exactly these.
FINISHED_STATUSES: Final[tuple[str, ...]] = tuple(
    s for s in STATUSES if s not in CUT_SHORT_STATUSES
)


def run_key(
    job_id: str,
    variant: str,
    task_id: str,
    attempt: int,
    purpose: str = "replay",
    repeat: int = 0,
) -> str:
    """Return the idempotency key of one run attempt: the same inputs give the same key.

    Args:
        job_id: the job.
        variant: the variant's name.
        task_id: the task.
        attempt: 1 for the first attempt, higher after a resume.
        purpose: ``live``, ``replay`` or ``judge``.
        repeat: the repeat index (``submit --repeats K``: 0..K-1). Repeat 0 keeps the key of
            a job without repeats, ``run/PURPOSE/JOB/VARIANT/TASK/ATTEMPT``; others insert
            ``repeat-R`` before the attempt (ids hold no ``/``, so keys never collide).

    """
    if repeat:
        return f"run/{purpose}/{job_id}/{variant}/{task_id}/repeat-{repeat}/{attempt}"
    return f"run/{purpose}/{job_id}/{variant}/{task_id}/{attempt}"


@dataclass(frozen=True)
class Job:
    """One submission.

    Attributes:
        id: job id.
        created: creation time, epoch seconds.
        status: ``running``, ``complete``, ``interrupted`` or ``ceiling_reached``.
        plan: the plan printed before running (JSON object).
        settings: the settings and ceilings in effect (JSON object).

    """

    id: str
    created: float
    status: str
    plan: dict[str, Any]
    settings: dict[str, Any]


@dataclass(frozen=True)
class RunRecord:
    """One attempt of one (variant, task) episode.

    Attributes:
        key: idempotency key (see `run_key`).
        job_id, variant, task_id, attempt, purpose: what ran and why.
        repeat: the repeat index (0..K-1 of ``submit --repeats K``).
        status: ``running``, ``interrupted`` or an episode status of the trace format.
        usage: tokens, USD and sandbox seconds the episode reported (``runs`` is 1).
        trace_path: where the episode's trace was written, if it was.
        started, finished: epoch seconds; ``finished`` is None while running.

    """

    key: str
    job_id: str
    variant: str
    task_id: str
    attempt: int
    purpose: Purpose
    status: str
    usage: Amount
    trace_path: str | None
    started: float
    finished: float | None
    repeat: int = 0

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        """Build from a ``runs`` row."""
        return cls(
            key=row["idempotency_key"],
            job_id=row["job_id"],
            variant=row["variant"],
            task_id=row["task_id"],
            attempt=row["attempt"],
            purpose=check_purpose(row["purpose"]),
            status=row["status"],
            usage=Amount(
                runs=1,
                tokens_in=row["tokens_in"],
                tokens_out=row["tokens_out"],
                usd=row["usd"],
                sandbox_s=row["sandbox_s"],
            ),
            trace_path=row["trace_path"],
            started=row["started"],
            finished=row["finished"],
            repeat=row["repeat"],
        )


@dataclass(frozen=True)
class Reservation:
    """Spend reserved under a purpose's ceiling before a run starts or a model call goes out.

    Attributes:
        key: idempotency key; reserving the same key twice returns the first reservation.
        job_id, purpose: whose budget it is charged to.
        kind: ``run`` or ``model_call``.
        state: ``reserved`` (counts its estimate), ``settled`` (counts its actual) or
            ``released`` (counts nothing).
        estimate: what was reserved.
        actual: what was settled, None until then.
        variant, task_id, run_key, model: attribution, when known.
        estimated: the settled actual is the reservation, not a measurement (a dead
            orchestrator's run whose container was gone, or a model call in flight).

    """

    key: str
    job_id: str
    purpose: Purpose
    kind: str
    state: str
    estimate: Amount
    actual: Amount | None
    variant: str | None = None
    task_id: str | None = None
    run_key: str | None = None
    model: str | None = None
    estimated: bool = False

    @property
    def charged(self) -> Amount:
        """What this row counts against its ceiling now."""
        if self.state == "settled" and self.actual is not None:
            return self.actual
        return self.estimate if self.state == "reserved" else Amount()

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Reservation:
        """Build from a ``charges`` row."""
        actual = None
        if row["act_runs"] is not None:
            actual = Amount(
                runs=row["act_runs"],
                tokens_in=row["act_tokens_in"],
                tokens_out=row["act_tokens_out"],
                usd=row["act_usd"],
                sandbox_s=row["act_sandbox_s"],
            )
        return cls(
            key=row["idempotency_key"],
            job_id=row["job_id"],
            purpose=check_purpose(row["purpose"]),
            kind=row["kind"],
            state=row["state"],
            estimate=Amount(
                runs=row["est_runs"],
                tokens_in=row["est_tokens_in"],
                tokens_out=row["est_tokens_out"],
                usd=row["est_usd"],
                sandbox_s=row["est_sandbox_s"],
            ),
            actual=actual,
            variant=row["variant"],
            task_id=row["task_id"],
            run_key=row["run_key"],
            model=row["model"],
            estimated=bool(row["estimated"]),
        )


@dataclass(frozen=True)
class PurposeTotals:
    """Totals of one purpose (over one job or all jobs).

    Attributes:
        purpose: ``live``, ``replay`` or ``judge``.
        charged: settled actual spend.
        reserved: estimates of reservations not yet settled or released.
        settled_charges: number of settled charges (runs plus model calls).
        model_calls: number of settled model-call charges.
        runs_by_status: run rows of this purpose counted by status.
        estimated: the part of ``charged`` settled at a reservation, not measured.
        estimated_charges: how many settled charges that part is.

    """

    purpose: Purpose
    charged: Amount = ZERO
    reserved: Amount = ZERO
    settled_charges: int = 0
    model_calls: int = 0
    runs_by_status: dict[str, int] = field(default_factory=dict)
    estimated: Amount = ZERO
    estimated_charges: int = 0

    @property
    def committed(self) -> Amount:
        """Charged plus reserved: what counts against the ceiling."""
        return self.charged + self.reserved

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (used by ``sandbox-replay ledger --json``)."""
        return {
            "purpose": self.purpose,
            "charged": self.charged.to_dict(),
            "reserved": self.reserved.to_dict(),
            "settled_charges": self.settled_charges,
            "model_calls": self.model_calls,
            "runs_by_status": dict(sorted(self.runs_by_status.items())),
            "estimated": self.estimated.to_dict(),
            "estimated_charges": self.estimated_charges,
        }
