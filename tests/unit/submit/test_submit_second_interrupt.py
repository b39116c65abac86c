"""A second Ctrl-C still ends ``submit`` with the resume hint (and the report), exit 130.

The first Ctrl-C stops the job; a second one that arrived while the report was
being built went through as a bare KeyboardInterrupt: no report, no ``continue with:`` hint.
Here the first SIGINT arrives during a run and the second while the report is built (both
sent to this process, as a terminal sends them). No Docker: the runs are stubbed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runner.cli.render import jobview
from runner.cli.render.jobview import ConsoleJobView
from runner.errors import EXIT_INTERRUPTED
from runner.ledger import Amount
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit import pairs as pairs_module
from runner.submit import report as report_module
from runner.submit.options import SubmitOptions
from runner.submit.runjob import run_job
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def options() -> SubmitOptions:
    return SubmitOptions(
        variants=(FIX / "a.yaml", FIX / "b.yaml"),
        names=(None, None),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,
    )


def _stub_runs(monkeypatch: pytest.MonkeyPatch, during_report: Any) -> None:
    started = threading.Event()

    def run_pair(self: Any, variant: str, task_id: str, key: str) -> tuple[str, Any, Amount]:
        if not started.is_set():
            started.set()
            _ctrl_c()  # the first Ctrl-C: while a run is going
            time.sleep(0.5)
        return "succeeded", None, Amount()

    monkeypatch.setattr(pairs_module.PairRunner, "run_pair", run_pair)
    without_description(monkeypatch)  # the stub backend runs no sandbox
    real_build = report_module.build_report

    def build_report(*args: Any, **kwargs: Any) -> Any:
        during_report()
        return real_build(*args, **kwargs)

    monkeypatch.setattr(submit_module, "build_report", build_report)


def _backend() -> Any:
    return StubBackend()


def test_a_second_ctrl_c_while_the_report_is_built_still_prints_the_hint(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: SubmitOptions,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def second() -> None:
        _ctrl_c()
        time.sleep(0.2)  # the handler runs here, in the main thread

    _stub_runs(monkeypatch, second)
    settings = Settings(state_dir=tmp_path / "state")
    try:
        code = run_job(
            settings,
            options,
            view=ConsoleJobView(as_json=True),
            backend_factory=_backend,
        )
    except KeyboardInterrupt:
        pytest.fail("the second Ctrl-C escaped as KeyboardInterrupt: no report, no resume hint")
    out, err = capsys.readouterr()
    assert code == EXIT_INTERRUPTED
    assert "continue with: sandbox-replay submit --resume job-" in err
    assert '"status": "interrupted"' in out  # the report was still printed
    jobs = list((tmp_path / "state" / "jobs").iterdir())
    assert (jobs[0] / "report.json").exists()


def test_a_ctrl_c_while_the_report_prints_still_prints_the_hint(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: SubmitOptions,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _stub_runs(monkeypatch, lambda: None)

    def print_report(report: Any, as_json: bool) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the table was printing

    monkeypatch.setattr(jobview, "print_report", print_report)
    settings = Settings(state_dir=tmp_path / "state")
    try:
        code = run_job(
            settings,
            options,
            view=ConsoleJobView(as_json=False),
            backend_factory=_backend,
        )
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped as KeyboardInterrupt: no resume hint")
    assert code == EXIT_INTERRUPTED
    assert "continue with: sandbox-replay submit --resume job-" in capsys.readouterr().err


def test_a_second_ctrl_c_stops_waiting_for_runs_to_wind_down(tmp_path: Path) -> None:
    from runner.ledger import CeilingGuard, Ledger
    from runner.providers.metered import StopSignal
    from runner.submit.scheduler import INTERRUPT_GRACE_S, Scheduler

    release = threading.Event()
    started = threading.Event()

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, Any, Amount]:
        started.set()
        release.wait(30)  # a run that does not stop when its sandbox is killed
        return "crashed", None, Amount()

    with Ledger.for_state_dir(tmp_path) as ledger:
        ledger.create_job("job-1", {}, {})
        guard = CeilingGuard(ledger, "job-1", {})
        scheduler = Scheduler(ledger, guard, "job-1", run_pair, concurrency=2, stop=StopSignal())

        def twice() -> None:
            started.wait(5)
            scheduler.interrupt()
            time.sleep(0.3)
            scheduler.hurry()

        threading.Thread(target=twice, daemon=True).start()
        began = time.monotonic()
        outcomes = scheduler.run([("v", "t1"), ("v", "t2")])
        took = time.monotonic() - began
        release.set()
        time.sleep(0.3)  # the stuck run ends and records itself before the ledger closes
    assert took < INTERRUPT_GRACE_S / 2, f"waited {took:.1f} s after the second Ctrl-C"
    assert scheduler.interrupted.is_set() and len(outcomes) == 2
