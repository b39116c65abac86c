"""The runtime's own count of OOM kills, and the host ORing it with the engine's flag."""

from __future__ import annotations

from pathlib import Path

from runner.backends.base import ExitState
from runner.episode.status import runtime_oom_kills, with_runtime_oom
from runner.runtime.oomcount import OomCounter, oom_kill_count


def test_cgroup_v1_and_v2_counters_are_read(tmp_path: Path) -> None:
    v1 = tmp_path / "memory.oom_control"
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    v2 = tmp_path / "memory.events"
    v2.write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    assert oom_kill_count((str(v1),)) == 3
    assert oom_kill_count((str(v2),)) == 2
    assert oom_kill_count((str(tmp_path / "absent"), str(v2))) == 2  # first readable wins


def test_no_counter_is_unknown_not_zero(tmp_path: Path) -> None:
    old_kernel = tmp_path / "memory.oom_control"
    old_kernel.write_text("oom_kill_disable 0\nunder_oom 0\n")  # before Linux 4.13
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"oom_kill -1\n\xff\xfe oom_kill x\n")
    assert oom_kill_count((str(old_kernel),)) is None
    assert oom_kill_count((str(garbage),)) is None
    assert oom_kill_count((str(tmp_path),)) is None  # a folder: unreadable


def test_the_counter_counts_from_the_run_start(tmp_path: Path) -> None:
    events = tmp_path / "memory.events"
    events.write_text("oom_kill 5\n")  # a warm spare's group: kills before this run
    counter = OomCounter((str(events),))
    assert counter.since_start() == 0
    events.write_text("oom_kill 6\n")
    assert counter.since_start() == 1
    events.unlink()
    assert counter.since_start() is None


def test_the_host_ors_the_runtime_count_with_the_engine_flag() -> None:
    engine_missed = ExitState(exit_code=0, oom_killed=False)
    assert with_runtime_oom({"status": "succeeded", "oom_kills": 1}, engine_missed) == ExitState(
        exit_code=0, oom_killed=True
    )
    assert with_runtime_oom({"status": "succeeded", "oom_kills": 0}, engine_missed) is engine_missed
    assert with_runtime_oom(None, engine_missed) is engine_missed
    assert with_runtime_oom({"oom_kills": 1}, None) is None
    flagged = ExitState(exit_code=137, oom_killed=True)
    assert with_runtime_oom({"oom_kills": 0}, flagged) is flagged  # the engine's flag stands


def test_a_hostile_count_claims_nothing() -> None:
    for bad in (True, "1", 1.5, -1, 1 << 40, [1], {"n": 1}):
        assert runtime_oom_kills({"oom_kills": bad}) is None
        state = with_runtime_oom({"oom_kills": bad}, ExitState(exit_code=0))
        assert state is not None and state.oom_killed is False
