"""The budget clock: sandbox seconds shared by running sandboxes, never passed.

On main a running run held its whole timeout plus grace (375.7 sandbox-s under ``shadow``) and
the first reservation that did not fit *now* stopped the job: 115.8 of 7,200 sandbox-s charged
when it reported the ceiling reached. Here: the arithmetic with an injected clock, a random
walk of admissions, ends and overruns that must never pass the ceiling (in memory and in the
ledger), and the scheduler filling a tight ceiling to at least 80 % before it stops.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.errors import CeilingReached
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.metered import StopSignal
from runner.submit.budgetclock import BudgetClock
from runner.submit.scheduler import Scheduler


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.for_state_dir(tmp_path) as led:
        led.create_job("job", {}, {})
        yield led


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _clock(ledger: Ledger, ceiling_s: float, now: FakeTime, **kw: float) -> BudgetClock:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(sandbox_s=ceiling_s)})
    kw.setdefault("typical_s", kw.get("min_run_s", 1.0))  # as if earlier jobs had told
    return BudgetClock(guard, run_s=kw.pop("run_s", 300.0), monotonic=now, **kw)


def _never() -> bool:
    return False


def test_deadlines_are_shared_and_move_back_when_a_run_ends(ledger: Ledger) -> None:
    now = FakeTime()
    clock = _clock(ledger, 40.0, now, margin_s=1.0, min_run_s=1.0)
    a = clock.admit("a", give_up=_never)
    assert clock.remaining_s("a") == pytest.approx(39.0)  # alone: all but its kill margin
    assert a.estimate.sandbox_s == pytest.approx(40.0)
    clock.admit("b", give_up=_never)
    # shared: (40 - 2 margins) / 2 each; a's deadline moved nearer, its reservation shrank
    assert clock.remaining_s("a") == pytest.approx(19.0)
    assert clock.remaining_s("b") == pytest.approx(19.0)
    assert ledger.committed("job", "replay").sandbox_s == pytest.approx(40.0)
    now.now += 5.0
    clock.finish("b", "b/run", Amount(runs=1, sandbox_s=5.0), natural=True)
    # b used 5: a has 40 - 5 (charged) - 5 (its own elapsed) - 1 (margin) left
    assert clock.remaining_s("a") == pytest.approx(29.0)
    assert clock.smallest_run_s == pytest.approx(5.0)
    assert ledger.committed("job", "replay").sandbox_s == pytest.approx(40.0)


def test_a_run_that_does_not_fit_now_waits_and_only_a_full_budget_stops(ledger: Ledger) -> None:
    now = FakeTime()
    clock = _clock(ledger, 10.0, now, margin_s=1.0, min_run_s=3.5)
    clock.admit("a", give_up=_never)
    # a second run gets (10 - 2) / 2 = 4 >= 3.5: admitted; a third would get 2.3: it waits
    clock.admit("b", give_up=_never)
    with pytest.raises(CeilingReached) as waited:
        clock.admit("c", give_up=lambda: True)  # gives up at once instead of waiting
    assert waited.value.fields["final"] is False
    now.now += 2.0
    clock.finish("a", "a/run", Amount(runs=1, sandbox_s=2.0), natural=True)
    clock.finish("b", "b/run", Amount(runs=1, sandbox_s=2.0), natural=True)
    # 4 charged; the smallest run is 2: 4 + 2 + 1 <= 10, so there is room again
    clock.admit("c", give_up=_never)
    now.now += 6.0
    clock.finish("c", "c/run", Amount(runs=1, sandbox_s=5.0), natural=True)
    # 9 charged: 9 + 2 + 1 > 10 -- the smallest possible run cannot fit: final
    with pytest.raises(CeilingReached) as final:
        clock.admit("d", give_up=_never)
    assert final.value.fields["final"] is True and final.value.fields["limit"] == "sandbox_s"
    assert ledger.committed("job", "replay").sandbox_s == pytest.approx(9.0)


def test_a_waiting_admission_wakes_when_a_run_ends(ledger: Ledger) -> None:
    clock = _clock(ledger, 3.0, FakeTime(), margin_s=0.5, min_run_s=1.5)
    clock.admit("a", give_up=_never)  # shared by two, (3 - 1) / 2 = 1 < 1.5: a second waits
    admitted = threading.Event()

    def second() -> None:
        clock.admit("b", give_up=_never)
        admitted.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not admitted.wait(0.3)  # waiting, not stopped
    clock.finish("a", "a/run", Amount(runs=1, sandbox_s=1.0), natural=True)
    assert admitted.wait(5)
    thread.join()


def test_a_charge_is_capped_at_its_bound(ledger: Ledger) -> None:
    now = FakeTime()
    clock = _clock(ledger, 10.0, now, margin_s=1.0)
    clock.admit("a", give_up=_never)  # bound 10
    charged = clock.finish("a", "a/run", Amount(runs=1, sandbox_s=14.0), natural=True)
    assert charged.sandbox_s == pytest.approx(10.0)
    assert ledger.totals("job")["replay"].charged.sandbox_s == pytest.approx(10.0)


def test_no_interleaving_passes_the_ceiling(ledger: Ledger) -> None:
    """A random walk: admissions, starts, time passing, ends using up to 3 s past the deadline."""
    rng = random.Random(25)
    now = FakeTime()
    ceiling = 60.0
    clock = _clock(ledger, ceiling, now, margin_s=0.5, min_run_s=0.5, run_s=20.0)
    running: list[str] = []
    n = 0
    for _ in range(2000):
        move = rng.random()
        if move < 0.35:
            try:
                clock.admit(f"r{n}", give_up=lambda: True)
                running.append(f"r{n}")
            except CeilingReached:
                pass
            n += 1
        elif move < 0.45 and running:
            clock.begin(rng.choice(running))
        elif move < 0.75:
            now.now += rng.random() * 2.0
        elif running:
            key = running.pop(rng.randrange(len(running)))
            late = rng.random() * 3.0 if rng.random() < 0.3 else 0.0
            used = max(0.0, min(clock.remaining_s(key), 25.0) + late)
            clock.finish(key, f"{key}/run", Amount(runs=1, sandbox_s=used), natural=True)
        committed = ledger.committed("job", "replay").sandbox_s
        assert committed <= ceiling + 1e-6
    for key in running:
        clock.finish(key, f"{key}/run", Amount(runs=1, sandbox_s=99.0), natural=False)
    assert ledger.totals("job")["replay"].charged.sandbox_s <= ceiling + 1e-6
    assert n > 100


def test_the_scheduler_fills_a_tight_ceiling_and_lists_every_pair_not_run(ledger: Ledger) -> None:
    """100 runs of ~0.1 s at concurrency 16 under a 2-s ceiling: stops full, never over.

    On main each run held its worst case, so the first admissions filled the ceiling with
    holds and the job stopped having charged almost nothing.
    """
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(sandbox_s=2.0)})
    clock = BudgetClock(guard, run_s=30.0, margin_s=0.05, min_run_s=0.05)

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        grant = clock.grant(key)
        assert grant is not None
        grant.begin()
        started = time.monotonic()
        status = "succeeded"
        while time.monotonic() - started < 0.1:
            if grant.remaining_s() <= 0:
                status = "ceiling_reached"
                break
            time.sleep(0.005)
        return status, None, Amount(sandbox_s=time.monotonic() - started)

    stop = StopSignal()
    scheduler = Scheduler(ledger, guard, "job", run_pair, concurrency=16, stop=stop, clock=clock)
    outcomes = scheduler.run([("v", f"t{i}") for i in range(100)])
    charged = ledger.totals("job")["replay"].charged.sandbox_s
    assert charged <= 2.0
    # it stopped only when the smallest run (~0.1 s; more on a loaded machine) and its kill
    # margin no longer fit: at least 80 % of the ceiling used on an idle machine
    assert charged + clock.smallest_run_s + 0.05 > 2.0
    assert stop.reason == "ceiling_reached" and stop.fields["limit"] == "sandbox_s"
    not_run = [o for o in outcomes if o.status == "not_run"]
    assert not_run and all("sandbox_s" in (o.reason or "") for o in not_run)
    assert sum(o.status == "succeeded" for o in outcomes) >= 2


def test_a_dead_hosts_run_is_charged_at_most_its_bound(ledger: Ledger) -> None:
    """SIGKILL of the host: its sandbox runs on to its own lifetime cap, past the deadline the
    host would have killed it at; the reaper charges the engine's seconds, at most the bound
    (on main: all 50 s, past a 10-s ceiling)."""
    clock = _clock(ledger, 10.0, FakeTime(), margin_s=1.0)
    reservation = clock.admit("a", give_up=_never)
    ledger.start_run("job", "v", "t", 1, key="a")
    assert reservation.estimate.sandbox_s == pytest.approx(10.0)
    assert ledger.settle_dead_run("a", 50.0)
    (run,) = ledger.runs("job")
    assert run.status == "interrupted" and run.usage.sandbox_s == 50.0  # the truth is kept
    assert ledger.totals("job")["replay"].charged.sandbox_s == pytest.approx(10.0)


def test_a_first_wave_waits_for_one_run_to_tell_how_long_runs_take(ledger: Ledger) -> None:
    """Before any run ended (and with no earlier jobs), a run is admitted only with its whole
    worst case free: shares of a guessed second would cut every run of the first wave."""
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(sandbox_s=40.0)})
    now = FakeTime()
    clock = BudgetClock(guard, run_s=30.0, margin_s=1.0, monotonic=now)
    clock.admit("a", give_up=_never)
    with pytest.raises(CeilingReached) as waited:
        clock.admit("b", give_up=lambda: True)  # (40 - 2) / 2 = 19 < 30: waits
    assert waited.value.fields["final"] is False
    now.now += 2.5
    clock.finish("a", "a/run", Amount(runs=1, sandbox_s=2.5), natural=True)
    assert clock.typical_run_s == 2.5
    for key in "bcdefghij":  # (40 - 2.5 - n) / n >= 2.5 for n up to 10
        clock.admit(key, give_up=_never)
    assert clock.running() == 9
