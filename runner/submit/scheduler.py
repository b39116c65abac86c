"""Running the pairs of a plan: one sandbox per (variant, task), bounded concurrency, ceilings.

The main thread dispatches pairs in plan order. Before each run it takes a concurrency slot and
admits the run on the job's budget clock (`runner.submit.budgetclock`): ``runs=1`` reserved
under ``replay`` and, when a sandbox-seconds ceiling is set, a deadline drawn from what is left
(the running runs' deadlines move as the budget is shared). A run that does not fit *now*
because running runs hold the budget waits for one of them to end; dispatch stops
(``ceiling_reached``) only when the charged total plus the smallest possible next run passes
the line, and every pair not dispatched is reported with the reason. Worker threads run one
episode each (`runner.episode.driver`) and, in one ledger transaction, record the run's end
and settle its charge (at most its bound).

Stopping: a `StopSignal` set by a ceiling (here, or by a model call that nothing could fit any
more in any run) or by an interruption stops dispatch; an interruption also kills every running
sandbox (the backend's context then removes it) and refuses new ones (`TrackingBackend.stop`).
Runs cut short by an interruption are recorded ``interrupted``, runs that a ceiling cut
``ceiling_reached`` (both are run again by ``submit --resume``).

Invariants: a run is charged at most once (idempotency keys derived from job, variant, task,
repeat and attempt: `runner.ledger.run_key`); every repeat is its own episode and its own charge;
the replay total never exceeds its ceiling (the budget clock's proof sketch); no sandbox
outlives `Scheduler.run`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from runner.backends.base import Backend, DelegatingBackend, Reaped, Sandbox, SandboxSpec
from runner.errors import CeilingReached, InfrastructureError
from runner.hostlog import get_logger
from runner.ledger import Amount, CeilingGuard, Ledger, Reservation, run_key
from runner.ledger.records import CUT_SHORT_STATUSES
from runner.providers.metered import StopSignal
from runner.submit.budgetclock import BudgetClock

log = get_logger(__name__)

__all__ = ["PairOutcome", "Scheduler", "TrackingBackend"]

INTERRUPT_GRACE_S = 10.0
# Statuses of runs that did not end by themselves: their charge says nothing of how short a
# run can be (`BudgetClock.finish`).
CUT_SHORT = frozenset(CUT_SHORT_STATUSES)


class TrackingBackend(DelegatingBackend):
    """A backend wrapper that knows every live sandbox, so they can be killed from any thread.

    It also bounds how many sandboxes are being *started* at once (``starts``): a start is
    the engine's CPU work (create, attach, start: DOCKER-NOTES.md, ~0.27 s of engine CPU per
    container), while a started run mostly waits on its model. Hundreds of starts at once only
    make every start slow (measured: past the engine's 60 s HTTP timeout at 128 on 2 cores,
    bench/README.md); a few at once keep the engine busy and each start quick.

    Args:
        inner: the real backend.
        starts: sandboxes being started at once, at most (>= 1).
    """

    def __init__(self, inner: Backend, *, starts: int = 4) -> None:
        super().__init__(inner)
        self._live: dict[str, Sandbox] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._image_ids: dict[str, str] = {}
        self._starts = threading.BoundedSemaphore(max(1, starts))

    def image_id(self, image: str) -> str | None:
        """The inner backend's ``image_id``, asked once per image per submission.

        Every episode's trace header names the image id; one engine call per run for the
        same answer was measurable in the benchmark (bench/README.md). None (the backend
        cannot tell) is asked again.

        Raises:
            InfrastructureError: the engine failed.
        """
        with self._lock:
            cached = self._image_ids.get(image)
        if cached is None:
            found = self.inner.image_id(image)
            if found is None:
                return None
            cached = str(found)
            with self._lock:
                self._image_ids[image] = cached
        return cached

    @contextmanager
    def _sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        if self._closed:
            raise InfrastructureError("the submission is stopping; no new sandbox")
        with ExitStack() as stack:
            with self._starts:  # held while the engine starts it, not while it runs
                if self._closed:
                    raise InfrastructureError("the submission is stopping; no new sandbox")
                box = stack.enter_context(self.inner.sandbox(spec))
            with self._lock:
                self._live[spec.run_id] = box
                closed = self._closed
            if closed:
                box.kill()
            try:
                yield box
            finally:
                with self._lock:
                    self._live.pop(spec.run_id, None)

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """The inner backend's sandbox, registered while it lives."""
        return self._sandbox(spec)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """The inner backend's reaper."""
        return self.inner.reap(ledger=ledger)

    def close(self) -> None:
        """`stop`, then close the inner backend (a warm pool drains)."""
        self.stop()
        self.inner.close()

    def stop(self) -> int:
        """Refuse new sandboxes and kill every live one; return how many were killed."""
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for box in live:
            try:
                box.kill()
            except InfrastructureError as exc:
                log.warning("sandbox_kill_failed", run_id=box.run_id, error=str(exc))
        return len(live)

    @property
    def live(self) -> int:
        """Sandboxes alive now."""
        with self._lock:
            return len(self._live)


@dataclass(frozen=True)
class PairOutcome:
    """What became of one (variant, task, repeat) episode: in a session, and in the report.

    The scheduler replaces a pair's outcome as it changes (``running``, then its status); the
    job's report holds one per planned pair (`runner.submit.jobreport.JobReport.pairs`).

    Attributes:
        variant: the variant.
        task_id: the task.
        repeat: the repeat index (0..K-1 of ``--repeats K``).
        status: the ledger status (an episode status, ``interrupted``, or ``not_run``).
        attempt: the attempt number, 0 when not run.
        key: the run's ledger key, "" when not run.
        trace: the trace path, when one was written.
        reason: why it did not run or was cut short.
        usage: what it was charged.
        rate_limit_wait_s: seconds its model calls waited for a provider's rate limit (this
            session's runs; None: not measured).
        turn_usd: USD of each of its model turns, in order (None for a turn without a
            settled price), as the ledger charged them; empty when it made none.
    """

    variant: str
    task_id: str
    repeat: int = 0
    status: str = "not_run"
    attempt: int = 0
    key: str = ""
    trace: str | None = None
    reason: str | None = None
    usage: Amount = field(default_factory=Amount)
    rate_limit_wait_s: float | None = None
    turn_usd: tuple[float | None, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The pair as ``report.json`` holds it.

        ``{variant, task_id, repeat, status}``, with ``attempt`` and ``trace`` once it ran,
        ``rate_limit_wait_s`` when measured and ``turn_usd`` when it made model turns.
        """
        out: dict[str, Any] = {
            "variant": self.variant,
            "task_id": self.task_id,
            "repeat": self.repeat,
            "status": self.status,
        }
        if self.attempt:
            out["attempt"] = self.attempt
            out["trace"] = self.trace
        if self.rate_limit_wait_s is not None:
            out["rate_limit_wait_s"] = self.rate_limit_wait_s
        if self.turn_usd:
            out["turn_usd"] = list(self.turn_usd)
        return out


# ``(variant, task_id, run_key, stop) -> (status, trace path or None, usage)``: runs one episode.
RunPair = Callable[[str, str, str], tuple[str, str | None, Amount]]


class Scheduler:
    """Dispatch pairs with bounded concurrency under the ``replay`` ceiling.

    Args:
        ledger: the ledger.
        guard: the job's ceiling guard.
        job_id: the job.
        run_pair: runs one episode: ``(variant, task_id, run_key) -> (status, trace, usage)``;
            it must not raise for an episode that ran (its status is data).
        concurrency: runs at once (>= 1).
        stop: the job's stop signal (shared with the metered providers).
        backend: the tracking backend (killed on interruption), if any.
        clock: the job's budget clock (default: one over ``guard`` whose runs' own worst case
            is unbounded).
        on_change: called after every state change with the outcomes (progress display).
    """

    def __init__(
        self,
        ledger: Ledger,
        guard: CeilingGuard,
        job_id: str,
        run_pair: RunPair,
        *,
        concurrency: int,
        stop: StopSignal,
        backend: TrackingBackend | None = None,
        clock: BudgetClock | None = None,
        on_change: Callable[[Sequence[PairOutcome]], None] = lambda _: None,
    ) -> None:
        self.ledger = ledger
        self.guard = guard
        self.job_id = job_id
        self.run_pair = run_pair
        self.concurrency = max(1, concurrency)
        self.stop = stop
        self.backend = backend
        self.clock = clock or BudgetClock(guard, run_s=float("inf"))
        self.on_change = on_change
        self.interrupted = threading.Event()
        self.hurried = threading.Event()
        self.outcomes: list[PairOutcome] = []
        self._lock = threading.Lock()

    def interrupt(self) -> None:
        """Ask the run to stop now (Ctrl-C): no new run, running sandboxes killed."""
        self.interrupted.set()
        self.stop.set("interrupted", "interrupted (Ctrl-C)")

    def hurry(self) -> None:
        """A second Ctrl-C: stop as `interrupt`, and do not wait for the runs to wind down.

        The runs' sandboxes are killed either way; the report is built from what the ledger
        holds now (a run still finishing is listed as it stands).
        """
        self.interrupt()
        self.hurried.set()

    def _changed(self) -> None:
        with self._lock:
            snapshot = list(self.outcomes)
        self.on_change(snapshot)

    def _set(self, index: int, **changes: Any) -> PairOutcome:
        """Replace the outcome at ``index`` with ``changes`` applied (outcomes are frozen)."""
        with self._lock:
            self.outcomes[index] = replace(self.outcomes[index], **changes)
            return self.outcomes[index]

    def _work(self, index: int, reservation: Reservation) -> None:
        outcome = self.outcomes[index]
        status, trace, usage = "infra_error", None, Amount()
        reason = outcome.reason
        try:
            status, trace, usage = self.run_pair(outcome.variant, outcome.task_id, outcome.key)
        except Exception as exc:  # a bug or a setup failure of one run: recorded, never lost
            log.exception("run_failed_to_run", key=outcome.key, error=str(exc))
            reason = f"{type(exc).__name__}: {exc}"
        if self.interrupted.is_set() and status != "succeeded":
            reason = reason or "interrupted (Ctrl-C): the host stopped the sandbox"
            status = "interrupted"
        self.clock.finish(
            outcome.key,
            reservation,
            Amount(runs=1, sandbox_s=usage.sandbox_s),
            natural=status not in CUT_SHORT,
            during=lambda _: self.ledger.finish_run(outcome.key, status, usage, trace),
        )
        self._set(index, status=status, trace=trace, usage=usage, reason=reason)
        log.info("run_finished", variant=outcome.variant, task_id=outcome.task_id, status=status)
        self._changed()

    def run(self, episodes: Sequence[tuple[str, str] | tuple[str, str, int]]) -> list[PairOutcome]:
        """Run ``(variant, task_id, repeat)`` episodes in order; one outcome each.

        A ``(variant, task_id)`` pair is repeat 0. An episode not started is ``not_run``. Call
        `interrupt` from a signal handler (or another thread) to stop.
        """
        self.outcomes = [PairOutcome(e[0], e[1], e[2] if len(e) > 2 else 0) for e in episodes]
        slots = threading.Semaphore(self.concurrency)
        futures: list[Future[None]] = []
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="run")
        self._changed()
        try:
            for index in range(len(self.outcomes)):
                if not self._acquire(slots):
                    break
                if not self._dispatch(index, pool, slots, futures):
                    break
            self._drain(futures)
        finally:
            pool.shutdown(wait=not self.interrupted.is_set())
        for index, outcome in enumerate(self.outcomes):
            if outcome.status == "not_run" and not outcome.key:
                self._set(
                    index,
                    reason=outcome.reason
                    or (f"{self.stop.reason}: {self.stop.message}" if self.stop.reason else None),
                )
        self._changed()
        return self.outcomes

    def _acquire(self, slots: threading.Semaphore) -> bool:
        """Wait for a free slot; False (holding none) once replay must stop."""
        while not slots.acquire(timeout=0.05):
            if self.stop.is_set():
                return False
        if self.stop.is_set():
            slots.release()
            return False
        return True

    def _dispatch(
        self,
        index: int,
        pool: ThreadPoolExecutor,
        slots: threading.Semaphore,
        futures: list[Future[None]],
    ) -> bool:
        outcome = self.outcomes[index]
        attempt = self.ledger.next_attempt(
            self.job_id, outcome.variant, outcome.task_id, repeat=outcome.repeat
        )
        key = run_key(self.job_id, outcome.variant, outcome.task_id, attempt, repeat=outcome.repeat)
        try:  # waits while running runs hold the budget; raises once nothing can fit
            reservation = self.clock.admit(
                key, give_up=self.stop.is_set, variant=outcome.variant, task_id=outcome.task_id
            )
        except CeilingReached as exc:
            slots.release()
            if exc.fields.pop("final", True):
                self.stop.set("ceiling_reached", str(exc), exc.fields)
            return False
        self.ledger.start_run(
            self.job_id,
            outcome.variant,
            outcome.task_id,
            attempt,
            key=key,
            repeat=outcome.repeat,
        )
        self._set(index, status="running", attempt=attempt, key=key)

        def done(_: Future[None]) -> None:
            slots.release()

        future = pool.submit(self._work, index, reservation)
        future.add_done_callback(done)
        futures.append(future)
        self._changed()
        return True

    def _drain(self, futures: Sequence[Future[None]]) -> None:
        killed_at: float | None = None
        while any(not f.done() for f in futures):
            if self.interrupted.is_set() and killed_at is None:
                killed_at = time.monotonic()
                if self.backend is not None:
                    killed = self.backend.stop()
                    log.info("sandboxes_killed", count=killed)  # the report says it
            if killed_at is not None and (
                self.hurried.is_set() or time.monotonic() - killed_at > INTERRUPT_GRACE_S
            ):
                log.error("runs_did_not_stop", running=sum(1 for f in futures if not f.done()))
                return
            time.sleep(0.05)
        if self.interrupted.is_set() and self.backend is not None:
            self.backend.stop()
