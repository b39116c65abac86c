"""A run reserves the sandbox seconds it can be charged: its effective timeout plus the grace.

A run is charged from container start until after teardown; past the deadline the host polls,
kills, drains output (KILL_DRAIN_S) and waits for the exit (SHUTDOWN_GRACE_S). Reserving only the
timeout let a timed-out run settle above its reservation and pass the sandbox_s ceiling.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.episode.driver import KILL_DRAIN_S, SHUTDOWN_GRACE_S
from runner.episode.metered_run import RUN_GRACE_S, metered_run
from runner.policy.models import DEFAULT_RATE_LIMIT_WAIT_S
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit.options import CeilingFlags, SubmitOptions
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


def test_grace_covers_kill_drain_and_exit_wait() -> None:
    assert RUN_GRACE_S >= KILL_DRAIN_S + SHUTDOWN_GRACE_S


def test_a_one_off_run_reserves_the_settings_timeout_plus_grace(tmp_path: Path) -> None:
    # the policy's longest rate-limit wait does not count against the timeout: reserved too
    policy = SimpleNamespace(
        limits=SimpleNamespace(timeout_s=300.0),
        ceilings=None,
        rate_limits=SimpleNamespace(max_wait_s=30.0),
    )
    settings = Settings(state_dir=tmp_path / "state", timeout_s=7.0)
    with metered_run(settings, "replay", "run", "v@1", "t1", policy) as metered:
        (row,) = metered.ledger.charges(metered.job_id)
        assert row.estimate.sandbox_s == pytest.approx(7.0 + 30.0 + RUN_GRACE_S)
        metered.finish("succeeded", {"meter": {"sandbox_s": 7.0 + KILL_DRAIN_S}}, "t.jsonl")


class _Captured(Exception):
    pass


def test_submit_bounds_a_run_by_the_effective_timeout_plus_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def scheduler(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise _Captured

    monkeypatch.setattr(submit_module, "Scheduler", scheduler)
    without_description(monkeypatch)  # the stub backend runs no sandbox
    settings = Settings(state_dir=tmp_path / "state", timeout_s=9.0)
    options = SubmitOptions(
        variants=(FIX / "a.yaml",),
        names=(None,),
        tasks=FIX / "tasks.jsonl",
        replay_ceiling=CeilingFlags({"sandbox_s": 1000.0}, {"sandbox_s": "--ceiling-sandbox-s"}),
        cwd=FIX,
    )
    plan = submit_module.prepare(options, settings, job_id="job-1")
    backend = StubBackend()
    with pytest.raises(_Captured):
        submit_module.execute(
            plan, options, settings, backend_factory=lambda: backend, handle_signals=False
        )
    # the budget clock never gives a run more than its own worst case
    assert seen["clock"].run_s == pytest.approx(9.0 + DEFAULT_RATE_LIMIT_WAIT_S + RUN_GRACE_S)
