"""submit without Docker: the load gate (spy backend), the scheduler and the metered provider."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.backends.base import Backend, Reaped, Sandbox, SandboxSpec
from runner.cli.app import app
from runner.errors import IneligibleError
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.base import ProviderResponse
from runner.providers.metered import MeteredProvider, StopSignal
from runner.settings import Settings
from runner.submit.jobreport import JobReport
from runner.submit.options import SubmitOptions
from runner.submit.scheduler import Scheduler
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


class SpyBackend(Backend):
    name = "spy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        self.calls.append(f"sandbox {spec.run_id}")
        raise AssertionError("no sandbox may be created")

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        self.calls.append("reap")
        return []


def test_ineligible_variant_rejects_everything_before_any_backend_or_ledger_use(
    tmp_path: Path,
) -> None:
    from runner.cli.render.jobview import ConsoleJobView
    from runner.submit.runjob import run_job

    settings = Settings(state_dir=tmp_path / "state")
    spy = SpyBackend()
    made: list[SpyBackend] = []

    def factory() -> SpyBackend:
        made.append(spy)
        return spy

    opts = SubmitOptions(
        variants=(FIX / "a.yaml", FIX / "unsafe.yaml"),
        names=(None, None),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,
    )
    with pytest.raises(IneligibleError) as info:
        run_job(
            settings,
            opts,
            view=ConsoleJobView(as_json=False),
            backend_factory=factory,
        )
    assert "mail.send" in str(info.value) and "unsafe.yaml" in str(info.value)
    assert info.value.exit_code == 3
    assert made == [] and spy.calls == []  # no backend made, no container, no reap
    ledger_file = settings.state_dir / "ledger.sqlite3"
    if ledger_file.exists():  # pragma: no cover - it should not even exist
        with Ledger(ledger_file) as ledger:
            assert ledger.jobs() == [] and ledger.runs() == [] and ledger.charges() == []
    assert not ledger_file.exists()


def test_cli_ineligible_exit_3_and_dry_run_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(FIX)
    runner = CliRunner()
    bad = runner.invoke(
        app, ["submit", "--variant", "a.yaml", "--variant", "unsafe.yaml", "--tasks", "tasks.jsonl"]
    )
    assert bad.exit_code == 3, bad.output
    assert "mail.send" in bad.output
    dry = runner.invoke(
        app,
        [
            "submit",
            "--variant",
            "a.yaml",
            "--variant",
            "b.yaml",
            "--tasks",
            "tasks.jsonl",
            "--dry-run",
            "--json",
            "--ceiling-usd",
            "0.5",
        ],
    )
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout[dry.stdout.index("{") :])["plan"]
    assert plan["runs"] == 8 and plan["ceilings"]["replay"]["usd"]["source"] == "--ceiling-usd"
    assert not (tmp_path / "state" / "ledger.sqlite3").exists()
    job = runner.invoke(app, ["submit", "job.yaml", "--dry-run"])
    assert job.exit_code == 0 and "runs 3 (job.yaml)" in job.output
    missing = runner.invoke(app, ["report", "job-nope"])
    assert missing.exit_code == 2


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.for_state_dir(tmp_path) as led:
        yield led


def _pairs(n_variants: int, n_tasks: int) -> list[tuple[str, str]]:
    return [(f"v{v}", f"t{t}") for t in range(n_tasks) for v in range(n_variants)]


def test_run_ceiling_charges_exactly_five_of_twelve_at_concurrency_four(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {"replay": Ceiling(runs=5)})
    running = {"now": 0, "max": 0}
    lock = threading.Lock()

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        with lock:
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        time.sleep(0.05)
        with lock:
            running["now"] -= 1
        return "succeeded", None, Amount(sandbox_s=0.05)

    stop = StopSignal()
    outcomes = Scheduler(ledger, guard, "job-1", run_pair, concurrency=4, stop=stop).run(
        _pairs(3, 4)
    )
    ran = [o for o in outcomes if o.status == "succeeded"]
    not_run = [o for o in outcomes if o.status == "not_run"]
    assert len(ran) == 5 and len(not_run) == 7
    assert all("replay ceiling reached: runs" in (o.reason or "") for o in not_run)
    assert ledger.totals("job-1")["replay"].charged.runs == 5
    assert ledger.totals("job-1")["replay"].reserved.runs == 0
    assert running["max"] <= 4
    assert stop.reason == "ceiling_reached" and stop.fields["limit"] == "runs"


def test_interrupt_stops_dispatch_and_marks_running_runs_interrupted(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {})
    started = threading.Event()
    release = threading.Event()
    running: list[str] = []
    lock = threading.Lock()

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        with lock:
            running.append(key)
            if len(running) == 2:  # both slots busy: interrupt now (was racy with one)
                started.set()
        release.wait(5)
        return "crashed", None, Amount()

    scheduler = Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal())

    def interrupt() -> None:
        started.wait(5)
        scheduler.interrupt()
        release.set()

    threading.Thread(target=interrupt).start()
    outcomes = scheduler.run(_pairs(2, 4))
    statuses = [o.status for o in outcomes]
    assert statuses.count("interrupted") == 2 and statuses.count("not_run") == 6
    assert {r.status for r in ledger.runs("job-1")} == {"interrupted"}
    assert ledger.finished_pairs("job-1") == set()  # resume runs them again


def test_resume_skips_finished_pairs_and_never_charges_twice(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {})
    calls: list[tuple[str, str]] = []

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        calls.append((variant, task_id))
        return "succeeded", None, Amount()

    pairs = _pairs(2, 2)
    Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal()).run(pairs[:3])
    done = ledger.finished_pairs("job-1")
    Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal()).run(
        [p for p in pairs if p not in done]
    )
    assert sorted(calls) == sorted(pairs)
    assert ledger.totals("job-1")["replay"].charged.runs == 4


def test_repeats_are_fresh_runs_each_charged_and_resume_safe(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {})
    keys: list[str] = []

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        keys.append(key)
        return "succeeded", None, Amount()

    episodes = [(v, t, r) for t in ("t0", "t1") for r in range(3) for v in ("v0", "v1")]
    first = Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal())
    first.run(episodes[:5])  # a job stopped part-way
    done = ledger.finished_episodes("job-1")
    assert len(done) == 5
    again = Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal())
    outcomes = again.run([e for e in episodes if e not in done])
    assert [(o.variant, o.task_id, o.repeat) for o in outcomes] == episodes[5:]
    assert len(keys) == len(set(keys)) == 12  # every repeat its own key, none run twice
    assert "run/replay/job-1/v0/t0/1" in keys and "run/replay/job-1/v0/t0/repeat-2/1" in keys
    assert ledger.totals("job-1")["replay"].charged.runs == 12
    assert {(r.variant, r.task_id, r.repeat) for r in ledger.runs("job-1")} == set(episodes)


class CountingProvider:
    name = "fake"

    def __init__(self, tokens: tuple[int, int] = (100, 20)) -> None:
        self.requests: list[dict[str, Any]] = []
        self.tokens = tokens
        self.lock = threading.Lock()

    def complete(self, request: Any, role: str) -> ProviderResponse:
        with self.lock:
            self.requests.append(dict(request))
        body = json.dumps(
            {
                "model": "gpt-4.1-mini-2025",
                "usage": {"prompt_tokens": self.tokens[0], "completion_tokens": self.tokens[1]},
                "choices": [{"message": {"role": "assistant", "content": "x"}}],
            }
        )
        return ProviderResponse(
            body=body,
            model="gpt-4.1-mini-2025",
            usage={"prompt_tokens": self.tokens[0], "completion_tokens": self.tokens[1]},
        )


PRICES = {"gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6}}
REQUEST = {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hi"}]}


def _metered(guard: CeilingGuard, stop: StopSignal, inner: Any, run: str) -> MeteredProvider:
    return MeteredProvider(
        inner,
        guard,
        stop,
        PRICES,
        model="gpt-4.1-mini",
        variant="v",
        task_id=run,
        run_key=f"run/{run}",
        max_tokens=50,
    )


def test_metered_calls_cap_max_tokens_settle_actuals_and_refuse_past_the_ceiling(
    ledger: Ledger,
) -> None:
    ledger.create_job("job-1", {}, {})
    inner = CountingProvider()
    usd_per_call = (100 * 0.4 + 20 * 1.6) / 1e6
    guard = CeilingGuard(ledger, "job-1", {"replay": Ceiling(tokens=1000)})
    stop = StopSignal()
    provider = _metered(guard, stop, inner, "r1")
    first = provider.complete({**REQUEST, "max_tokens": 4000}, "model")
    assert first.error is None and inner.requests[0]["max_tokens"] == 50  # capped
    assert provider.charged == Amount(tokens_in=100, tokens_out=20, usd=usd_per_call)
    served = 1
    while not stop.is_set():
        reply = provider.complete(REQUEST, "model")
        served += reply.error is None
    assert reply.error is not None and reply.error["class"] == "CeilingReached"
    assert len(inner.requests) == served  # the refused call never reached the provider
    assert ledger.totals("job-1")["replay"].committed.tokens <= 1000
    other = _metered(guard, stop, inner, "r2").complete(REQUEST, "model")
    assert other.error is not None and other.error["class"] == "CeilingReached"
    assert len(inner.requests) == served  # every run's further calls are refused


def test_usd_ceiling_holds_across_concurrent_runs(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    ceiling_usd = 0.002  # room for about 19 calls of ~0.0001 USD
    guard = CeilingGuard(ledger, "job-1", {"replay": Ceiling(usd=ceiling_usd)})
    stop = StopSignal()
    inner = CountingProvider(tokens=(40, 50))

    def run(index: int) -> None:
        provider = _metered(guard, stop, inner, f"r{index}")
        for _ in range(50):
            if provider.complete(REQUEST, "model").error is not None:
                return

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = ledger.totals("job-1")["replay"]
    assert stop.is_set() and len(inner.requests) >= 10
    assert totals.charged.usd <= ceiling_usd and totals.reserved.usd == 0


def test_a_failed_call_is_released_not_charged(ledger: Ledger) -> None:
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {})

    class Failing:
        name = "failing"

        def complete(self, request: Any, role: str) -> ProviderResponse:
            return ProviderResponse(
                body=None, error={"class": "ProviderUnavailable", "message": "down"}
            )

    reply = _metered(guard, StopSignal(), Failing(), "r1").complete(REQUEST, "model")
    assert reply.error == {"class": "ProviderUnavailable", "message": "down"}
    assert [c.state for c in ledger.charges("job-1")] == ["released"]


def test_report_renders_ceilings_sources_spend_standings_and_pairs_not_run() -> None:
    import io

    from rich.console import Console

    from runner.cli.render.report import render_report

    zero = {"runs": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0, "sandbox_s": 0.0}
    report = {
        "job_id": "job-1",
        "status": "ceiling_reached",
        "exit_code": 4,
        "plan": {"formula": "2 variants x 2 tasks = 4 runs"},
        "ceilings": {"replay": {"runs": {"value": 3, "source": "--ceiling-runs"}}},
        "ceiling_reached": {"message": "replay ceiling reached: runs 3 used + 1 > 3"},
        "spend": {"replay": {"charged": {**zero, "runs": 3}, "model_calls": 0}},
        "runs_by_status": {"not_run": 1, "succeeded": 3},
        "grading": {
            "judge": "rubric",
            "variants": [
                {
                    "variant": "challenger-with-a-long-name",
                    "rating": {"mu": 27.0, "sigma": 8.0, "ordinal": 3.0},
                    "mean_rank": 1.0,
                    "versus": {"a": {"wins": 1, "ties": 0, "losses": 0}},
                    "episodes_by_status": {"succeeded": 2},
                },
            ],
            "tasks": [
                {
                    "task_id": "t1",
                    "ranking": [{"variant": "challenger-with-a-long-name", "rank": 1}],
                }
            ],
            "ungraded": [{"task_id": "t2", "reason": "fewer_than_two_results"}],
        },
        "not_run": [{"variant": "a", "task_id": "t2", "reason": "replay ceiling reached"}],
        "stopped_by_ceiling": [],
    }
    out = io.StringIO()
    render_report(JobReport.from_json(report, file="report.json"), Console(file=out, width=200))
    text = out.getvalue()
    assert "runs 3 (--ceiling-runs)" in text and "exit 4" in text
    assert "challenger-with-a-long-name" in text and "1/0/0" in text
    assert "1 pair not run" in text and "1 pair replay ceiling reached: a×t2" in text
    assert "1 task ungraded (fewer_than_two_results): t2" in text
