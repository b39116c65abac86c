"""A pooled sandbox's run, bound at assignment and read back by the reaper."""

from __future__ import annotations

from pathlib import Path

from runner.backends import labels as L
from runner.backends.base import Reaped
from runner.episode.poolbindings import MAX_BINDING_BYTES, PoolBindings

RUN_LABELS = {L.LEDGER_KEY: "job/v/t1/1", L.LEDGER: "abc", "io.sandbox-replay.task": "t1"}
POOLED = {L.POOL: "1", L.RUN: "pool-3"}


def _reaped(name: str, seconds: float | None = 12.5) -> Reaped:
    return Reaped(name=name, run_id="pool-3", labels=POOLED, sandbox_s=seconds)


def test_a_dead_hosts_pooled_run_gets_its_ledger_key_and_loses_the_idle_wait(
    tmp_path: Path,
) -> None:
    bindings = PoolBindings(tmp_path)
    bindings.bind("sandbox-replay-pool-3-s1", RUN_LABELS, idle_s=10.0)
    (entry,) = bindings.settled([_reaped("sandbox-replay-pool-3-s1")])
    assert entry.labels[L.LEDGER_KEY] == "job/v/t1/1" and entry.labels[L.LEDGER] == "abc"
    assert entry.sandbox_s == 2.5  # the engine's 12.5 s less the 10 s it waited unassigned
    assert list((tmp_path / "pool").iterdir()) == []  # read once, then removed


def test_a_run_that_ended_here_leaves_no_binding(tmp_path: Path) -> None:
    bindings = PoolBindings(tmp_path)
    bindings.bind("sandbox-replay-pool-4-s1", RUN_LABELS, idle_s=1.0)
    bindings.release("sandbox-replay-pool-4-s1")
    entry = _reaped("sandbox-replay-pool-4-s1")
    assert bindings.settled([entry]) == [entry]


def test_unbound_unpooled_hostile_or_broken_entries_change_nothing(tmp_path: Path) -> None:
    bindings = PoolBindings(tmp_path)
    bindings.bind("../escape", RUN_LABELS, idle_s=1.0)  # not a valid name: nothing written
    bindings.bind("sandbox-replay-pool-5-s1", {"io.sandbox-replay.task": "t"}, 1.0)  # no key
    assert not (tmp_path / "pool").exists() or list((tmp_path / "pool").iterdir()) == []
    (tmp_path / "pool").mkdir(exist_ok=True)
    (tmp_path / "pool" / "sandbox-replay-pool-6-s1.json").write_text('{"ledger_key": 1}')
    (tmp_path / "pool" / "sandbox-replay-pool-7-s1.json").write_text("x" * (MAX_BINDING_BYTES + 1))
    (tmp_path / "pool" / "sandbox-replay-pool-8-s1.json").write_text(
        '{"ledger_key": "k", "idle_s": NaN}'
    )
    entries = [
        _reaped("../escape"),
        _reaped("sandbox-replay-pool-5-s1"),
        _reaped("sandbox-replay-pool-6-s1"),
        _reaped("sandbox-replay-pool-7-s1"),
        _reaped("sandbox-replay-pool-8-s1"),
        Reaped(name="sandbox-replay-run-1-s1", labels={L.LEDGER_KEY: "k2"}, sandbox_s=3.0),
    ]
    assert bindings.settled(entries) == entries
    (tmp_path / "pool" / "sandbox-replay-pool-9-s1.json").write_text(
        '{"ledger_key": "k", "idle_s": 1}'
    )
    (none,) = bindings.settled([_reaped("sandbox-replay-pool-9-s1", seconds=None)])
    assert none.sandbox_s is None and none.labels[L.LEDGER_KEY] == "k"
