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

Waiting, not stopping: a reservation that does not fit *now* may fit once the
reservations outstanding settle, since each settles at or below its estimate. `reserve_when_fits`
waits for a settle or a release while that is possible, and raises only when the reservation
could not fit even if every outstanding one settled at its *floor* (a run's ``runs=1`` is never
given back once the run started; tokens, USD and sandbox seconds may settle at 0): the
``final`` field of the `CeilingReached` says which. `could_fit` asks the same of any estimate,
e.g. the smallest model call of the job (`smallest_call`), so that the caller can tell "this
call does not fit" from "nothing can fit any more".
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from runner.errors import CeilingReached
from runner.hostlog import get_logger
from runner.ledger.amounts import UNBOUNDED, Amount, Ceiling, Purpose, check_fits, check_purpose
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
        self._changed = threading.Condition()
        self._generation = 0  # bumped by every settle and release: what waiters wait for
        self._smallest: dict[str, Amount] = {}

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
            reservation = self.ledger.reserve(
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
        if charge_kind == "model_call":
            with self._changed:
                least = self._smallest.get(purpose)
                self._smallest[purpose] = (
                    estimate if least is None or estimate.tokens < least.tokens else least
                )
        return reservation

    def reserve_when_fits(
        self,
        purpose: Purpose,
        estimate: Amount,
        *,
        give_up: Callable[[], bool],
        poll_s: float = 0.25,
        **attrs: str | None,
    ) -> Reservation:
        """`reserve`, waiting while the reservation does not fit only because others are open.

        Args:
            purpose: as in `reserve`.
            estimate: as in `reserve`.
            give_up: polled while waiting; True ends the wait (the work is no longer wanted:
                the job stops, the run ended).
            poll_s: the longest wait between two tries when nothing settles in this process
                (another process may share the job's ledger).
            attrs: ``key``, ``kind``, ``variant``, ``task_id``, ``run_key``, ``model`` as in
                `reserve`.

        Raises:
            CeilingReached: ``fields["final"]`` True: it cannot fit even once every outstanding
                reservation settled at its floor; False: ``give_up`` ended the wait.
        """
        while True:
            with self._changed:
                seen = self._generation
            try:
                return self.reserve(purpose, estimate, **attrs)  # type: ignore[arg-type]
            except CeilingReached as exc:
                if not self.could_fit(purpose, estimate):
                    exc.fields["final"] = True
                    raise
                if give_up():
                    exc.fields["final"] = False
                    raise
                log.debug("reservation_waiting", purpose=purpose, key=attrs.get("key"))
                with self._changed:
                    if self._generation == seen:  # nothing settled since the try: wait
                        self._changed.wait(timeout=poll_s)

    def could_fit(self, purpose: Purpose, estimate: Amount) -> bool:
        """True when ``estimate`` fits once every outstanding reservation settled at its floor.

        The floor of an outstanding reservation is its ``runs`` (a started run counts whatever
        it costs) and nothing of the other dimensions.
        """
        settled, reserved = self.ledger.standing(self.job_id, check_purpose(purpose))
        try:
            check_fits(
                purpose, self.ceiling(purpose), settled + Amount(runs=reserved.runs), estimate
            )
        except CeilingReached:
            return False
        return True

    def smallest_call(self, purpose: Purpose) -> Amount | None:
        """The smallest model-call reservation this guard made for ``purpose`` (by tokens)."""
        with self._changed:
            return self._smallest.get(purpose)

    def notify(self) -> None:
        """Wake every `reserve_when_fits` waiter: room may have been made."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def settle(
        self,
        reservation: Reservation | str,
        actual: Amount,
        model: str | None = None,
        *,
        estimated: bool = False,
    ) -> Reservation:
        """Charge the actual spend of a reservation (idempotent; see `Ledger.settle`).

        Args:
            reservation: the reservation or its key.
            actual: what the run or call really cost.
            model: the model id read from the response, when it is a model call.
            estimated: ``actual`` is the reservation, not a measurement.

        Raises:
            KeyError: unknown reservation.
            ValueError: the reservation was released.
        """
        key = reservation if isinstance(reservation, str) else reservation.key
        try:
            settled = self.ledger.settle(key, actual, model=model, estimated=estimated)
        finally:
            self.notify()
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
        try:
            return self.ledger.release(key)
        finally:
            self.notify()

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
