"""The ledger: an SQLite database (WAL) of jobs, runs and charges under the state directory.

Invariants:
- Every write is one transaction (`runner.ledger.db`); a crash of the process at any point
  leaves the database as of the last commit. `Ledger.transaction` groups several writes
  (finish a run and settle its charge) into one.
- Writes are keyed by an idempotency key (UNIQUE): repeating a write is a no-op that returns the
  first result, so a retried write cannot charge twice.
- Ceiling checks read the committed totals and insert the reservation inside the same write
  transaction, so concurrent reservations (threads of this process, or other processes) are
  serialised and the total never exceeds the ceiling.
- Thread safety: one connection per thread (`runner.ledger.db`); readers never block writers.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from runner.hostlog import get_logger
from runner.ledger import orphans, reports, reservations
from runner.ledger.amounts import (
    UNBOUNDED,
    ZERO,
    Amount,
    Ceiling,
    Purpose,
    check_purpose,
)
from runner.ledger.db import Database
from runner.ledger.records import (
    FINISHED_STATUSES,
    JOB_STATUSES,
    RUNNING,
    ChargeKind,
    Job,
    PurposeTotals,
    Reservation,
    RunRecord,
    run_key,
)
from runner.ledger.reports import RunHistory

log = get_logger(__name__)

LEDGER_FILENAME = "ledger.sqlite3"


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, default=lambda o: str(o) if isinstance(o, Path) else o)


class Ledger:
    """Jobs, runs and charges of one state directory, safe for threads and crashes.

    Use as a context manager or call `close`. Every public method may be called from any thread.

    Args:
        path: the SQLite file; its folder is created.
        clock: epoch seconds now (injected for tests).
        busy_timeout_s: how long a writer waits for another process's write lock.

    Raises:
        InputError: the database was written by a newer sandbox-replay (schema version).
        InfrastructureError: the file cannot be opened, or the file system refuses WAL mode.

    """

    def __init__(
        self, path: Path, *, clock: Callable[[], float] = time.time, busy_timeout_s: float = 30.0
    ) -> None:
        self._db = Database(path, busy_timeout_s=busy_timeout_s)
        self.path = self._db.path
        self.version = self._db.version
        self._clock = clock

    @classmethod
    def for_state_dir(cls, state_dir: Path, **kwargs: Any) -> Ledger:
        """Open (creating or migrating) ``state_dir/ledger.sqlite3``."""
        return cls(Path(state_dir) / LEDGER_FILENAME, **kwargs)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every thread's connection; the ledger cannot be used afterwards."""
        self._db.close()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """Group several writes into one transaction (see `Database.transaction`).

        Example: finish a run and settle its charge together, so that a crash between the
        two cannot leave a finished run with an open reservation.
        """
        return self._db.transaction()

    # -- jobs -------------------------------------------------------------------------------

    def create_job(self, job_id: str, plan: dict[str, Any], settings: dict[str, Any]) -> Job:
        """Record a new job with status ``running``; an existing id returns the stored job.

        Args:
            job_id: a validated job id.
            plan: the plan (JSON object; `Path` values become strings).
            settings: settings and ceilings in effect (JSON object).

        """
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (id, created, status, plan, settings) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (job_id, self._clock(), "running", _json(plan), _json(settings)),
            )
        job = self.get_job(job_id)
        assert job is not None  # just inserted or already present
        return job

    def get_job(self, job_id: str) -> Job | None:
        """Return the job with this id, or None."""
        rows = self._db.read("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            return None
        row = rows[0]
        return Job(
            id=row["id"],
            created=row["created"],
            status=row["status"],
            plan=json.loads(row["plan"]),
            settings=json.loads(row["settings"]),
        )

    def jobs(self) -> list[Job]:
        """Every job, oldest first."""
        ids = [r["id"] for r in self._db.read("SELECT id FROM jobs ORDER BY created, id")]
        return [job for job in map(self.get_job, ids) if job is not None]

    def set_job_status(self, job_id: str, status: str) -> None:
        """Set a job's status.

        Raises:
            ValueError: unknown status.
            KeyError: no such job.

        """
        if status not in JOB_STATUSES:
            raise ValueError(f"unknown job status {status!r}; expected one of {JOB_STATUSES}")
        with self._db.transaction() as conn:
            cur = conn.execute("UPDATE jobs SET status = ? WHERE id = ?", (status, job_id))
            if cur.rowcount == 0:
                raise KeyError(f"no job {job_id!r} in {self.path}")

    def set_job_outcome(self, job_id: str, outcome: str) -> None:
        """Record a single-episode command's outcome in its job's plan (``plan["outcome"]``).

        ``reproduce``'s verdict (``reproduced``, ``not_reproduced``, ...) is known only after
        its run closed; ``jobs --all`` shows it as the job's status (the job status column
        keeps the lifecycle: ``complete``).

        Raises:
            KeyError: no such job.
        """
        with self._db.transaction() as conn:
            rows = conn.execute("SELECT plan FROM jobs WHERE id = ?", (job_id,)).fetchall()
            if not rows:
                raise KeyError(f"no job {job_id!r} in {self.path}")
            plan = json.loads(rows[0][0])
            plan = {**(plan if isinstance(plan, dict) else {}), "outcome": outcome}
            conn.execute("UPDATE jobs SET plan = ? WHERE id = ?", (_json(plan), job_id))

    def remove_job(self, job_id: str) -> int:
        """Delete a job with its runs and charges, in one transaction (``jobs prune``).

        Returns:
            The rows deleted (runs + charges + the job's own row; 0 for an unknown id).
        """
        with self._db.transaction() as conn:
            deleted = 0
            for table in ("charges", "runs", "jobs"):  # the job row last: foreign keys
                column = "id" if table == "jobs" else "job_id"
                cur = conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (job_id,))  # noqa: S608
                deleted += cur.rowcount
            return deleted

    # -- runs -------------------------------------------------------------------------------

    def start_run(
        self,
        job_id: str,
        variant: str,
        task_id: str,
        attempt: int = 1,
        purpose: Purpose = "replay",
        key: str | None = None,
        repeat: int = 0,
    ) -> RunRecord:
        """Record that a run attempt started (status ``running``); idempotent on its key.

        Args:
            job_id: the job.
            variant: the variant's name.
            task_id: the task.
            attempt: 1-based attempt number (see `next_attempt`).
            purpose: ``live``, ``replay`` or ``judge``.
            key: idempotency key; default `run_key` of the other arguments.
            repeat: the repeat index (``submit --repeats``), 0 without repeats.

        Returns:
            The stored row: the existing one when the key was already recorded.

        """
        check_purpose(purpose)
        key = key or run_key(job_id, variant, task_id, attempt, purpose, repeat)
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO runs (idempotency_key, job_id, variant, task_id, repeat, attempt,"
                " purpose, status, started) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (idempotency_key) DO NOTHING",
                (key, job_id, variant, task_id, repeat, attempt, purpose, RUNNING, self._clock()),
            )
            return self._run(conn, key)

    def finish_run(
        self, key: str, status: str, usage: Amount = ZERO, trace_path: str | None = None
    ) -> RunRecord:
        """Record a run's end; a run that already ended keeps its first end (idempotent).

        Args:
            key: the run's idempotency key.
            status: an episode status (runner.trace.format.STATUSES) or ``interrupted``.
            usage: tokens, USD and sandbox seconds of the episode (``runs`` is ignored).
            trace_path: where the trace was written.

        Raises:
            KeyError: no run with this key.
            ValueError: ``status`` is ``running``.

        """
        if status == RUNNING:
            raise ValueError("finish_run needs a final status, not 'running'")
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, tokens_in = ?, tokens_out = ?, usd = ?,"
                " sandbox_s = ?, trace_path = ?, finished = ?"
                " WHERE idempotency_key = ? AND status = ?",
                (
                    status,
                    usage.tokens_in,
                    usage.tokens_out,
                    usage.usd,
                    usage.sandbox_s,
                    trace_path,
                    self._clock(),
                    key,
                    RUNNING,
                ),
            )
            return self._run(conn, key)

    def _run(self, conn: sqlite3.Connection, key: str) -> RunRecord:
        row = conn.execute("SELECT * FROM runs WHERE idempotency_key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"no run {key!r} in {self.path}")
        return RunRecord.from_row(row)

    def runs(self, job_id: str | None = None) -> list[RunRecord]:
        """Run rows (of one job, or all), in start order."""
        rows = self._db.read(
            "SELECT * FROM runs WHERE ?1 IS NULL OR job_id = ?1 ORDER BY started, idempotency_key",
            (job_id,),
        )
        return [RunRecord.from_row(r) for r in rows]

    def next_attempt(
        self,
        job_id: str,
        variant: str,
        task_id: str,
        purpose: Purpose = "replay",
        repeat: int = 0,
    ) -> int:
        """1 + the highest attempt recorded for this pair and repeat (1 when none)."""
        row = self._db.read(
            "SELECT MAX(attempt) FROM runs WHERE job_id = ? AND variant = ? AND task_id = ?"
            " AND purpose = ? AND repeat = ?",
            (job_id, variant, task_id, purpose, repeat),
        )[0]
        return int(row[0] or 0) + 1

    def finished_episodes(
        self, job_id: str, purpose: Purpose = "replay"
    ) -> set[tuple[str, str, int]]:
        """(variant, task_id, repeat) of a job with an episode that ended on its own terms.

        `submit --resume` runs every other one (see `FINISHED_STATUSES`).
        """
        rows = self._db.read(
            "SELECT DISTINCT variant, task_id, repeat FROM runs WHERE job_id = ? AND purpose = ?"
            " AND status IN (SELECT value FROM json_each(?))",
            (job_id, purpose, json.dumps(FINISHED_STATUSES)),
        )
        return {(r["variant"], r["task_id"], int(r["repeat"])) for r in rows}

    def finished_pairs(self, job_id: str, purpose: Purpose = "replay") -> set[tuple[str, str]]:
        """(variant, task_id) pairs of a job with a finished episode of repeat 0.

        The pairs of a job without repeats; `finished_episodes` counts every repeat.
        """
        return {(v, t) for v, t, r in self.finished_episodes(job_id, purpose) if r == 0}

    def settle_dead_run(self, key: str, sandbox_s: float) -> bool:
        """Settle a dead orchestrator's run from what the engine measured (`orphans`).

        Returns:
            True when an open charge of that run was settled.
        """
        return orphans.settle_dead_run(self._db, self._clock(), key, sandbox_s)

    def close_orphans(self, job_id: str) -> tuple[int, int]:
        """Close what a dead orchestrator left open in a job, before it is resumed (`orphans`).

        Returns:
            (runs interrupted, reservations settled at their estimate and marked estimated).
        """
        return orphans.close_orphans(self._db, self._clock(), job_id)

    # -- charges ----------------------------------------------------------------------------

    def committed(self, job_id: str, purpose: Purpose) -> Amount:
        """Settled actuals plus outstanding estimates of one job and purpose."""
        return reports.committed(self._db, job_id, purpose)

    def reserve(
        self,
        key: str,
        job_id: str,
        purpose: Purpose,
        estimate: Amount,
        *,
        kind: ChargeKind,
        ceiling: Ceiling = UNBOUNDED,
        variant: str | None = None,
        task_id: str | None = None,
        run_key: str | None = None,
        model: str | None = None,
    ) -> Reservation:
        """Reserve ``estimate`` under ``ceiling`` atomically; idempotent on ``key``.

        The committed total of (job, purpose) is read and the reservation inserted in one
        write transaction (`runner.ledger.reservations.reserve`). A key that exists returns the
        stored reservation without a second check or charge.

        Raises:
            CeilingReached: the reservation would exceed ``ceiling`` (nothing is written).

        """
        return reservations.reserve(
            self._db,
            self._clock,
            reservations.Charge(key, job_id, purpose, kind, variant, task_id, run_key, model),
            estimate,
            ceiling,
        )

    def settle(
        self, key: str, actual: Amount, model: str | None = None, *, estimated: bool = False
    ) -> Reservation:
        """Replace a reservation's estimate by its actual spend; idempotent.

        A reservation settled before keeps its first actual. An actual above the estimate is
        recorded as is: money spent is never hidden. ``estimated``: the actual is the
        reservation, not a measurement (marked so in the ledger and the report).

        Raises:
            KeyError: no reservation with this key.
            ValueError: the reservation was released.

        """
        return reservations.settle(self._db, self._clock, key, actual, model, estimated=estimated)

    def resize(
        self, job_id: str, purpose: Purpose, sandbox_s: dict[str, float], ceiling: Ceiling
    ) -> None:
        """Set open reservations' sandbox-seconds estimates under ``ceiling`` (`reservations`).

        Raises:
            CeilingReached: the new estimates would pass ``ceiling`` (nothing is written).
        """
        reservations.resize(self._db, self._clock, job_id, purpose, sandbox_s, ceiling)

    def standing(self, job_id: str, purpose: Purpose) -> tuple[Amount, Amount]:
        """``(settled actuals, outstanding estimates)`` of one job and purpose."""
        return reports.standing(self._db, job_id, purpose)

    def release(self, key: str) -> Reservation:
        """Give a reservation back (the run never started, the call never went out).

        A settled reservation stays settled: releasing never un-charges spend. Idempotent.

        Raises:
            KeyError: no reservation with this key.

        """
        return reservations.release(self._db, self._clock, key)

    def charges(self, job_id: str | None = None) -> list[Reservation]:
        """Charge rows (of one job, or all), oldest first."""
        rows = self._db.read(
            "SELECT * FROM charges WHERE ?1 IS NULL OR job_id = ?1"
            " ORDER BY created, idempotency_key",
            (job_id,),
        )
        return [Reservation.from_row(r) for r in rows]

    def totals(self, job_id: str | None = None) -> dict[Purpose, PurposeTotals]:
        """Totals by purpose (every purpose present, zero when unused), of a job or all jobs."""
        return reports.totals(self._db, job_id)

    def per_run_history(
        self, purpose: Purpose = "replay", *, variant: str | None = None
    ) -> RunHistory | None:
        """Mean settled spend per run of ``purpose`` over every earlier job, for plan estimates.

        ``variant``: only the charges of that variant (``name@version``); None: every one.
        Returns None when no such run was ever settled.
        """
        return reports.per_run_history(self._db, purpose, variant=variant)

    def per_run_history_by_variant(self, purpose: Purpose = "replay") -> dict[str, RunHistory]:
        """`per_run_history` of every variant that has settled runs, in one query.

        Returns:
            ``{variant (name@version): RunHistory}``; variants without settled runs are absent.
        """
        return reports.per_run_history_by_variant(self._db, purpose)
