"""The budget clock: a submission's sandbox-seconds ceiling shared by its running sandboxes.

Before this clock every running run held its worst case (its whole timeout plus the host's grace,
375.7 sandbox-seconds under the ``shadow`` policy) until it settled, so a job ran at most
ceiling ÷ worst case sandboxes at once and stopped as soon as the holds of the running ones
filled the ceiling: 115.8 of 7,200 sandbox-seconds charged when it said "ceiling reached". Here
a running sandbox holds only what it may still use before its *deadline*, and deadlines are
drawn from what is left and moved as the budget is shared.

**The rule.** ``S`` is the ceiling, ``C`` the sandbox-seconds settled so far (runs that ended),
``R`` the runs admitted and not ended. Each run ``i`` has an admission (then start) time
``s_i``, a deadline ``D_i`` and a bound ``B_i = (t - s_i) + a_i + m`` where ``t`` is the time of
the last reshare, ``a_i = D_i - t`` its allowance and ``m`` (`KILL_MARGIN_S`) what a sandbox
may run past its deadline before the host's kill ends its charge (a poll, the kill, the exit,
the removal). At every admission and every end the allowances are shared again at time ``t``:
``U = S - C - sum_i (t - s_i) - |R| m`` is split max-min fairly (water-filling: no run gets more
than it can use before its own timeout, ``rest_i``, and what one cannot use goes to the others).
A new run is admitted when its share is at least a typical run (the median charge of the
job's runs that ended by themselves; before one did, the mean of earlier jobs' runs, or
without any the run's own worst case ``rest``: a first wave never starts runs it would have
to cut), or, when no run is running, at least the smallest possible run ``g`` (the smallest
such charge, `MIN_RUN_S` before one); otherwise dispatch *waits* for a run to end.
Dispatch stops (``ceiling_reached``) only when ``C + g + m > S``: even alone, the smallest run
could not fit. A run is charged
``min(measured, B_i)`` and a run that reaches its deadline is killed and recorded
``ceiling_reached`` (`runner.episode.status`).

Each ``B_i`` is the sandbox-seconds estimate of the run's reservation in the ledger
(`runner.ledger.CeilingGuard`); the reshare, the new run's reservation and the end's
settlement are each one ledger transaction.

**Why no interleaving can overspend** (proof sketch). Invariant ``I``: ``C + sum_R B_i <= S``,
in memory and in the ledger (the ledger's committed total is exactly that sum).
- Reshare at ``t`` with ``U >= 0``: ``sum_R B_i = sum_R (t - s_i) + sum_R a_i + |R| m
  <= sum_R (t - s_i) + U + |R| m = S - C``. With ``U < 0`` (runs ran past their deadlines by
  more than ``m``) no bound grows: ``B_i := min(B_i, (t - s_i) + m)``, and ``I`` held before.
- An admission is a reshare over ``R + {new}`` with the new run's elapsed time 0: ``I`` again,
  and the ledger checks it once more in the same transaction (`runner.ledger.reservations.
  reserve` and ``resize``), so even a bug here cannot write past ``S``.
- An end moves ``min(measured, B_i) <= B_i`` from the sum to ``C``: the left side does not
  grow. A start (``s_i`` moves later) only lowers ``B_i``.
- Every step runs under one lock and one ledger write transaction: there is no interleaving
  *inside* a step, and ``I`` holds between any two.
- A crash of the host: the ledger holds ``B_i`` for every open run; the reaper charges a dead
  run at most its reservation and ``--resume`` closes the rest at their reservations
  (`runner.ledger.orphans`): the total stays ``<= S``.
So the charged total never passes ``S``. The cost of the guarantee is that a run the host could
not kill within ``m`` of its deadline is charged ``B_i``, not more; the overrun is logged
(``sandbox_s_capped_at_bound``) and the trace keeps the measured seconds.

Tokens and USD are not clocked: each model call reserves its own bound before it is forwarded
and waits while others' reservations are open (`runner.providers.metered`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import CeilingReached
from runner.hostlog import get_logger
from runner.ledger import Amount, CeilingGuard, Reservation

log = get_logger(__name__)

__all__ = ["KILL_MARGIN_S", "MIN_RUN_S", "BudgetClock", "BudgetGrant"]

# What a sandbox may run past its budget deadline before its charge ends: the driver checks
# the deadline once a poll (0.2 s, `runner.episode.driver.POLL_S`), then the kill, the exit and
# the removal of the container (~0.3-0.5 s on an idle Docker engine, DOCKER-NOTES.md; more
# under load: a longer one is capped at the bound and logged).
KILL_MARGIN_S = 1.0
# The smallest possible run before a run of the job ended by itself: a Docker sandbox's start,
# the runtime's hello and its removal take about a second (DOCKER-NOTES.md).
MIN_RUN_S = 1.0
# Bounds that moved less than this are not written again.
_WRITE_EPSILON_S = 1e-3
# Kept unshared, so that the sum of bounds stays under the ceiling whatever the rounding of
# binary floats (the ledger's check has no slack for sandbox seconds).
_ROUNDING_S = 1e-6


@dataclass
class _Held:
    """One admitted run: its reservation, its start and its deadline (clock seconds)."""

    reservation: str
    start: float
    rest_s: float
    deadline: float
    bound: float


class BudgetGrant:
    """One running sandbox's view of the clock, handed to the episode driver.

    Args:
        clock: the clock.
        key: the run's ledger key.
    """

    def __init__(self, clock: BudgetClock, key: str) -> None:
        self._clock = clock
        self.key = key

    def begin(self) -> None:
        """The sandbox started now: its elapsed time counts from here."""
        self._clock.begin(self.key)

    def remaining_s(self) -> float:
        """Seconds until the run's budget deadline (negative once it passed)."""
        return self._clock.remaining_s(self.key)


class BudgetClock:
    """Deadlines for the running sandboxes of one job under its sandbox-seconds ceiling.

    Safe to share between threads. Without a sandbox-seconds ceiling it only reserves
    ``runs=1`` per run and gives no deadline.

    Args:
        guard: the job's ceiling guard.
        run_s: one run's own worst case in sandbox seconds (its timeout, rate-limit waits and
            the host's grace: `runner.episode.metered_run.run_sandbox_s`).
        purpose: the ceiling's purpose.
        margin_s: `KILL_MARGIN_S`.
        min_run_s: `MIN_RUN_S`.
        typical_s: a typical run's sandbox seconds before one of this job ended (earlier
            jobs' mean, `runner.ledger.Ledger.per_run_history`), or None: ``run_s``.
        monotonic: the clock (seconds; injected in tests).
    """

    def __init__(
        self,
        guard: CeilingGuard,
        *,
        run_s: float,
        purpose: Any = "replay",
        margin_s: float = KILL_MARGIN_S,
        min_run_s: float = MIN_RUN_S,
        typical_s: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.guard = guard
        self.purpose = purpose
        self.ceiling_s = guard.ceiling(purpose).sandbox_s
        self.run_s = run_s
        self.margin_s = margin_s
        self.min_run_s = min_run_s
        self.monotonic = monotonic
        self._held: dict[str, _Held] = {}
        self._cond = threading.Condition(threading.RLock())
        self._smallest: float | None = None
        self._typical_before = max(min_run_s, typical_s if typical_s is not None else run_s)
        self._ended: list[float] = []  # charges of runs that ended by themselves
        settled, _ = guard.ledger.standing(guard.job_id, purpose)
        self._charged = settled.sandbox_s

    @property
    def enabled(self) -> bool:
        """True when a sandbox-seconds ceiling is set (runs get deadlines)."""
        return self.ceiling_s is not None

    @property
    def smallest_run_s(self) -> float:
        """``g``: the smallest charge of a run of this job that ended by itself, or `MIN_RUN_S`."""
        return self._smallest if self._smallest is not None else self.min_run_s

    @property
    def typical_run_s(self) -> float:
        """The median charge of the job's runs that ended by themselves (before: module doc)."""
        if not self._ended:
            return self._typical_before
        ordered = sorted(self._ended)
        return ordered[len(ordered) // 2]

    @property
    def charged_s(self) -> float:
        """``C``: sandbox seconds settled in this job."""
        with self._cond:
            return self._charged

    def running(self) -> int:
        """Runs admitted and not ended."""
        with self._cond:
            return len(self._held)

    # -- admission ---------------------------------------------------------------------------

    def admit(self, key: str, *, give_up: Callable[[], bool], **attrs: str | None) -> Reservation:
        """Reserve one run, waiting while only running runs' shares leave no room for it.

        Args:
            key: the run's ledger key (its reservation is ``{key}/run``).
            give_up: polled while waiting; True ends the wait.
            attrs: ``variant``, ``task_id`` for the ledger row.

        Returns:
            The run's reservation (``runs=1`` and its bound in sandbox seconds).

        Raises:
            CeilingReached: ``fields["final"]`` True when no run can fit any more (runs ceiling,
                or ``C + g + m > S``); False when ``give_up`` ended the wait.
        """
        reservation_key = f"{key}/run"
        if not self.enabled:
            return self.guard.reserve_when_fits(
                self.purpose,
                Amount(runs=1),
                give_up=give_up,
                key=reservation_key,
                kind="run",
                run_key=key,
                variant=attrs.get("variant"),
                task_id=attrs.get("task_id"),
            )
        with self._cond:
            while True:
                reservation = self._try_admit(key, reservation_key, attrs)
                if reservation is not None:
                    return reservation
                if give_up():
                    raise self._refusal(final=False)
                self._cond.wait(0.25)

    def _try_admit(
        self, key: str, reservation_key: str, attrs: dict[str, str | None]
    ) -> Reservation | None:
        """One try under the lock: the reservation, or None to wait (raises when final)."""
        assert self.ceiling_s is not None
        g = self.smallest_run_s
        if self._charged + g + self.margin_s > self.ceiling_s:
            raise self._refusal(final=True)
        now = self.monotonic()
        shares = self._shares(now, new=key)
        wanted = g if not self._held else max(g, self.typical_run_s)
        if shares is None or shares[key] < wanted:
            if not self._held:  # alone, and still less than the smallest run: never fits
                raise self._refusal(final=True)
            return None
        bounds = self._bounds(now, shares)
        new_bound = shares[key] + self.margin_s
        try:
            with self.guard.ledger.transaction():
                self._write(bounds)
                reservation = self.guard.reserve(
                    self.purpose,
                    Amount(runs=1, sandbox_s=new_bound),
                    key=reservation_key,
                    kind="run",
                    run_key=key,
                    variant=attrs.get("variant"),
                    task_id=attrs.get("task_id"),
                )
        except CeilingReached as exc:
            if exc.fields.get("limit") != "sandbox_s" or not self._held:
                exc.fields["final"] = True
                raise
            return None  # someone else's reservation (another process): wait for an end
        self._apply(now, bounds)
        self._held[key] = _Held(reservation.key, now, self.run_s, now + shares[key], new_bound)
        log.debug(
            "budget_admitted", key=key, allowance_s=round(shares[key], 3), running=len(self._held)
        )
        return reservation

    def _refusal(self, *, final: bool) -> CeilingReached:
        g = self.smallest_run_s
        assert self.ceiling_s is not None
        exc = CeilingReached(
            f"{self.purpose} ceiling reached: sandbox_s {self._charged:g} charged + {g:g} for the"
            f" smallest run + {self.margin_s:g} kill margin > {self.ceiling_s:g}",
            purpose=self.purpose,
            limit="sandbox_s",
            ceiling=self.ceiling_s,
            used=round(self._charged, 3),
            requested=round(g + self.margin_s, 3),
        )
        exc.fields["final"] = final
        return exc

    # -- the running runs --------------------------------------------------------------------

    def grant(self, key: str) -> BudgetGrant | None:
        """The driver's handle of an admitted run, or None without a clock."""
        return BudgetGrant(self, key) if self.enabled else None

    def begin(self, key: str) -> None:
        """The run's sandbox started: elapsed time counts from now (its bound only shrinks)."""
        with self._cond:
            held = self._held.get(key)
            if held is not None:
                held.start = max(held.start, self.monotonic())

    def remaining_s(self, key: str) -> float:
        """Seconds to the run's deadline; ``inf`` for a run the clock does not hold."""
        with self._cond:
            held = self._held.get(key)
            return float("inf") if held is None else held.deadline - self.monotonic()

    def charge_of(self, key: str, measured_s: float) -> float:
        """What a run that used ``measured_s`` is charged: at most its bound."""
        with self._cond:
            held = self._held.get(key)
            if held is None or measured_s <= held.bound:
                return max(0.0, measured_s)
            log.warning(
                "sandbox_s_capped_at_bound",
                key=key,
                measured_s=round(measured_s, 3),
                bound_s=round(held.bound, 3),
            )
            return held.bound

    def finish(
        self,
        key: str,
        reservation: Reservation | str,
        actual: Amount,
        *,
        natural: bool,
        during: Callable[[Amount], object] = lambda _: None,
    ) -> Amount:
        """Settle an ended run and share again, in one ledger transaction.

        The clock's lock is taken before the ledger's write lock, as `admit` takes them:
        what else the caller writes for the run goes in ``during``, not around this call.

        Args:
            key: the run's ledger key.
            reservation: its reservation.
            actual: what it used (``sandbox_s`` measured); the charge is capped at its bound.
            natural: it ended by itself (not cut by the budget, not interrupted): its charge
                may become the smallest possible run.
            during: called with the charge inside the transaction (the run's own row).

        Returns:
            What was charged.
        """
        with self._cond:
            charged = Amount(
                runs=actual.runs,
                tokens_in=actual.tokens_in,
                tokens_out=actual.tokens_out,
                usd=actual.usd,
                sandbox_s=self.charge_of(key, actual.sandbox_s)
                if self.enabled
                else actual.sandbox_s,
            )
            with self.guard.ledger.transaction():
                during(charged)
                self.guard.settle(reservation, charged)
            held = self._held.pop(key, None)
            if held is not None:
                self._charged += charged.sandbox_s
                if natural and charged.sandbox_s > 0:
                    self._ended.append(charged.sandbox_s)
                    least = self._smallest
                    self._smallest = (
                        charged.sandbox_s if least is None else min(least, charged.sandbox_s)
                    )
                self._reshare()
            self._cond.notify_all()
            return charged

    def _reshare(self) -> None:
        """Share again among the running runs (its own transaction; a refusal keeps the old)."""
        if not self._held:
            return
        now = self.monotonic()
        bounds = self._bounds(now, self._shares(now))
        try:
            with self.guard.ledger.transaction():
                self._write(bounds)
        except CeilingReached as exc:  # a bug of this arithmetic: the old bounds still hold
            log.error("budget_reshare_refused", error=str(exc))
            return
        self._apply(now, bounds)

    # -- the arithmetic of the module docstring ----------------------------------------------

    def _shares(self, now: float, new: str | None = None) -> dict[str, float] | None:
        """Allowance per run (and ``new``) by water-filling ``U``; None when ``U < 0``."""
        assert self.ceiling_s is not None
        count = len(self._held) + (new is not None)
        elapsed = sum(max(0.0, now - h.start) for h in self._held.values())
        left = self.ceiling_s - self._charged - elapsed - count * self.margin_s - _ROUNDING_S
        if left < 0:
            return None
        caps = [(max(0.0, h.rest_s - max(0.0, now - h.start)), k) for k, h in self._held.items()]
        if new is not None:
            caps.append((self.run_s, new))
        shares: dict[str, float] = {}
        remaining = count
        for cap, key in sorted(caps):
            shares[key] = min(cap, left / remaining)
            left -= shares[key]
            remaining -= 1
        return shares

    def _bounds(
        self, now: float, shares: dict[str, float] | None
    ) -> dict[str, tuple[float, float]]:
        """Held run -> (deadline, bound) after a reshare at ``now``."""
        out: dict[str, tuple[float, float]] = {}
        for key, held in self._held.items():
            elapsed = max(0.0, now - held.start)
            if shares is None:  # U < 0: nothing grows, every deadline is now
                out[key] = (min(held.deadline, now), min(held.bound, elapsed + self.margin_s))
            else:
                out[key] = (now + shares[key], elapsed + shares[key] + self.margin_s)
        return out

    def _moved(self, key: str, bound: float) -> bool:
        """True for a bound to write: a shrink, or a growth of more than `_WRITE_EPSILON_S`.

        Every shrink is written (the sum must stay under the ceiling exactly); a smaller
        growth is left unwritten, which is safe.
        """
        old = self._held[key].bound
        return bound < old or bound > old + _WRITE_EPSILON_S

    def _write(self, bounds: dict[str, tuple[float, float]]) -> None:
        assert self.ceiling_s is not None
        changed = {
            self._held[k].reservation: bound
            for k, (_, bound) in bounds.items()
            if self._moved(k, bound)
        }
        if changed:
            self.guard.ledger.resize(
                self.guard.job_id, self.purpose, changed, self.guard.ceiling(self.purpose)
            )

    def _apply(self, now: float, bounds: dict[str, tuple[float, float]]) -> None:
        for key, (deadline, bound) in bounds.items():
            if self._moved(key, bound):
                self._held[key].bound = bound
            self._held[key].deadline = deadline
