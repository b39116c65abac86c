"""The writes of one charge: reserve an estimate under a ceiling, settle it, or release it.

A charge is reserved before the work (a run: its timeout in sandbox seconds; a model call: its
``max_tokens`` price), then settled at the actual spend or released when the work never
happened. Each write is one transaction keyed by the charge's idempotency key (a repeat is a
no-op returning the stored row), and `reserve` reads the committed total and inserts in the
same write transaction, so concurrent reservations are serialised and never pass the ceiling
(`runner.ledger.store`, "Invariants"). `runner.ledger.Ledger` is the public face of these.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runner.ledger import reports
from runner.ledger.amounts import Amount, Ceiling, Purpose, check_fits, check_purpose
from runner.ledger.db import Database
from runner.ledger.records import ChargeKind, Reservation

__all__ = ["Charge", "read", "release", "reserve", "resize", "settle"]


@dataclass(frozen=True)
class Charge:
    """What a reservation is for.

    Attributes:
        key: the idempotency key.
        job_id: the job charged.
        purpose: ``live``, ``replay`` or ``judge``.
        kind: ``run`` or ``model_call``.
        variant: the variant, when the charge belongs to one.
        task_id: the task, when the charge belongs to one.
        run_key: the run the charge belongs to (a model call's run).
        model: the model asked (a model call).
    """

    key: str
    job_id: str
    purpose: Purpose
    kind: ChargeKind
    variant: str | None = None
    task_id: str | None = None
    run_key: str | None = None
    model: str | None = None


def read(db: Database, conn: sqlite3.Connection, key: str) -> Reservation:
    """The charge row of ``key`` inside the open transaction ``conn``.

    Raises:
        KeyError: no reservation with this key.
    """
    row = conn.execute("SELECT * FROM charges WHERE idempotency_key = ?", (key,)).fetchone()
    if row is None:
        raise KeyError(f"no reservation {key!r} in {db.path}")
    return Reservation.from_row(row)


def reserve(
    db: Database, clock: Callable[[], float], charge: Charge, estimate: Amount, ceiling: Ceiling
) -> Reservation:
    """Reserve ``estimate`` for ``charge`` under ``ceiling`` in one write transaction.

    Args:
        db: the ledger's database.
        clock: epoch seconds now.
        charge: what the reservation is for (its key makes the write idempotent).
        estimate: the spend reserved.
        ceiling: the job's ceiling of the charge's purpose.

    Returns:
        The stored reservation: the existing one, unchecked, when the key was recorded.

    Raises:
        CeilingReached: the reservation would exceed ``ceiling`` (nothing is written).
    """
    check_purpose(charge.purpose)
    with db.transaction() as conn:
        existing = conn.execute(
            "SELECT * FROM charges WHERE idempotency_key = ?", (charge.key,)
        ).fetchone()
        if existing is not None:
            return Reservation.from_row(existing)
        committed = reports.committed(db, charge.job_id, charge.purpose)
        check_fits(charge.purpose, ceiling, committed, estimate)
        now = clock()
        conn.execute(
            "INSERT INTO charges (idempotency_key, job_id, purpose, kind, state, variant,"
            " task_id, run_key, model, est_runs, est_tokens_in, est_tokens_out, est_usd,"
            " est_sandbox_s, created, updated)"
            " VALUES (?, ?, ?, ?, 'reserved', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                charge.key,
                charge.job_id,
                charge.purpose,
                charge.kind,
                charge.variant,
                charge.task_id,
                charge.run_key,
                charge.model,
                estimate.runs,
                estimate.tokens_in,
                estimate.tokens_out,
                estimate.usd,
                estimate.sandbox_s,
                now,
                now,
            ),
        )
        return read(db, conn, charge.key)


def settle(
    db: Database,
    clock: Callable[[], float],
    key: str,
    actual: Amount,
    model: str | None,
    *,
    estimated: bool = False,
) -> Reservation:
    """Replace the estimate of ``key`` by ``actual``; a settled charge keeps its first actual.

    ``estimated`` marks an actual that is the reservation, not a measurement (a model call that
    may have reached its provider and was never answered).

    Raises:
        KeyError: no reservation with this key.
        ValueError: the reservation was released.
    """
    with db.transaction() as conn:
        current = read(db, conn, key)
        if current.state == "released":
            raise ValueError(f"reservation {key!r} was released and cannot be settled")
        if current.state == "settled":
            return current
        conn.execute(
            "UPDATE charges SET state = 'settled', act_runs = ?, act_tokens_in = ?,"
            " act_tokens_out = ?, act_usd = ?, act_sandbox_s = ?,"
            " model = COALESCE(?, model), estimated = ?, updated = ? WHERE idempotency_key = ?",
            (
                actual.runs,
                actual.tokens_in,
                actual.tokens_out,
                actual.usd,
                actual.sandbox_s,
                model,
                int(estimated),
                clock(),
                key,
            ),
        )
        return read(db, conn, key)


def release(db: Database, clock: Callable[[], float], key: str) -> Reservation:
    """Give the reservation of ``key`` back; a settled charge stays settled.

    Raises:
        KeyError: no reservation with this key.
    """
    with db.transaction() as conn:
        conn.execute(
            "UPDATE charges SET state = 'released', updated = ?"
            " WHERE idempotency_key = ? AND state = 'reserved'",
            (clock(), key),
        )
        return read(db, conn, key)


def resize(
    db: Database,
    clock: Callable[[], float],
    job_id: str,
    purpose: Purpose,
    sandbox_s: Mapping[str, float],
    ceiling: Ceiling,
) -> None:
    """Set the sandbox-seconds estimate of open reservations, all in one write transaction.

    The budget clock (`runner.submit.budgetclock`) moves the deadlines of running sandboxes;
    each one's reservation is its bound. Rows not ``reserved`` (settled, released) are left as
    they are. The committed total is checked after every row changed: shrinking never fails,
    and a set of changes that would pass ``ceiling`` writes nothing.

    Args:
        db: the ledger's database.
        clock: epoch seconds now.
        job_id: the job whose rows change (a key of another job changes nothing).
        purpose: the rows' purpose (the ceiling's).
        sandbox_s: reservation key -> its new sandbox-seconds estimate (>= 0).
        ceiling: the job's ceiling of ``purpose``.

    Raises:
        CeilingReached: the new estimates would pass ``ceiling`` (nothing is written).
        ValueError: a negative estimate.
    """
    if any(v < 0 for v in sandbox_s.values()):
        raise ValueError("a sandbox-seconds estimate must not be negative")
    with db.transaction() as conn:
        now = clock()
        conn.executemany(
            "UPDATE charges SET est_sandbox_s = ?, updated = ?"
            " WHERE idempotency_key = ? AND job_id = ? AND purpose = ? AND state = 'reserved'",
            [(float(v), now, key, job_id, purpose) for key, v in sandbox_s.items()],
        )
        check_fits(purpose, ceiling, reports.committed(db, job_id, purpose), Amount())
