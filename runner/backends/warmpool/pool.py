"""A warm pool of sandboxes: created, attached and started before their run is known.

Every Docker sandbox costs the engine ~250 ms of CPU to create and start (DOCKER-NOTES.md);
the pool takes that off a run's critical path. A pooled sandbox is the runtime
(`runner.runtime.pid1`, PID 1) waiting for ``start`` on stdin, which brings the run spec and
the manifest (`runner.wire.protocol`): nothing of the run is fixed at creation. It is still
ONE sandbox per run: a pooled sandbox is handed out once, to one run, and removed after it
(`WarmPool.take`); it is never reused.

Rules:
- Key (`pool_key`): everything fixed at creation (image, command, mounts: the tool snapshot
  and the runner packages, environment, limits, user, working folder, the lifetime cap). Only
  a run's id and its labels (task, ledger key) vary between runs of one key; a pooled sandbox
  carries neither (labels cannot be changed after creation): it is labelled `L.POOL` and its
  job's ledger (`L.LEDGER`, the same for every run of the key) and named from a pool id
  (``sandbox-replay-pool-<n>-<session>``, `pooled_spec`).
- Binding: `take` gives the pooled sandbox the run's id (``run_id``), logs ``pool_assigned``
  with the run id and the container name (the engine's labels still say the pool id) and tells
  ``on_assign`` (submit: `runner.episode.poolbindings`, which the reaper reads back to charge
  a dead host's pooled run what it ran). A run id is bound at most once: a second `take` for
  the same id raises, so a retry never makes (or gets) a second sandbox for one run id.
- Size (`pool_size`): the admitted concurrency (`runner.backends.capacity`) plus one, per
  key (a submit job has one: its image, snapshot and limits), within what the concurrency
  bound leaves beside the runs: each spare has a run's memory and pids limits already, so
  the bound counts them (`runner.backends.capacity.ConcurrencyBound.spares`); and never more
  warm (or being started) sandboxes than runs still to come when the caller said how many
  (`WarmPool.expect`: submit does), so none is made only to be drained. `take` wakes
  the fillers, which refill while runs execute. A sandbox is warm once its runtime wrote its
  ``hello`` (within `READY_WAIT_S`). A `take` that finds none warm waits for
  one being started (one run per such sandbox, at most `PENDING_WAIT_S`), else starts the
  run's own sandbox cold, with the run's own name and labels (as without a pool).
- Lifetime: a pooled sandbox ends by itself at its idle cap (``SANDBOX_REPLAY_IDLE_CAP_S``,
  `idle_cap_s`) if never assigned; ``start`` rearms the cap with the run's own
  (`runner.backends.base.LifetimeCap`, counted from the assignment, enforced inside by the
  runtime). The pool never hands out one within `HANDOUT_MARGIN_S` of its idle cap, nor one
  whose output already ended (it died). Its stdin is the host's attach connection: a dead host
  closes it and the runtime ends at end-of-file at once.
- Drain: `close` (the end of a submission, a Ctrl-C included) stops the fillers and removes
  every warm sandbox. One left by a dead host is an ordinary leftover of a dead owner: the
  reaper (`runner.backends.docker.reaper`) removes it; a pooled run cut short by a dead host is
  settled from its binding (`runner.episode.poolbindings`).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from runner.backends.base import Sandbox, SandboxSpec
from runner.backends.warmpool.poolkey import PoolKey, pool_key, pool_size, pooled_spec
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = [
    "DEFAULT_IDLE_CAP_S",
    "HANDOUT_MARGIN_S",
    "PoolKey",
    "WarmPool",
    "pool_key",
    "pool_size",
    "pooled_spec",
]

DEFAULT_IDLE_CAP_S = 300.0
HANDOUT_MARGIN_S = 10.0  # a warm sandbox this close to its idle cap is removed, not handed out
READY_WAIT_S = 30.0  # how long a new pooled sandbox has to say hello before it is given up
PENDING_WAIT_S = 10.0  # how long a run waits for a sandbox being started before going cold
MAX_FILLERS = 2  # threads creating warm sandboxes (each start is engine CPU: 2 cores here)
_FAILURE_PAUSE_S = 1.0
_MAX_FAILURES = 3  # consecutive failed fills of a key: it is filled no more (runs start cold)

OpenSandbox = Callable[[SandboxSpec], AbstractContextManager[Sandbox]]


@dataclass
class _Warm:
    context: AbstractContextManager[Sandbox]
    sandbox: Sandbox
    started: float


@dataclass
class _Slot:
    template: SandboxSpec
    warm: deque[_Warm] = field(default_factory=deque)
    pending: int = 0
    waiting: int = 0  # runs in `WarmPool.take` waiting for a pending sandbox
    failures: int = 0


class WarmPool:
    """Warm sandboxes per `PoolKey`, each handed out once (see the module docstring).

    Args:
        open_sandbox: makes one started sandbox (the Docker backend's ``sandbox``).
        size: warm sandboxes kept per key (`pool_size`).
        idle_cap_s: how long a pooled sandbox lives unassigned (it ends itself then).
        session: part of the pool ids (the backend's session id).
        monotonic: the clock (seconds).
        fillers: threads that create warm sandboxes (default ``min(size, MAX_FILLERS)``).
        on_assign: told ``(container name, the run's labels, seconds it waited)`` when a warm
            sandbox is given to a run (`runner.episode.poolbindings.PoolBindings.bind`).
        on_release: told the container name when that run's sandbox was removed.
    """

    def __init__(
        self,
        open_sandbox: OpenSandbox,
        *,
        size: int,
        idle_cap_s: float = DEFAULT_IDLE_CAP_S,
        session: str = "",
        monotonic: Callable[[], float] = time.monotonic,
        fillers: int | None = None,
        on_assign: Callable[[str, Mapping[str, str], float], None] | None = None,
        on_release: Callable[[str], None] | None = None,
    ) -> None:
        if size < 1 or not (idle_cap_s > HANDOUT_MARGIN_S):
            raise ValueError(f"pool size >= 1 and idle cap > {HANDOUT_MARGIN_S} s expected")
        self._open = open_sandbox
        self._on_assign, self._on_release = on_assign, on_release
        self.size = size
        self.idle_cap_s = idle_cap_s
        self._session = session
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._slots: dict[PoolKey, _Slot] = {}
        self._bound: set[str] = set()
        self._ids = itertools.count(1)
        self._closed = False
        self.created = 0  # warm sandboxes made
        self.assigned = 0  # of them, handed to a run
        self.cold = 0  # runs that found none warm
        self._remaining: int | None = None  # runs still to take a sandbox (`expect`)
        self._threads = [
            threading.Thread(target=self._fill_loop, name=f"sandbox-replay-pool-{n}", daemon=True)
            for n in range(fillers if fillers is not None else min(size, MAX_FILLERS))
        ]
        for thread in self._threads:
            thread.start()

    # -- handing out -------------------------------------------------------------------------

    def expect(self, runs: int) -> None:
        """At most ``runs`` more runs will take a sandbox (a hint; more still work, cold).

        From now on the pool holds no more warm and being-started sandboxes, over all keys,
        than runs still to take one: the last runs of a submission leave none to drain (each
        one drained unused cost a whole sandbox's start, ~0.5 s of CPU, for nothing).
        """
        with self._cond:
            self._remaining = max(0, int(runs))
            self._cond.notify_all()

    def take(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """The sandbox of the run ``spec``: a warm one of its key, else a cold one.

        Raises:
            InfrastructureError: the pool is closed, ``spec.run_id`` had a sandbox already, or
                a cold start failed.
        """
        return self._take(spec)

    @contextmanager
    def _take(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        key = pool_key(spec)
        stale: list[_Warm] = []
        with self._cond:
            if self._closed:
                raise InfrastructureError("the warm pool is closed", run_id=spec.run_id)
            if spec.run_id in self._bound:
                raise InfrastructureError(
                    "a sandbox was already made for this run id: run attempt ids must be unique",
                    run_id=spec.run_id,
                )
            self._bound.add(spec.run_id)
            if self._remaining is not None:
                self._remaining = max(0, self._remaining - 1)
            slot = self._slots.setdefault(key, _Slot(spec))
            warm = self._pop_fresh(slot, stale)
            # a sandbox being started for the pool is nearer than a cold start: wait for it,
            # one run per sandbox being started
            end = self._monotonic() + PENDING_WAIT_S
            while warm is None and slot.pending > slot.waiting and not self._closed:
                left = end - self._monotonic()
                if left <= 0:
                    break
                slot.waiting += 1
                try:
                    self._cond.wait(min(left, 1.0))
                finally:
                    slot.waiting -= 1
                warm = self._pop_fresh(slot, stale)
            self._cond.notify_all()  # refill while the run executes
        self._discard(stale)
        if warm is None:
            with self._cond:
                self.cold += 1
            with self._open(spec) as sandbox:
                yield sandbox
            return
        name = str(getattr(warm.sandbox, "name", ""))
        warm.sandbox.run_id = spec.run_id
        idle_s = max(0.0, self._monotonic() - warm.started)
        if hasattr(warm.sandbox, "idle_s"):  # its run time starts now, not when it was made
            warm.sandbox.idle_s = idle_s
        if self._on_assign is not None:
            self._on_assign(name, spec.labels, idle_s)
        with self._cond:
            self.assigned += 1
        log.info("pool_assigned", run_id=spec.run_id, container=name)
        context = warm.context
        try:
            yield warm.sandbox
        except BaseException as exc:
            if not context.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            context.__exit__(None, None, None)
        finally:
            if self._on_release is not None:
                self._on_release(name)

    def _pop_fresh(self, slot: _Slot, stale: list[_Warm]) -> _Warm | None:
        """The oldest warm sandbox still alive and far from its idle cap (lock held)."""
        now = self._monotonic()
        while slot.warm:
            warm = slot.warm.popleft()
            alive = getattr(warm.sandbox, "output_open", None)
            too_old = now - warm.started > self.idle_cap_s - HANDOUT_MARGIN_S
            if too_old or (callable(alive) and not alive()):
                stale.append(warm)
                continue
            return warm
        return None

    # -- filling -----------------------------------------------------------------------------

    def _wanted(self) -> tuple[PoolKey, _Slot] | None:
        """The key with the largest deficit (lock held), or None when all are full.

        None also when the pool already holds a sandbox for every run still expected.
        """
        if self._remaining is not None:
            held = sum(len(slot.warm) + slot.pending for slot in self._slots.values())
            if held >= self._remaining:
                return None
        best: tuple[PoolKey, _Slot] | None = None
        best_deficit = 0
        for key, slot in self._slots.items():
            if slot.failures >= _MAX_FAILURES:
                continue
            deficit = self.size - len(slot.warm) - slot.pending
            if deficit > best_deficit:
                best, best_deficit = (key, slot), deficit
        return best

    def _fill_loop(self) -> None:
        while True:
            with self._cond:
                wanted = self._wanted()
                while not self._closed and wanted is None:
                    self._cond.wait(1.0)
                    self._expire_locked()
                    wanted = self._wanted()
                if self._closed or wanted is None:
                    return
                _, slot = wanted
                slot.pending += 1
                pool_id = f"pool-{next(self._ids)}"
            warm = self._make(slot.template, pool_id)
            with self._cond:
                slot.pending -= 1
                if warm is None:
                    slot.failures += 1
                elif not self._closed:
                    slot.failures = 0
                    slot.warm.append(warm)
                    self.created += 1
                    warm = None
                    self._cond.notify_all()  # a run may be waiting for it (`take`)
            if warm is not None:  # closed while it started: removed at once
                self._discard([warm])
            elif slot.failures:
                time.sleep(_FAILURE_PAUSE_S)

    def _make(self, template: SandboxSpec, pool_id: str) -> _Warm | None:
        spec = pooled_spec(template, pool_id, self.idle_cap_s)
        context = self._open(spec)
        try:
            sandbox = context.__enter__()
        except Exception as exc:
            log.warning("pool_fill_failed", pool_id=pool_id, error=str(exc))
            return None
        started = self._monotonic()  # it runs from here: its idle time counts from now
        ready = getattr(sandbox, "wait_output", None)
        if callable(ready) and not ready(READY_WAIT_S):  # warm means its runtime said hello
            log.warning("pool_fill_not_ready", container=getattr(sandbox, "name", pool_id))
            self._discard([_Warm(context, sandbox, started)])
            return None
        log.debug("pool_filled", container=getattr(sandbox, "name", pool_id))
        return _Warm(context, sandbox, started)

    def _expire_locked(self) -> None:
        """Move sandboxes near their idle cap out of the pool; removed by `_discard` later."""
        stale: list[_Warm] = []
        for slot in self._slots.values():
            self._pop_stale_locked(slot, stale)
        if stale:
            threading.Thread(target=self._discard, args=(stale,), daemon=True).start()

    def _pop_stale_locked(self, slot: _Slot, stale: list[_Warm]) -> None:
        now = self._monotonic()
        keep: deque[_Warm] = deque()
        for warm in slot.warm:
            fresh = now - warm.started <= self.idle_cap_s - HANDOUT_MARGIN_S
            (keep if fresh else stale).append(warm)
        slot.warm = keep

    # -- draining ----------------------------------------------------------------------------

    def _discard(self, warm: list[_Warm]) -> None:
        for entry in warm:
            try:
                entry.context.__exit__(None, None, None)
            except Exception as exc:  # the reaper removes what could not be removed here
                log.warning("pool_remove_failed", error=str(exc))

    def warm_count(self) -> int:
        """Warm sandboxes waiting now (all keys)."""
        with self._cond:
            return sum(len(slot.warm) for slot in self._slots.values())

    def close(self, join_s: float = 30.0) -> None:
        """Stop filling and remove every warm sandbox (runs in progress keep theirs)."""
        with self._cond:
            self._closed = True
            warm = [w for slot in self._slots.values() for w in slot.warm]
            for slot in self._slots.values():
                slot.warm.clear()
            self._cond.notify_all()
        self._discard(warm)
        end = self._monotonic() + join_s
        for thread in self._threads:
            thread.join(max(0.0, end - self._monotonic()))
        log.info("pool_drained", removed=len(warm), created=self.created, assigned=self.assigned)

    def stats(self) -> dict[str, Any]:
        """``{created, assigned, cold, warm}`` counts, for logs and the bench."""
        with self._cond:
            warm = sum(len(slot.warm) for slot in self._slots.values())
            return {
                "created": self.created,
                "assigned": self.assigned,
                "cold": self.cold,
                "warm": warm,
            }
