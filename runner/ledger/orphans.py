"""What a dead orchestrator left open in the ledger: runs in flight and their reservations.

After a crash (``kill -9`` of ``submit``), runs are still ``running`` and their charges still
``reserved`` at the full reservation (a run: the bound of its budget-clock deadline, or its
timeout plus grace, in sandbox seconds; a model call: its ``max_tokens`` price). Two steps
close them, with the best figure available:

1. `settle_dead_run` (the reaper, `runner.episode.reaping`): the run's container was
   found, and the engine recorded when it started and finished; the run is charged those
   sandbox seconds, as measured (``estimated`` stays 0), and marked ``interrupted``.
2. `close_orphans` (``submit --resume``): whatever is still open. A run whose container was
   gone, and every model call that was in flight, is settled at its reservation and marked
   ``estimated`` (1), in the ledger and the report: the work may have happened, nothing
   measured it, and the estimate keeps the total at or under the ceiling.

Each step is one transaction; both are idempotent (only ``reserved`` charges and ``running``
runs change).
"""

from __future__ import annotations

from runner.hostlog import get_logger
from runner.ledger.db import Database
from runner.ledger.records import INTERRUPTED, RUNNING

log = get_logger(__name__)

__all__ = ["close_orphans", "settle_dead_run"]


def settle_dead_run(db: Database, now: float, key: str, sandbox_s: float) -> bool:
    """Settle a dead run's open ``run`` charge with the engine's measured seconds.

    The charge keeps its other estimates (a run reserves ``runs=1`` and sandbox seconds only)
    and gets ``sandbox_s`` as its actual sandbox seconds, at most its reservation: a sandbox
    whose host died runs on until its own lifetime cap, past the deadline the host would have
    killed it at, and the ceiling must hold all the same (a SIGKILL of the host, then
    ``--resume``). The run row, if still ``running``, becomes ``interrupted`` with the measured
    seconds (the truth is kept there). Model calls of the run are left open.

    Args:
        db: the ledger database.
        now: epoch seconds now.
        key: the run's idempotency key (`runner.ledger.run_key`; the container's
            ``io.sandbox-replay.ledger-key`` label).
        sandbox_s: seconds the container ran, by the engine (negative counts as 0).

    Returns:
        True when an open charge was settled.
    """
    measured = max(0.0, float(sandbox_s))
    with db.transaction() as conn:
        charges = conn.execute(
            "UPDATE charges SET state = 'settled', act_runs = est_runs,"
            " act_tokens_in = est_tokens_in, act_tokens_out = est_tokens_out,"
            " act_usd = est_usd, act_sandbox_s = MIN(?, est_sandbox_s), estimated = 0,"
            " updated = ? WHERE run_key = ? AND kind = 'run' AND state = 'reserved'",
            (measured, now, key),
        ).rowcount
        conn.execute(
            "UPDATE runs SET status = ?, sandbox_s = ?, finished = ?"
            " WHERE idempotency_key = ? AND status = ?",
            (INTERRUPTED, measured, now, key, RUNNING),
        )
    if charges:
        log.info("ledger_dead_run_settled", key=key, sandbox_s=measured)
    return bool(charges)


def close_orphans(db: Database, now: float, job_id: str) -> tuple[int, int]:
    """Close a job's open rows; call only when no live process works on the job.

    Runs still ``running`` become ``interrupted``; charges still ``reserved`` are settled at
    their estimate and marked ``estimated``.

    Returns:
        (runs interrupted, reservations settled at their estimate).
    """
    with db.transaction() as conn:
        runs = conn.execute(
            "UPDATE runs SET status = ?, finished = ? WHERE job_id = ? AND status = ?",
            (INTERRUPTED, now, job_id, RUNNING),
        ).rowcount
        charges = conn.execute(
            "UPDATE charges SET state = 'settled', act_runs = est_runs,"
            " act_tokens_in = est_tokens_in, act_tokens_out = est_tokens_out,"
            " act_usd = est_usd, act_sandbox_s = est_sandbox_s, estimated = 1, updated = ?"
            " WHERE job_id = ? AND state = 'reserved'",
            (now, job_id),
        ).rowcount
    log.info("ledger_orphans_closed", job_id=job_id, runs=runs, charges=charges, estimated=charges)
    return runs, charges
