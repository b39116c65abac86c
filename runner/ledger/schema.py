"""The ledger's SQLite schema as an ordered list of migrations.

``MIGRATIONS[i]`` takes a database at schema version ``i`` to version ``i + 1``; the version is
kept in the one-row table ``schema_version``. Each migration runs in its own ``BEGIN IMMEDIATE``
transaction together with the version bump, so a crash mid-migration leaves the previous
version intact (SQLite DDL is transactional). A database newer than `LATEST` is refused: this
code cannot know what a later version means.

Never edit a released migration; append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from runner.errors import InputError

Migration = Callable[[sqlite3.Connection], None]


def _v1_tables(conn: sqlite3.Connection) -> None:
    """Jobs, runs (one row per episode attempt) and charges (one row per reservation)."""
    conn.execute(
        """CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('running', 'complete', 'interrupted', 'ceiling_reached')),
            plan TEXT NOT NULL,
            settings TEXT NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE runs (
            idempotency_key TEXT PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            variant TEXT NOT NULL,
            task_id TEXT NOT NULL,
            attempt INTEGER NOT NULL CHECK (attempt >= 1),
            purpose TEXT NOT NULL CHECK (purpose IN ('live', 'replay', 'judge')),
            status TEXT NOT NULL,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            usd REAL NOT NULL DEFAULT 0,
            sandbox_s REAL NOT NULL DEFAULT 0,
            trace_path TEXT,
            started REAL NOT NULL,
            finished REAL,
            UNIQUE (job_id, variant, task_id, attempt, purpose)
        )"""
    )
    conn.execute(
        """CREATE TABLE charges (
            idempotency_key TEXT PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            purpose TEXT NOT NULL CHECK (purpose IN ('live', 'replay', 'judge')),
            kind TEXT NOT NULL CHECK (kind IN ('run', 'model_call')),
            state TEXT NOT NULL CHECK (state IN ('reserved', 'settled', 'released')),
            variant TEXT,
            task_id TEXT,
            run_key TEXT,
            model TEXT,
            est_runs INTEGER NOT NULL, est_tokens_in INTEGER NOT NULL,
            est_tokens_out INTEGER NOT NULL, est_usd REAL NOT NULL, est_sandbox_s REAL NOT NULL,
            act_runs INTEGER, act_tokens_in INTEGER, act_tokens_out INTEGER,
            act_usd REAL, act_sandbox_s REAL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        )"""
    )


def _v2_indexes(conn: sqlite3.Connection) -> None:
    """Indexes for the two hot reads: ceiling totals per (job, purpose) and resume per job."""
    conn.execute("CREATE INDEX charges_job_purpose ON charges (job_id, purpose, state)")
    conn.execute("CREATE INDEX runs_job_status ON runs (job_id, status)")


def _v3_estimated(conn: sqlite3.Connection) -> None:
    """``charges.estimated``: 1 when a settled amount is the reservation, not a measurement.

    Set when a dead orchestrator's open reservation is closed without anything that measured
    the spend (its container gone, a model call in flight): `Ledger.close_orphans`.
    """
    conn.execute(
        "ALTER TABLE charges ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0"
        " CHECK (estimated IN (0, 1))"
    )


_V4_RUN_COLUMNS = (
    "idempotency_key, job_id, variant, task_id, attempt, purpose, status, tokens_in,"
    " tokens_out, usd, sandbox_s, trace_path, started, finished"
)


def _v4_repeats(conn: sqlite3.Connection) -> None:
    """``runs.repeat``: which of a job's repeats (``submit --repeats K``: 0..K-1) a run is.

    Each repeat of a (variant, task) pair has attempts of its own, so the uniqueness rule gains
    the repeat; SQLite cannot change a table's constraints, hence the copy. Existing runs are
    repeat 0.
    """
    conn.execute(
        """CREATE TABLE runs_v4 (
            idempotency_key TEXT PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES jobs(id),
            variant TEXT NOT NULL,
            task_id TEXT NOT NULL,
            repeat INTEGER NOT NULL DEFAULT 0 CHECK (repeat >= 0),
            attempt INTEGER NOT NULL CHECK (attempt >= 1),
            purpose TEXT NOT NULL CHECK (purpose IN ('live', 'replay', 'judge')),
            status TEXT NOT NULL,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            usd REAL NOT NULL DEFAULT 0,
            sandbox_s REAL NOT NULL DEFAULT 0,
            trace_path TEXT,
            started REAL NOT NULL,
            finished REAL,
            UNIQUE (job_id, variant, task_id, repeat, attempt, purpose)
        )"""
    )
    conn.execute(
        f"INSERT INTO runs_v4 ({_V4_RUN_COLUMNS}) SELECT {_V4_RUN_COLUMNS} FROM runs"  # noqa: S608
    )
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_v4 RENAME TO runs")
    conn.execute("CREATE INDEX runs_job_status ON runs (job_id, status)")


MIGRATIONS: Final[tuple[Migration, ...]] = (_v1_tables, _v2_indexes, _v3_estimated, _v4_repeats)
LATEST: Final[int] = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    """Return the schema version of the database behind ``conn``; 0 for a new, empty database."""
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if row is None:
        return 0
    version = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(version[0]) if version is not None else 0


def migrate(conn: sqlite3.Connection, path: Path, target: int = LATEST) -> int:
    """Bring the database up to ``target``, one transaction per migration.

    Args:
        conn: a connection in autocommit mode (``isolation_level=None``).
        path: the database file, named in errors.
        target: the version to reach (tests use a lower one to build an old database).

    Returns:
        The version the database is at afterwards.

    Raises:
        InputError: the database's version is newer than this code knows (field
            ``schema_version``): use a newer sandbox-replay or another state directory.

    """
    if not 0 <= target <= LATEST:
        raise ValueError(f"target schema version must be within 0..{LATEST}, got {target}")
    version = current_version(conn)
    if version > LATEST:
        raise InputError(
            f"ledger schema version {version} is newer than this sandbox-replay supports"
            f" ({LATEST}); upgrade sandbox-replay or point SANDBOX_REPLAY_STATE_DIR elsewhere",
            file=str(path),
            field="schema_version",
        )
    while version < target:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read inside the write lock: another process may have migrated meanwhile.
            version = current_version(conn)
            if version >= target:
                conn.execute("COMMIT")
                break
            if version == 0:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            MIGRATIONS[version](conn)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version += 1
    return version
