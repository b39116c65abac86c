"""Ceilings per purpose: atomic reservations under races, and replay/judge independence."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.errors import CeilingReached
from runner.ledger import Amount, Budget, Ceiling, CeilingGuard, Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path)
    led.create_job("job", {}, {})
    yield led
    led.close()


def _race(threads: int, attempts: int, reserve: Callable[[int, int], None]) -> tuple[int, int]:
    """Run ``reserve(thread, attempt)`` from ``threads`` threads released together.

    Returns:
        (reservations granted, CeilingReached raised).
    """
    barrier = threading.Barrier(threads)
    granted = refused = 0
    count_lock = threading.Lock()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        nonlocal granted, refused
        barrier.wait()
        for i in range(attempts):
            try:
                reserve(n, i)
            except CeilingReached:
                with count_lock:
                    refused += 1
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            else:
                with count_lock:
                    granted += 1

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    return granted, refused


def test_eight_threads_racing_never_exceed_the_run_ceiling(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(runs=37)})

    def reserve(n: int, i: int) -> None:
        guard.reserve("replay", Amount(runs=1), key=f"{n}-{i}", variant=f"v{n}", task_id=f"t{i}")

    granted, refused = _race(8, 10, reserve)
    assert granted == 37 and refused == 80 - 37
    assert ledger.committed("job", "replay").runs == 37
    assert len(ledger.charges("job")) == 37


def test_eight_threads_racing_reserve_and_settle_never_exceed_usd_and_tokens(
    ledger: Ledger,
) -> None:
    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(usd=10.0, tokens=100_000)})

    def reserve(n: int, i: int) -> None:
        with guard.reserved("judge", Amount(tokens_in=900, tokens_out=100, usd=0.25)) as res:
            # Half the calls cost less than estimated; all stay within their estimate.
            guard.settle(res, Amount(tokens_in=900, tokens_out=100 if i % 2 else 50, usd=0.125))

    granted, refused = _race(8, 20, reserve)
    committed = ledger.committed("job", "judge")
    assert committed.usd <= 10.0
    assert committed.tokens <= 100_000
    assert granted + refused == 160
    assert committed.usd == pytest.approx(0.125 * granted)
    # Settled calls cost 0.125 USD, so at most 80 fit. A refusal happens only once the
    # committed total passes 9.75 USD, of which at most 7 other threads hold 0.25 USD each
    # in flight: at least 64 calls are granted whatever the interleaving.
    assert 64 <= granted <= 80
    assert ledger.totals("job")["judge"].reserved == Amount()


def test_two_ledger_handles_on_one_file_are_serialised_by_sqlite(tmp_path: Path) -> None:
    # Two handles do not share the in-process lock (as two processes would not): SQLite's own
    # write lock must keep the ceiling.
    first = Ledger.for_state_dir(tmp_path)
    second = Ledger.for_state_dir(tmp_path)
    first.create_job("job", {}, {})
    guards = [CeilingGuard(h, "job", {"replay": Ceiling(usd=5.0)}) for h in (first, second)]

    def reserve(n: int, i: int) -> None:
        guards[n % 2].reserve("replay", Amount(runs=1, usd=0.5), key=f"{n}-{i}")

    granted, _ = _race(8, 5, reserve)
    assert granted == 10
    assert first.committed("job", "replay").usd == pytest.approx(5.0)
    first.close()
    second.close()


def test_ceiling_reached_names_the_limit_and_the_pair(ledger: Ledger) -> None:
    guard = Budget(ledger, "job", {"replay": Ceiling(runs=5, sandbox_s=10.0)})
    guard.reserve("replay", Amount(runs=1, sandbox_s=8.0))
    with pytest.raises(CeilingReached) as info:
        guard.reserve("replay", Amount(runs=1, sandbox_s=4.0), variant="B", task_id="t7")
    assert info.value.exit_code == 4
    assert info.value.fields == {
        "purpose": "replay",
        "limit": "sandbox_s",
        "ceiling": 10.0,
        "used": 8.0,
        "requested": 4.0,
        "job_id": "job",
        "variant": "B",
        "task_id": "t7",
    }
    assert "sandbox_s" in str(info.value)
    head = guard.headroom("replay")
    assert (head.runs, head.sandbox_s, head.usd, head.tokens) == (4, 2.0, None, None)


def test_exhausted_replay_budget_leaves_judge_untouched(ledger: Ledger) -> None:
    guard = CeilingGuard(
        ledger, "job", {"replay": Ceiling(runs=2, usd=1.0), "judge": Ceiling(usd=1.0)}
    )
    for _ in range(2):
        guard.settle(guard.reserve("replay", Amount(runs=1, usd=0.5)), Amount(runs=1, usd=0.5))
    with pytest.raises(CeilingReached) as info:
        guard.reserve("replay", Amount(runs=1))
    assert info.value.fields["purpose"] == "replay"
    assert guard.committed("judge") == Amount()
    judged = guard.reserve("judge", Amount(tokens_in=10, usd=1.0))
    guard.settle(judged, Amount(tokens_in=10, usd=1.0))
    assert guard.committed("judge").usd == 1.0
    assert guard.committed("replay") == Amount(runs=2, usd=1.0)


def test_exhausted_judge_budget_leaves_replay_untouched(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(runs=3), "judge": Ceiling(tokens=100)})
    guard.reserve("judge", Amount(tokens_in=60, tokens_out=40))
    with pytest.raises(CeilingReached) as info:
        guard.reserve("judge", Amount(tokens_in=1))
    assert (info.value.fields["purpose"], info.value.fields["limit"]) == ("judge", "tokens")
    assert guard.committed("replay") == Amount()
    for _ in range(3):
        guard.reserve("replay", Amount(runs=1))
    assert guard.committed("replay").runs == 3
    assert guard.committed("judge").tokens == 100


def test_release_gives_budget_back_and_an_escaping_error_releases(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(runs=1)})
    res = guard.reserve("replay", Amount(runs=1))
    with pytest.raises(CeilingReached):
        guard.reserve("replay", Amount(runs=1))
    guard.release(res)
    with pytest.raises(OSError), guard.reserved("replay", Amount(runs=1)):
        raise OSError("the container never started")
    assert guard.committed("replay") == Amount()
    assert guard.reserve("replay", Amount(runs=1)).state == "reserved"


def test_a_retried_reservation_does_not_count_twice(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(runs=1)})
    first = guard.reserve("replay", Amount(runs=1), key="run/A/t1/1")
    assert guard.reserve("replay", Amount(runs=1), key="run/A/t1/1") == first
    assert guard.committed("replay").runs == 1


def test_zero_requests_pass_a_spent_dimension_and_unset_purposes_are_unbounded(
    ledger: Ledger,
) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(runs=1, usd=1.0)})
    guard.reserve("replay", Amount(runs=1))
    # A model call inside a running episode asks for no run: the run ceiling does not stop it.
    guard.reserve("replay", Amount(tokens_in=5, usd=0.5), kind="model_call")
    assert guard.ceiling("live").unbounded
    guard.reserve("live", Amount(runs=1000, usd=1e6))


def test_unknown_purpose_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="unknown purpose"):
        CeilingGuard(ledger, "job", {"bogus": Ceiling()})  # type: ignore[dict-item]


def test_ceiling_copies_a_policy_ceiling_and_flags_override() -> None:
    import dataclasses
    from types import SimpleNamespace

    policy_ceiling = SimpleNamespace(runs=500, tokens=5_000_000, usd=10.0, sandbox_s=None)
    ceiling = dataclasses.replace(Ceiling.of(policy_ceiling), runs=5)
    assert ceiling == Ceiling(runs=5, tokens=5_000_000, usd=10.0, sandbox_s=None)
    assert Ceiling.of(SimpleNamespace()).unbounded
    with pytest.raises(ValueError, match="negative"):
        Ceiling(usd=-1.0)
