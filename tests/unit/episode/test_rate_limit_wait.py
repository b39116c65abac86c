"""A rate-limit wait does not count against the run's timeout, and the trace says how long.

The driver's clock and the limiter's are one fake clock that the limiter's sleep advances (the
wait takes no real time); the sandbox is the local fake runtime of test_episode_host.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from runner.domain.ids import sequential_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.driver import run_episode
from runner.episode.request import EpisodeRequest
from runner.policy.models import RateLimit, RateLimits
from runner.providers.ratelimit import RateLimitedProvider, RateLimiter, WaitAccount
from runner.providers.scripted import ScriptedProvider
from runner.settings import Settings
from runner.tools.snapshot import SnapshotEntry, build_snapshot
from tests.support.fakes import SubprocessBackend
from tests.unit.episode.test_episode_host import (
    FAKE_RUNTIME,
    SCHEMA_VALIDATOR,
    WORKFLOW,
    FakeRegistry,
    _model,
)


class SkewedClock:
    """Real monotonic time plus whatever the limiter slept (at once)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def sleep(self, seconds: float) -> None:
        self.offset += seconds


def _episode(tmp_path: Path, *, wait_s: float, max_wait_s: float) -> dict[str, object]:
    wf_path = tmp_path / "wf.yaml"
    wf_path.write_text(WORKFLOW)
    script = tmp_path / "fake_runtime.py"
    script.write_text(FAKE_RUNTIME)
    (tmp_path / "demo_tools.py").write_text("x = 1\n")
    snapshot = build_snapshot(
        [SnapshotEntry(tmp_path.resolve(), "demo_tools.py")], state_dir=tmp_path / "state"
    )
    policy = SimpleNamespace(
        name="shadow",
        mode="shadow",
        hash="p-hash",
        prices={},
        limits=SimpleNamespace(timeout_s=20, memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16),
        rate_limits=RateLimits(max_wait_s=max_wait_s),
    )
    request = EpisodeRequest(
        workflow=load_workflow(wf_path),
        task=Task(task_id="t1", input={"q": "hi"}, clock_start=100.0),
        policy=policy,
        registry=FakeRegistry(tmp_path),
        image="img:1",
        snapshot=snapshot,
    )
    clock = SkewedClock()
    per_min = 60.0 / wait_s  # one request every wait_s seconds; the first is taken below
    limits = RateLimits(
        max_wait_s=max_wait_s, models={"x": RateLimit(requests_per_min=max(1, int(per_min)))}
    )
    limiter = RateLimiter(limits, clock=clock, sleep=clock.sleep)
    limiter.reserve("x", 1, max_wait_s=0)  # another sandbox's call took this minute's request
    waits = WaitAccount(max_wait_s, clock)
    provider = RateLimitedProvider(ScriptedProvider(_model), limiter, waits)
    result = run_episode(
        request,
        backend=SubprocessBackend([sys.executable, "-u", str(script), "succeeded"]),
        settings=Settings(state_dir=tmp_path / "state", timeout_s=5),
        provider=provider,
        id_factory=sequential_ids(),
        monotonic=clock,
        waits=waits,
    )
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    for line in lines:
        assert not [e.message for e in SCHEMA_VALIDATOR.iter_errors(line)], line["type"]
    end = lines[-1]
    assert end["type"] == "end"
    return end


def test_a_wait_longer_than_the_timeout_is_not_a_timeout(tmp_path: Path) -> None:
    # the 5 s timeout passes while the model call waits 60 s on the rate limit: not counted
    end = _episode(tmp_path, wait_s=60.0, max_wait_s=120.0)
    assert end["status"] == "succeeded", end.get("reason")
    assert abs(end["meter"]["rate_limit_wait_s"] - 60.0) < 1.0  # type: ignore[index]


def test_a_wait_past_the_episodes_allowance_is_refused_at_once(tmp_path: Path) -> None:
    end = _episode(tmp_path, wait_s=60.0, max_wait_s=10.0)
    assert end["meter"]["rate_limit_wait_s"] == 0.0  # type: ignore[index]


def test_a_live_one_off_run_keeps_the_policys_rate_limits_and_a_replay_does_not() -> None:
    from runner.episode.metered_run import rate_limited
    from runner.policy import load_policy

    policy = load_policy("shadow")
    inner = ScriptedProvider([])
    live, waits = rate_limited(inner, "live", policy, "m")
    assert isinstance(live, RateLimitedProvider) and live.inner is inner
    assert isinstance(waits, WaitAccount) and live.account is waits
    assert live.limiter.table is policy.rate_limits
    # a replay is served from its trace; no provider or no table: nothing to limit
    assert rate_limited(inner, "replay", policy, "m") == (inner, None)
    assert rate_limited(None, "live", policy, "m") == (None, None)
    assert rate_limited(inner, "live", SimpleNamespace(), "m") == (inner, None)
