"""Findings of the new-user trial on submit/report/ledger/lint, without Docker.

Runs ceiling vs. model calls of started runs, ceiling-stopped runs not ranked, the default log
level of table commands and ``--log-level``, a progress bar that never moves back, dry runs
without a job id, one variant, the report's scores/reasons/unrecorded reads and grouped
reasons, and wide consoles when not a TTY.
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from runner.cli.app import CliState, app
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.base import ProviderResponse
from runner.providers.metered import MeteredProvider, StopSignal
from runner.submit.jobreport import JobReport
from runner.submit.scheduler import PairOutcome, Scheduler
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.for_state_dir(tmp_path) as led:
        yield led


class Answering:
    name = "fake"

    def __init__(self) -> None:
        self.served = 0
        self.lock = threading.Lock()

    def complete(self, request: Any, role: str) -> ProviderResponse:
        with self.lock:
            self.served += 1
        return ProviderResponse(body="{}", model="m", usage={"prompt_tokens": 1})


def test_runs_ceiling_lets_every_started_run_finish_its_model_calls(ledger: Ledger) -> None:
    """The 3rd run's reservation fails (runs 2 used + 1 > 2); the 2 started runs still call."""
    ledger.create_job("job-1", {}, {})
    guard = CeilingGuard(ledger, "job-1", {"replay": Ceiling(runs=2, tokens=10**6)})
    stop = StopSignal()
    inner = Answering()

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        assert stop._event.wait(5)  # the ceiling stopped dispatch while this run is going
        metered = MeteredProvider(
            inner, guard, stop, {}, model="m", variant=variant, task_id=task_id,
            run_key=key, max_tokens=10,
        )  # fmt: skip
        reply = metered.complete(REQUEST, "model")
        return ("succeeded" if reply.error is None else "ceiling_reached"), None, Amount()

    outcomes = Scheduler(ledger, guard, "job-1", run_pair, concurrency=3, stop=stop).run(
        [("v1", "t1"), ("v2", "t1"), ("v1", "t2")]
    )
    assert [o.status for o in outcomes] == ["succeeded", "succeeded", "not_run"]
    assert stop.fields["limit"] == "runs" and not stop.refuses_calls
    assert inner.served == 2


def test_tokens_stop_and_interruption_still_refuse_calls() -> None:
    tokens = StopSignal()
    tokens.set("ceiling_reached", "tokens", {"limit": "tokens"})
    stopped = StopSignal()
    stopped.set("interrupted", "interrupted (Ctrl-C)")
    assert tokens.refuses_calls and stopped.refuses_calls and not StopSignal().refuses_calls


def test_a_run_stopped_by_a_ceiling_is_not_graded() -> None:
    from runner.submit.report import GRADABLE

    assert "ceiling_reached" not in GRADABLE and "failed" in GRADABLE


def _capture_levels(capsys: pytest.CaptureFixture[str]) -> str:
    log = structlog.get_logger("trial")
    log.info("info_line")
    log.warning("warning_line")
    return capsys.readouterr().err


def test_every_command_defaults_to_warning_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SANDBOX_REPLAY_LOG_LEVEL", raising=False)
    try:
        CliState(log_format="json").settings()
        err = _capture_levels(capsys)
        assert "warning_line" in err and "info_line" not in err
        CliState(log_format="json", verbose=1).settings()  # -v
        assert "info_line" in _capture_levels(capsys)
        CliState(log_format="json", log_level="info").settings()  # --log-level
        assert "info_line" in _capture_levels(capsys)
        monkeypatch.setenv("SANDBOX_REPLAY_LOG_LEVEL", "info")
        CliState(log_format="json").settings()
        assert "info_line" in _capture_levels(capsys)
        # the flag wins over the environment
        CliState(log_format="json", log_level="error").settings()
        assert "warning_line" not in _capture_levels(capsys)
    finally:
        from runner.cli.log import configure_logging

        configure_logging("auto", logging.INFO)


def test_global_log_level_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path))
    runner = CliRunner()
    assert runner.invoke(app, ["--log-level", "info", "ledger"]).exit_code == 0
    assert runner.invoke(app, ["-vv", "ledger"]).exit_code == 0
    bad = runner.invoke(app, ["--log-level", "loud", "ledger"])
    assert bad.exit_code == 2 and "--log-level" in bad.output


def test_progress_bar_never_moves_back() -> None:
    from runner.cli.render.jobview import JobProgress

    progress = JobProgress(4)
    progress.enabled = True  # as on a TTY (the bar is not started: updates only)
    newer = [PairOutcome("a", f"t{i}", status="succeeded") for i in range(3)]
    older = [PairOutcome("a", f"t{i}", status="running") for i in range(3)]
    progress.update(newer)
    progress.update(older)  # a snapshot taken earlier, delivered late
    assert progress.progress.tasks[0].completed == 3
    resumed = JobProgress(44, finished=11)
    resumed.enabled = True
    resumed.update([PairOutcome("a", "t", status="succeeded")])
    assert resumed.progress.tasks[0].completed == 12


def test_dry_run_names_no_job_and_one_variant_is_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(FIX)
    runner = CliRunner()
    args = ["submit", "--tasks", "tasks.jsonl", "--dry-run"]
    dry = runner.invoke(app, [*args, "--variant", "a.yaml", "--variant", "b.yaml"])
    assert dry.exit_code == 0, dry.output
    assert "plan (dry run, no job created): 2 variants" in dry.output
    assert "job-" not in dry.output and "tournament grading needs" not in dry.output
    as_json = runner.invoke(app, [*args, "--json", "--variant", "a.yaml", "--variant", "b.yaml"])
    assert json.loads(as_json.stdout[as_json.stdout.index("{") :])["plan"]["job_id"] is None
    one = runner.invoke(app, [*args, "--variant", "a.yaml"])
    assert one.exit_code == 0
    assert "tournament grading needs at least 2 variants" in one.output


def _report(tmp_path: Path) -> dict[str, Any]:
    trace = tmp_path / "run.jsonl"
    trace.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"type": "run"},
                {"type": "call", "index": 0, "tool": "kb.search", "args": {"q": "x"}},
                {
                    "type": "call",
                    "index": 1,
                    "tool": "crm.lookup_customer",
                    "args": {"customer_id": "c-7"},
                    "error": {
                        "class": "runner.wire.errors.UnrecordedCall",
                        "message": "no observation",
                    },
                },
                {"type": "end", "status": "failed"},
            )
        )
        + "\n"
    )
    from runner.submit.report import unrecorded_reads

    zero = {"runs": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0, "sandbox_s": 0.0}
    pairs = [{"variant": "v1", "task_id": "t1", "status": "failed", "trace": str(trace)}]
    interrupted = "interrupted (Ctrl-C)"
    return {
        "job_id": "job-20261130T000000Z-abcdef",
        "status": "interrupted",
        "exit_code": 130,
        "plan": {"formula": "2 variants x 22 tasks = 44 runs"},
        "ceilings": {"replay": {}},
        "ceiling_reached": None,
        "spend": {"replay": {"charged": zero, "model_calls": 0}},
        "runs_by_status": {"not_run": 33, "succeeded": 11},
        "grading": {
            "judge": "rubric",
            "variants": [],
            "tasks": [
                {
                    "task_id": "ticket-1000-with-a-long-identifier",
                    "ranking": [
                        {"variant": "helpdesk-triage@2", "rank": 1, "score": 1.0},
                        {"variant": "helpdesk-triage@1", "rank": 2, "score": 0.25},
                    ],
                    "detail": {
                        "reasons": {
                            "helpdesk-triage@2": [],
                            "helpdesk-triage@1": ["never made: kb.search"],
                        }
                    },
                }
            ],
            "ungraded": [
                {"task_id": f"t{i}", "reason": "fewer_than_two_results"} for i in range(20)
            ],
        },
        "pairs": pairs,
        "not_run": [
            {"variant": f"v{i % 2}", "task_id": f"t{i}", "reason": interrupted} for i in range(33)
        ],
        "stopped_by_ceiling": [],
        "unrecorded": unrecorded_reads([PairOutcome("v1", "t1", trace=str(trace))]),
    }


def test_report_shows_scores_reasons_unrecorded_reads_and_groups_reasons(tmp_path: Path) -> None:
    from rich.console import Console

    from runner.cli.render.report import render_report

    report = _report(tmp_path)
    assert report["unrecorded"] == {
        "v1": {
            "count": 1,
            "calls": [
                {
                    "task_id": "t1",
                    "repeat": 0,
                    "index": 1,
                    "tool": "crm.lookup_customer",
                    "args": {"customer_id": "c-7"},
                }
            ],
        }
    }
    out = io.StringIO()
    render_report(JobReport.from_json(report, file="report.json"), Console(file=out, width=200))
    text = out.getvalue()
    assert "1.00" in text and "0.25" in text and "never made: kb.search" in text
    assert "meets every expectation" in text
    assert "reads with no recording" in text and "crm.lookup_customer" in text
    assert "33 pairs not run" in text
    assert "33 pairs interrupted (Ctrl-C): v0×t0, v1×t1," in text and text.count("Ctrl-C") == 1
    assert "20 tasks ungraded (fewer_than_two_results): t0, t1," in text
    assert text.count("fewer_than_two_results") == 1


def test_report_command_does_not_wrap_ids_when_piped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    report = _report(tmp_path)
    folder = state / "jobs" / report["job_id"]
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(report))
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(state))
    done = CliRunner().invoke(app, ["report", report["job_id"]])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert any("= 44 runs" in line for line in lines)  # the phrase on one line
    assert any("ticket-1000-with-a-long-identifier" in line for line in lines)
    assert any("v0×t0, v1×t1" in line for line in lines)


def test_table_console_is_wide_when_not_a_tty() -> None:
    from runner.cli.render.console import PIPED_WIDTH, table_console

    assert table_console(file=io.StringIO()).width == PIPED_WIDTH
