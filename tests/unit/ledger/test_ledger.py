"""The ledger: schema migrations, WAL, idempotent writes, totals, resume and crash safety."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import runner.ledger
from runner.errors import InputError
from runner.ledger import (
    Amount,
    Ledger,
    estimate_usd,
    price_of,
    run_key,
    schema,
)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path / "state")
    led.create_job("job1", {"variants": ["A", "B"]}, {"concurrency": 2})
    yield led
    led.close()


def test_public_surface_is_pinned() -> None:
    assert sorted(runner.ledger.__all__) == sorted(
        [
            "FINISHED_STATUSES",
            "LEDGER_FILENAME",
            "PURPOSES",
            "UNBOUNDED",
            "ZERO",
            "Amount",
            "Budget",
            "Ceiling",
            "CeilingGuard",
            "Headroom",
            "Job",
            "Ledger",
            "ModelPrice",
            "Purpose",
            "PurposeTotals",
            "Reservation",
            "RunHistory",
            "RunRecord",
            "estimate_usd",
            "price_of",
            "prompt_tokens_bound",
            "request_bytes",
            "run_key",
        ]
    )


# -- schema ---------------------------------------------------------------------------------


def test_new_database_is_wal_at_latest_version(tmp_path: Path) -> None:
    with Ledger.for_state_dir(tmp_path / "s") as led:
        assert led.version == schema.LATEST
        assert led.path == tmp_path / "s" / "ledger.sqlite3"
    raw = sqlite3.connect(tmp_path / "s" / "ledger.sqlite3")
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(schema.LATEST,)]
    finally:
        raw.close()


def test_older_database_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    raw = sqlite3.connect(path, isolation_level=None)
    assert schema.migrate(raw, path, target=1) == 1
    raw.execute(
        "INSERT INTO jobs (id, created, status, plan, settings) VALUES ('old', 1.0, 'complete',"
        " '{}', '{}')"
    )
    raw.execute(
        "INSERT INTO runs (idempotency_key, job_id, variant, task_id, attempt, purpose, status,"
        " started, trace_path) VALUES ('run/replay/old/A/t1/1', 'old', 'A', 't1', 1, 'replay',"
        " 'succeeded', 2.0, 'x.jsonl')"
    )
    indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "charges_job_purpose" not in indexes
    raw.close()

    with Ledger(path) as led:
        assert led.version == schema.LATEST == 4
        job = led.get_job("old")
        assert job is not None and job.status == "complete"
        indexes = {r[0] for r in led._db.read("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"charges_job_purpose", "runs_job_status"} <= indexes
        (run,) = led.runs("old")  # v4: the run kept, as repeat 0
        assert (run.key, run.repeat, run.trace_path) == ("run/replay/old/A/t1/1", 0, "x.jsonl")
        assert led.finished_episodes("old") == {("A", "t1", 0)}


def test_repeats_have_attempts_and_keys_of_their_own(ledger: Ledger) -> None:
    first = ledger.start_run("job1", "A", "t1", 1, repeat=0)
    second = ledger.start_run("job1", "A", "t1", 1, repeat=1)
    assert first.key == run_key("job1", "A", "t1", 1) == "run/replay/job1/A/t1/1"
    assert second.key == run_key("job1", "A", "t1", 1, repeat=1)
    assert second.key == "run/replay/job1/A/t1/repeat-1/1" and second.repeat == 1
    ledger.finish_run(second.key, "succeeded")
    assert ledger.finished_episodes("job1") == {("A", "t1", 1)}
    assert ledger.finished_pairs("job1") == set()  # repeat 0 has not finished
    assert ledger.next_attempt("job1", "A", "t1", repeat=1) == 2
    assert ledger.next_attempt("job1", "A", "t1", repeat=2) == 1


def test_newer_database_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE schema_version SET version = ?", (schema.LATEST + 5,))
    raw.close()
    with pytest.raises(InputError) as info:
        Ledger(path)
    assert info.value.exit_code == 2
    assert str(path) in str(info.value)
    assert f"version {schema.LATEST + 5} is newer" in str(info.value)
    assert info.value.fields["field"] == "schema_version"


# -- idempotency ----------------------------------------------------------------------------


def test_retried_reservation_and_settlement_charge_once(ledger: Ledger) -> None:
    first = ledger.reserve("k1", "job1", "replay", Amount(runs=1), kind="run")
    again = ledger.reserve("k1", "job1", "replay", Amount(runs=7, usd=9.0), kind="run")
    assert again == first
    ledger.settle("k1", Amount(runs=1, sandbox_s=2.0))
    ledger.settle("k1", Amount(runs=1, sandbox_s=99.0))  # a retry: the first actual stays
    ledger.release("k1")  # releasing never un-charges a settled row
    totals = ledger.totals("job1")["replay"]
    assert totals.charged == Amount(runs=1, sandbox_s=2.0)
    assert totals.reserved == Amount()
    assert totals.settled_charges == 1
    assert len(ledger.charges("job1")) == 1


def test_retry_after_reopen_is_still_one_charge(tmp_path: Path) -> None:
    with Ledger.for_state_dir(tmp_path) as led:
        led.create_job("j", {}, {})
        led.reserve("call-1", "j", "judge", Amount(tokens_in=10, usd=0.5), kind="model_call")
    with Ledger.for_state_dir(tmp_path) as led:
        led.create_job("j", {"ignored": True}, {})  # idempotent: the stored job stays
        assert led.get_job("j").plan == {}  # type: ignore[union-attr]
        led.reserve("call-1", "j", "judge", Amount(tokens_in=10, usd=0.5), kind="model_call")
        led.settle("call-1", Amount(tokens_in=10, tokens_out=3, usd=0.25), model="m-2025")
        led.settle("call-1", Amount(tokens_in=10, tokens_out=3, usd=0.25))
        judge = led.totals()["judge"]
        assert judge.charged == Amount(tokens_in=10, tokens_out=3, usd=0.25)
        assert judge.model_calls == 1
        assert led.charges("j")[0].model == "m-2025"


def test_settling_a_released_reservation_is_refused(ledger: Ledger) -> None:
    ledger.reserve("k", "job1", "replay", Amount(runs=1), kind="run")
    assert ledger.release("k").state == "released"
    with pytest.raises(ValueError, match="released"):
        ledger.settle("k", Amount(runs=1))
    assert ledger.totals("job1")["replay"].committed == Amount()
    with pytest.raises(KeyError):
        ledger.settle("nope", Amount())


def test_runs_are_idempotent_and_keep_their_first_end(ledger: Ledger) -> None:
    key = run_key("job1", "A", "t1", 1)
    ledger.start_run("job1", "A", "t1")
    ledger.start_run("job1", "A", "t1")
    ledger.finish_run(key, "succeeded", Amount(tokens_in=5, usd=0.1, sandbox_s=1.0), "t.jsonl")
    again = ledger.finish_run(key, "failed", Amount(usd=5.0))
    assert again.status == "succeeded" and again.usage.usd == 0.1
    assert again.trace_path == "t.jsonl"
    assert len(ledger.runs("job1")) == 1
    with pytest.raises(ValueError):
        ledger.finish_run(key, "running")
    with pytest.raises(KeyError):
        ledger.finish_run("missing", "failed")


# -- totals, resume -------------------------------------------------------------------------


def test_totals_by_purpose_and_by_job(ledger: Ledger) -> None:
    ledger.create_job("job2", {}, {})
    ledger.reserve("r1", "job1", "replay", Amount(runs=1, usd=0.5), kind="run")
    ledger.settle("r1", Amount(runs=1, usd=0.25))
    ledger.reserve("r2", "job1", "replay", Amount(runs=1, usd=0.5), kind="run")
    ledger.reserve("j1", "job1", "judge", Amount(tokens_in=100, usd=1.0), kind="model_call")
    ledger.settle("j1", Amount(tokens_in=80, tokens_out=20, usd=0.75))
    ledger.reserve("r3", "job2", "replay", Amount(runs=1), kind="run")
    ledger.settle("r3", Amount(runs=1, sandbox_s=4.0))
    ledger.start_run("job1", "A", "t1")

    job1 = ledger.totals("job1")
    assert set(job1) == {"live", "replay", "judge"}
    assert job1["replay"].charged == Amount(runs=1, usd=0.25)
    assert job1["replay"].reserved == Amount(runs=1, usd=0.5)
    assert job1["replay"].committed == Amount(runs=2, usd=0.75)
    assert job1["replay"].runs_by_status == {"running": 1}
    assert job1["judge"].charged == Amount(tokens_in=80, tokens_out=20, usd=0.75)
    assert job1["live"].charged == Amount()
    everything = ledger.totals()
    assert everything["replay"].charged == Amount(runs=2, usd=0.25, sandbox_s=4.0)
    assert ledger.committed("job2", "replay") == Amount(runs=1, sandbox_s=4.0)


def test_resume_finds_finished_pairs_and_closes_orphans(ledger: Ledger) -> None:
    for variant, task, status in [
        ("A", "t1", "succeeded"),
        ("A", "t2", "failed"),
        ("B", "t1", "infra_error"),
        ("B", "t2", None),
    ]:
        ledger.start_run("job1", variant, task)
        ledger.reserve(f"res-{variant}-{task}", "job1", "replay", Amount(runs=1), kind="run")
        if status is not None:
            ledger.finish_run(run_key("job1", variant, task, 1), status)
            ledger.settle(f"res-{variant}-{task}", Amount(runs=1))
    assert ledger.finished_pairs("job1") == {("A", "t1"), ("A", "t2")}
    assert ledger.next_attempt("job1", "B", "t2") == 2
    assert ledger.next_attempt("job1", "C", "t9") == 1

    assert ledger.close_orphans("job1") == (1, 1)
    statuses = {(r.variant, r.task_id): r.status for r in ledger.runs("job1")}
    assert statuses[("B", "t2")] == "interrupted"
    totals = ledger.totals("job1")["replay"]
    assert totals.reserved == Amount()
    assert totals.charged == Amount(runs=4)  # the orphan is charged once, at its estimate
    assert ledger.close_orphans("job1") == (0, 0)


def test_job_status(ledger: Ledger) -> None:
    ledger.set_job_status("job1", "ceiling_reached")
    assert ledger.get_job("job1").status == "ceiling_reached"  # type: ignore[union-attr]
    assert [j.id for j in ledger.jobs()] == ["job1"]
    with pytest.raises(ValueError):
        ledger.set_job_status("job1", "bogus")
    with pytest.raises(KeyError):
        ledger.set_job_status("nope", "complete")


def test_transaction_groups_writes_and_rolls_back_together(ledger: Ledger) -> None:
    key = run_key("job1", "A", "t1", 1)
    with pytest.raises(RuntimeError), ledger.transaction():
        ledger.start_run("job1", "A", "t1")
        ledger.reserve("grouped", "job1", "replay", Amount(runs=1), kind="run")
        raise RuntimeError("boom")
    assert ledger.runs("job1") == []
    assert ledger.charges("job1") == []
    with ledger.transaction():
        ledger.start_run("job1", "A", "t1")
        ledger.reserve("grouped", "job1", "replay", Amount(runs=1), kind="run", run_key=key)
    assert len(ledger.runs("job1")) == 1 and len(ledger.charges("job1")) == 1


def test_threads_write_concurrently(ledger: Ledger) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                key = f"t{n}-{i}"
                ledger.reserve(key, "job1", "replay", Amount(runs=1), kind="run")
                ledger.settle(key, Amount(runs=1, usd=0.5))
                ledger.totals("job1")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ledger.totals("job1")["replay"].charged == Amount(runs=200, usd=100.0)


# -- crash safety ---------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from runner.ledger import Amount, Ledger
    led = Ledger.for_state_dir(Path(sys.argv[1]))
    led.create_job("job1", {}, {})
    mode = sys.argv[2]
    if mode == "mid-transaction":
        led.reserve("before", "job1", "replay", Amount(runs=1), kind="run")
        with led.transaction():
            led.start_run("job1", "A", "t1")
            led.reserve("during", "job1", "replay", Amount(runs=1), kind="run")
            print("ready", flush=True)
            time.sleep(60)
    else:
        i = 0
        while True:
            with led.transaction():
                led.reserve(f"k{i}", "job1", "replay", Amount(runs=1), kind="run")
                led.settle(f"k{i}", Amount(runs=1, usd=0.5))
            print(i, flush=True)
            i += 1
    """
)


def _kill_child(tmp_path: Path, mode: str, lines: int) -> list[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    seen = [child.stdout.readline().strip() for _ in range(lines)]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return seen


def test_kill_mid_transaction_leaves_last_commit(tmp_path: Path) -> None:
    assert _kill_child(tmp_path, "mid-transaction", 1) == ["ready"]
    with Ledger.for_state_dir(tmp_path) as led:
        assert led._db.read("PRAGMA integrity_check")[0][0] == "ok"
        assert [c.key for c in led.charges("job1")] == ["before"]
        assert led.runs("job1") == []
        # The dead writer's lock is gone: writing works at once.
        led.reserve("after", "job1", "replay", Amount(runs=1), kind="run")
        assert led.committed("job1", "replay") == Amount(runs=2)


def test_kill_during_a_burst_of_writes_loses_no_commit_and_halves_nothing(tmp_path: Path) -> None:
    seen = _kill_child(tmp_path, "burst", 30)
    assert seen[-1] == "29"
    with Ledger.for_state_dir(tmp_path) as led:
        assert led._db.read("PRAGMA integrity_check")[0][0] == "ok"
        charges = led.charges("job1")
        # Every committed transaction is there in full; none is there in half.
        assert len(charges) >= 30
        assert {c.state for c in charges} == {"settled"}
        totals = led.totals("job1")["replay"]
        assert totals.charged == Amount(runs=len(charges), usd=0.5 * len(charges))


# -- prices ---------------------------------------------------------------------------------


def test_estimate_usd_per_million_tokens() -> None:
    prices = {
        "gpt-4.1*": {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0},
        "gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6},
        "exact-model": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0},
    }
    assert estimate_usd(prices, "gpt-4.1", 1_000_000, 500_000) == pytest.approx(6.0)
    # A dated snapshot id from a response is priced by the longest matching glob.
    assert estimate_usd(prices, "gpt-4.1-mini-2025-04-14", 1_000_000, 0) == pytest.approx(0.4)
    assert price_of(prices, "gpt-4.1-2025-04-14").output_usd_per_mtok == 8.0
    assert estimate_usd(prices, "exact-model", 500_000, 500_000) == pytest.approx(1.0)
    with pytest.raises(InputError, match="no price for model 'claude'"):
        estimate_usd(prices, "claude", 1, 1)
    with pytest.raises(InputError, match=r"prices\.bad\.input_usd_per_mtok"):
        estimate_usd({"bad": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}, "bad", 1, 1)
    with pytest.raises(InputError, match=r"prices\.half\.output_usd_per_mtok: missing"):
        estimate_usd({"half": {"input_usd_per_mtok": 1}}, "half", 1, 1)
    with pytest.raises(ValueError):
        estimate_usd(prices, "gpt-4.1", -1, 0)


def test_estimate_usd_reads_price_objects() -> None:
    # The policy's `Price` model is an object with these two attributes.
    @dataclass(frozen=True)
    class Price:
        input_usd_per_mtok: float
        output_usd_per_mtok: float

    prices = {"gpt-4o*": Price(input_usd_per_mtok=2.5, output_usd_per_mtok=10.0)}
    assert estimate_usd(prices, "gpt-4o-2024-08-06", 2_000, 1_000) == pytest.approx(0.015)


def test_connections_of_ended_threads_are_closed(ledger: Ledger) -> None:
    for n in range(20):
        t = threading.Thread(
            target=ledger.reserve,
            args=(f"k{n}", "job1", "live", Amount(runs=1)),
            kwargs={"kind": "run"},
        )
        t.start()
        t.join()
    ledger.totals()  # this thread's connection; the ended threads' ones were pruned
    assert len(ledger._db._connections) <= 2
    assert ledger.committed("job1", "live").runs == 20


def test_a_refused_open_closes_its_connection(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE schema_version SET version = 99")
    raw.close()
    import gc
    import os

    def open_files() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    before = open_files()
    refused = []
    for _ in range(3):
        with pytest.raises(InputError) as info:
            Ledger(path)
        refused.append(info.value)  # keeps the frames (and a leaked connection) alive
    assert open_files() == before


def test_per_run_history_for_plan_estimates(ledger: Ledger) -> None:
    assert ledger.per_run_history("replay") is None
    ledger.create_job("job0", {}, {})
    for job, n, usd in (("job0", 1, 0.5), ("job1", 2, 0.25)):
        ledger.reserve(f"run-{job}", job, "replay", Amount(runs=1), kind="run")
        ledger.settle(f"run-{job}", Amount(runs=1, sandbox_s=2.0 * n))
        ledger.reserve(f"call-{job}", job, "replay", Amount(usd=1.0), kind="model_call")
        ledger.settle(f"call-{job}", Amount(tokens_in=3 * n, tokens_out=n, usd=usd))
    ledger.reserve("open", "job1", "replay", Amount(runs=1, usd=9.0), kind="run")  # not settled
    history = ledger.per_run_history("replay")
    assert history is not None and history.runs == 2
    assert history.per_run == Amount(runs=1, tokens_in=5, tokens_out=2, usd=0.375, sandbox_s=3.0)
    assert ledger.per_run_history("judge") is None


def test_per_run_history_by_variant_is_each_variant_its_own(ledger: Ledger) -> None:
    assert ledger.per_run_history_by_variant("replay") == {}
    ledger.create_job("job0", {}, {})
    for key, variant, sandbox_s in (("a1", "v1@1", 2.0), ("a2", "v1@1", 4.0), ("b1", "v2@1", 9.0)):
        ledger.reserve(key, "job0", "replay", Amount(runs=1), kind="run", variant=variant)
        ledger.settle(key, Amount(runs=1, sandbox_s=sandbox_s))
    ledger.reserve("open", "job0", "replay", Amount(runs=1), kind="run", variant="v3@1")
    found = ledger.per_run_history_by_variant("replay")
    assert set(found) == {"v1@1", "v2@1"}  # v3 has no settled run
    assert found["v1@1"].runs == 2 and found["v1@1"].per_run.sandbox_s == 3.0
    assert found["v2@1"] == ledger.per_run_history("replay", variant="v2@1")
