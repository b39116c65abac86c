"""SQLite connections and write transactions of the ledger: WAL, one connection per thread.

Invariants:
- Every connection runs in WAL mode with ``synchronous=FULL`` and foreign keys on; a file
  system that refuses WAL is an infrastructure error, not a silent fallback to a rollback
  journal (readers would then block writers).
- Writes happen only inside `Database.transaction` (``BEGIN IMMEDIATE`` … ``COMMIT``); a crash
  at any point leaves the database as of the last commit.
- Each thread uses its own connection. In-process writers also take one lock, so they queue
  instead of spinning on SQLite's busy handler; other processes are serialised by SQLite's
  write lock (waiting up to ``busy_timeout_s``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.errors import InfrastructureError
from runner.ledger import schema


class Database:
    """The ledger's SQLite file, opened (created, migrated) once per process.

    Args:
        path: the SQLite file; its folder is created.
        busy_timeout_s: how long a writer waits for another process's write lock.

    Raises:
        InputError: the database was written by a newer sandbox-replay (schema version).
        InfrastructureError: the file cannot be opened, or the file system refuses WAL mode.

    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfrastructureError(
                f"cannot create the ledger folder: {exc}", file=str(self.path.parent)
            ) from exc
        try:
            with self._write_lock:
                self.version = schema.migrate(self.conn(), self.path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close every thread's connection; the database cannot be used afterwards."""
        self._closed = True
        with self._connections_lock:
            for _, conn in self._connections:
                conn.close()
            self._connections.clear()

    def conn(self) -> sqlite3.Connection:
        """Return this thread's connection, opening it on first use.

        Raises:
            RuntimeError: the database was closed.
            InfrastructureError: the file cannot be opened or refuses WAL mode.

        """
        if self._closed:
            raise RuntimeError(f"ledger {self.path} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.row_factory = sqlite3.Row
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise InfrastructureError(
                f"cannot open the ledger: {exc}", file=str(self.path)
            ) from exc
        if str(mode).lower() != "wal":
            conn.close()
            raise InfrastructureError(
                f"the file system refused SQLite WAL mode (got {mode!r}); put the state"
                " directory on a local disk",
                file=str(self.path),
            )
        self._local.conn = conn
        self._local.depth = 0
        with self._connections_lock:
            # Close the connections of threads that have ended, so that a process starting
            # many short-lived threads does not pile up open files.
            for thread, old in self._connections:
                if not thread.is_alive():
                    old.close()
            self._connections = [(t, c) for t, c in self._connections if t.is_alive()]
            self._connections.append((threading.current_thread(), conn))
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested uses join the outer one.

        Everything written inside commits together or not at all: an exception rolls back and
        re-raises; a killed process leaves nothing of it.

        Raises:
            InfrastructureError: SQLite could not take the write lock in time, or the write
                failed (disk full, I/O error); nothing was written.

        """
        conn = self.conn()
        if self._local.depth > 0:
            self._local.depth += 1
            try:
                yield conn
            finally:
                self._local.depth -= 1
            return
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise InfrastructureError(
                    f"ledger write could not start: {exc}", file=str(self.path)
                ) from exc
            self._local.depth = 1
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise InfrastructureError(
                    f"ledger write failed: {exc}", file=str(self.path)
                ) from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._local.depth = 0

    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Rows of one query on this thread's connection (a consistent WAL snapshot)."""
        return list(self.conn().execute(sql, params).fetchall())
