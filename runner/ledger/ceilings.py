"""Spend ceilings per purpose for one job: reserve before spending, settle after.

Before a run starts, and before the host forwards a model call, the orchestrator reserves the
estimated spend with `CeilingGuard.reserve`; when the work is done it settles the actual spend
(`settle`), or gives the reservation back when the work never happened (`release`).

Invariants:
- A reservation is checked and written in one ledger write transaction, so concurrent
  reservations (threads, or processes sharing the state directory) are serialised: the sum of
  reserved estimates and settled actuals of a purpose never exceeds its ceiling.
- Purposes are independent: a ``replay`` reservation reads and charges only ``replay`` rows, a
  ``judge`` reservation only ``judge`` rows. An exhausted replay budget leaves judging possible,
  and the other way round.
- The guarantee holds for actuals that stay within their estimates; reserve an upper bound
  (cap ``max_tokens`` in the forwarded request and estimate with it; estimate a run's sandbox
  seconds with its timeout when a sandbox-seconds ceiling is set). An actual above its estimate
  on a bounded dimension is still recorded truthfully (money spent is never hidden) and logged
  as ``charge_overran_estimate``.
- Reservations are keyed: retrying a reservation with the same key returns the first one and
  charges nothing more.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from runner.errors import CeilingReached
from runner.hostlog import get_logger
from runner.ledger.amounts import UNBOUNDED, Amount, Ceiling, Purpose, check_purpose
from runner.ledger.records import ChargeKind, Reservation
from runner.ledger.store import Ledger

__all__ = ["Budget", "CeilingGuard", "CeilingReached", "Headroom"]

log = get_logger(__name__)


@dataclass(frozen=True)
class Headroom:
    """What is left under a purpose's ceiling; ``None`` = unbounded.

    Attributes:
        runs: runs that may still start.
        tokens: model tokens (input plus output) left.
        usd: US dollars left.
        sandbox_s: sandbox seconds left.
    """

    runs: int | None
    tokens: int | None
    usd: float | None
    sandbox_s: float | None


class CeilingGuard:
    """The budgets of one job: one `Ceiling` per purpose, enforced through the ledger.

    Safe to share between threads.

    Args:
        ledger: where reservations are recorded.
        job_id: the job whose spend is bounded (the job row must exist).
        ceilings: purpose -> ceiling; a purpose absent here is unbounded.
        key_factory: makes an idempotency key when the caller gives none (injected in tests).
    """

    def __init__(
        self,
        ledger: Ledger,
        job_id: str,
        ceilings: Mapping[Purpose, Ceiling],
        *,
        key_factory: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        for purpose in ceilings:
            check_purpose(purpose)
        self.ledger = ledger
        self.job_id = job_id
        self._ceilings = dict(ceilings)
        self._key_factory = key_factory

    def ceiling(self, purpose: Purpose) -> Ceiling:
        """Return the ceiling of ``purpose`` (`UNBOUNDED` when none was set)."""
        return self._ceilings.get(check_purpose(purpose), UNBOUNDED)

    def reserve(
        self,
        purpose: Purpose,
        estimate: Amount,
        *,
        key: str | None = None,
        kind: ChargeKind | None = None,
        variant: str | None = None,
        task_id: str | None = None,
        run_key: str | None = None,
        model: str | None = None,
    ) -> Reservation:
        """Reserve ``estimate`` under the ceiling of ``purpose``, atomically.

        Args:
            purpose: ``live``, ``replay`` or ``judge``; only that purpose's ceiling is checked
                and charged.
            estimate: an upper bound of the spend (a run: ``runs=1`` plus its expected
                sandbox seconds; a model call: tokens and USD at its ``max_tokens``).
            key: idempotency key; the same key returns the first reservation unchanged.
                Default: a fresh random key.
            kind: ``run`` or ``model_call``; default ``run`` when ``estimate.runs`` > 0.
            variant: attribution, recorded on the row.
            task_id: attribution, recorded on the row.
            run_key: the run a model call belongs to.
            model: the model asked, for model calls.

        Returns:
            The reservation (state ``reserved``, or whatever the first call with ``key`` left).

        Raises:
            CeilingReached: the reservation would exceed the ceiling; ``fields`` names the
                ``purpose``, the ``limit`` (runs, tokens, usd or sandbox_s), ``job_id``,
                ``variant`` and ``task_id``. Nothing is written.
        """
        charge_kind: ChargeKind = kind or ("run" if estimate.runs > 0 else "model_call")
        try:
            return self.ledger.reserve(
                key or self._key_factory(),
                self.job_id,
                check_purpose(purpose),
                estimate,
                kind=charge_kind,
                ceiling=self.ceiling(purpose),
                variant=variant,
                task_id=task_id,
                run_key=run_key,
                model=model,
            )
        except CeilingReached as exc:
            exc.fields.update(
                {
                    k: v
                    for k, v in (
                        ("job_id", self.job_id),
                        ("variant", variant),
                        ("task_id", task_id),
                    )
                    if v is not None
                }
            )
            raise

    def settle(
        self, reservation: Reservation | str, actual: Amount, model: str | None = None
    ) -> Reservation:
        """Charge the actual spend of a reservation (idempotent; see `Ledger.settle`).

        Args:
            reservation: the reservation or its key.
            actual: what the run or call really cost.
            model: the model id read from the response, when it is a model call.

        Raises:
            KeyError: unknown reservation.
            ValueError: the reservation was released.
        """
        key = reservation if isinstance(reservation, str) else reservation.key
        settled = self.ledger.settle(key, actual, model=model)
        ceiling = self.ceiling(settled.purpose)
        charged = settled.actual or actual
        over = [
            name
            for name, bound, est, act in (
                ("runs", ceiling.runs, settled.estimate.runs, charged.runs),
                ("tokens", ceiling.tokens, settled.estimate.tokens, charged.tokens),
                ("usd", ceiling.usd, settled.estimate.usd, charged.usd),
                ("sandbox_s", ceiling.sandbox_s, settled.estimate.sandbox_s, charged.sandbox_s),
            )
            if bound is not None and act > est
        ]
        if over:
            log.warning("charge_overran_estimate", key=key, purpose=settled.purpose, limits=over)
        return settled

    def release(self, reservation: Reservation | str) -> Reservation:
        """Give back a reservation whose work never happened (idempotent; settled stays settled).

        Raises:
            KeyError: unknown reservation.
        """
        key = reservation if isinstance(reservation, str) else reservation.key
        return self.ledger.release(key)

    @contextmanager
    def reserved(
        self, purpose: Purpose, estimate: Amount, **kwargs: str | None
    ) -> Iterator[Reservation]:
        """Reserve for the block; an exception escaping it before `settle` releases it.

        Args:
            purpose: as in `reserve`.
            estimate: as in `reserve`.
            kwargs: ``key``, ``variant``, ``task_id``, ``run_key``, ``model`` as in `reserve`.

        Raises:
            CeilingReached: as in `reserve` (the block does not run).
        """
        reservation = self.reserve(
            purpose,
            estimate,
            key=kwargs.get("key"),
            variant=kwargs.get("variant"),
            task_id=kwargs.get("task_id"),
            run_key=kwargs.get("run_key"),
            model=kwargs.get("model"),
        )
        try:
            yield reservation
        except BaseException:
            self.release(reservation)
            raise

    def committed(self, purpose: Purpose) -> Amount:
        """Return settled actuals plus outstanding estimates of ``purpose`` in this job."""
        return self.ledger.committed(self.job_id, check_purpose(purpose))

    def headroom(self, purpose: Purpose) -> Headroom:
        """Return what is left under the ceiling of ``purpose`` (never negative)."""
        ceiling = self.ceiling(purpose)
        used = self.committed(purpose)
        return Headroom(
            runs=None if ceiling.runs is None else max(0, ceiling.runs - used.runs),
            tokens=None if ceiling.tokens is None else max(0, ceiling.tokens - used.tokens),
            usd=None if ceiling.usd is None else max(0.0, ceiling.usd - used.usd),
            sandbox_s=None
            if ceiling.sandbox_s is None
            else max(0.0, ceiling.sandbox_s - used.sandbox_s),
        )


# The name the issue uses for the same object.
Budget = CeilingGuard
