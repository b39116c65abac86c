"""Read-only aggregates of the ledger: committed spend, totals by purpose, per-run history.

Every function reads one consistent WAL snapshot per query and writes nothing.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

from runner.ledger.amounts import PURPOSES, Amount, Purpose
from runner.ledger.db import Database
from runner.ledger.records import PurposeTotals

_COMMITTED_SQL = """
SELECT
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_runs WHEN 'reserved' THEN est_runs END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_tokens_in
                          WHEN 'reserved' THEN est_tokens_in END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_tokens_out
                          WHEN 'reserved' THEN est_tokens_out END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_usd WHEN 'reserved' THEN est_usd END), 0.0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_sandbox_s
                          WHEN 'reserved' THEN est_sandbox_s END), 0.0)
FROM charges WHERE job_id = ? AND purpose = ? AND state != 'released'
"""

_SUMS = (
    "SUM(CASE state WHEN 'settled' THEN act_runs ELSE est_runs END) AS runs,"
    " SUM(CASE state WHEN 'settled' THEN act_tokens_in ELSE est_tokens_in END) AS t_in,"
    " SUM(CASE state WHEN 'settled' THEN act_tokens_out ELSE est_tokens_out END) AS t_out,"
    " SUM(CASE state WHEN 'settled' THEN act_usd ELSE est_usd END) AS usd,"
    " SUM(CASE state WHEN 'settled' THEN act_sandbox_s ELSE est_sandbox_s END) AS sbx"
)


@dataclass(frozen=True)
class RunHistory:
    """Mean settled spend per run, from earlier jobs.

    Attributes:
        runs: settled runs the mean is over.
        per_run: mean spend of one run, its model calls included (tokens rounded up).
    """

    runs: int
    per_run: Amount


def _amount(row: sqlite3.Row | None) -> Amount:
    if row is None or row["runs"] is None:
        return Amount()
    return Amount(
        runs=int(row["runs"]),
        tokens_in=int(row["t_in"]),
        tokens_out=int(row["t_out"]),
        usd=float(row["usd"]),
        sandbox_s=float(row["sbx"]),
    )


def committed(db: Database, job_id: str, purpose: Purpose) -> Amount:
    """Return settled actuals plus outstanding estimates of one job and purpose."""
    row = db.conn().execute(_COMMITTED_SQL, (job_id, purpose)).fetchone()
    return Amount(runs=row[0], tokens_in=row[1], tokens_out=row[2], usd=row[3], sandbox_s=row[4])


_STANDING_SQL = """
SELECT state, COALESCE(SUM(CASE state WHEN 'settled' THEN act_runs ELSE est_runs END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_tokens_in ELSE est_tokens_in END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_tokens_out ELSE est_tokens_out END), 0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_usd ELSE est_usd END), 0.0),
  COALESCE(SUM(CASE state WHEN 'settled' THEN act_sandbox_s ELSE est_sandbox_s END), 0.0)
FROM charges WHERE job_id = ? AND purpose = ? AND state != 'released' GROUP BY state
"""


def standing(db: Database, job_id: str, purpose: Purpose) -> tuple[Amount, Amount]:
    """Return ``(settled actuals, outstanding estimates)`` of one job and purpose.

    Their sum is `committed`; read in one query (one snapshot), so the two agree.
    """
    parts = {"settled": Amount(), "reserved": Amount()}
    for row in db.conn().execute(_STANDING_SQL, (job_id, purpose)).fetchall():
        parts[row[0]] = Amount(
            runs=row[1], tokens_in=row[2], tokens_out=row[3], usd=row[4], sandbox_s=row[5]
        )
    return parts["settled"], parts["reserved"]


def totals(db: Database, job_id: str | None = None) -> dict[Purpose, PurposeTotals]:
    """Return totals by purpose (every purpose present, zero when unused), of a job or all."""
    sums: dict[tuple[str, str], sqlite3.Row] = {}
    for row in db.read(
        f"SELECT purpose, state, COUNT(*) AS n, SUM(kind = 'model_call') AS calls, {_SUMS}"  # noqa: S608
        " FROM charges WHERE state != 'released' AND (?1 IS NULL OR job_id = ?1)"
        " GROUP BY purpose, state",
        (job_id,),
    ):
        sums[(row["purpose"], row["state"])] = row
    for row in db.read(
        f"SELECT purpose, COUNT(*) AS n, {_SUMS} FROM charges"  # noqa: S608
        " WHERE state = 'settled' AND estimated = 1 AND (?1 IS NULL OR job_id = ?1)"
        " GROUP BY purpose",
        (job_id,),
    ):
        sums[(row["purpose"], "estimated")] = row
    statuses: dict[str, dict[str, int]] = {}
    for row in db.read(
        "SELECT purpose, status, COUNT(*) AS n FROM runs WHERE ?1 IS NULL OR job_id = ?1"
        " GROUP BY purpose, status",
        (job_id,),
    ):
        statuses.setdefault(row["purpose"], {})[row["status"]] = int(row["n"])
    result: dict[Purpose, PurposeTotals] = {}
    for purpose in PURPOSES:
        settled = sums.get((purpose, "settled"))
        estimated = sums.get((purpose, "estimated"))
        result[purpose] = PurposeTotals(
            purpose=purpose,
            charged=_amount(settled),
            reserved=_amount(sums.get((purpose, "reserved"))),
            settled_charges=int(settled["n"]) if settled is not None else 0,
            model_calls=int(settled["calls"]) if settled is not None else 0,
            runs_by_status=statuses.get(purpose, {}),
            estimated=_amount(estimated),
            estimated_charges=int(estimated["n"]) if estimated is not None else 0,
        )
    return result


def per_run_history(
    db: Database, purpose: Purpose = "replay", *, variant: str | None = None
) -> RunHistory | None:
    """Return the mean settled spend per run of ``purpose`` over every job, or None.

    The spend of a run's model calls (charged separately, same purpose) counts toward it: the
    settled total of the purpose divided by its settled runs. ``variant``: of that variant's
    charges only (None: all).
    """
    where = "state = 'settled' AND purpose = ?"
    args: tuple[str, ...] = (purpose,)
    if variant is not None:
        where, args = where + " AND variant = ?", (purpose, variant)
    row = db.read(f"SELECT {_SUMS} FROM charges WHERE {where}", args)[0]  # noqa: S608
    return _history(_amount(row))


def per_run_history_by_variant(db: Database, purpose: Purpose = "replay") -> dict[str, RunHistory]:
    """`per_run_history` of every variant with settled runs of ``purpose``, in one query.

    Returns:
        ``{variant: RunHistory}`` (``name@version`` keys); a variant without a settled run is
        absent.
    """
    rows = db.read(
        f"SELECT variant, {_SUMS} FROM charges WHERE state = 'settled' AND purpose = ?"  # noqa: S608
        " AND variant IS NOT NULL GROUP BY variant",
        (purpose,),
    )
    found = {str(row["variant"]): _history(_amount(row)) for row in rows}
    return {variant: history for variant, history in found.items() if history is not None}


def _history(total: Amount) -> RunHistory | None:
    if total.runs == 0:
        return None
    n = total.runs
    return RunHistory(
        runs=n,
        per_run=Amount(
            runs=1,
            tokens_in=math.ceil(total.tokens_in / n),
            tokens_out=math.ceil(total.tokens_out / n),
            usd=total.usd / n,
            sandbox_s=total.sandbox_s / n,
        ),
    )
