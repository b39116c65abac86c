"""A whole submission under a tight sandbox-seconds ceiling, runtime as a local
process (`UnsandboxedProcessBackend`: no Docker, not a sandbox).

On main every run reserved its timeout plus grace (375.7 sandbox-s under ``shadow``) before it
started: under a 6-s ceiling the job stopped before its first run and reported the ceiling
reached with nothing charged. Here the job runs until the ceiling is used, stops (exit 4) with
every pair not run listed, never passes it, and a resume charges nothing twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.ledger import Ledger
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit.budgetclock import KILL_MARGIN_S
from runner.submit.options import CeilingFlags, SubmitOptions
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"
CEILING_S = 6.0


def _submit(settings: Settings, options: SubmitOptions, job_id: str, resume: bool) -> dict:  # type: ignore[type-arg]
    plan = submit_module.prepare(options, settings, job_id=job_id)
    result = submit_module.execute(
        plan,
        options,
        settings,
        backend_factory=UnsandboxedProcessBackend,
        resume=resume,
        handle_signals=False,
    )
    assert result.report is not None
    return result.report.to_json()


def test_a_tight_sandbox_seconds_ceiling_is_used_not_refused(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"task_id": f"t{i}", "input": {"topic": "x"}}) + "\n" for i in range(40))
    )
    settings = Settings(state_dir=tmp_path / "state", pool=False)
    options = SubmitOptions(
        variants=(FIX / "a.yaml", FIX / "b.yaml"),
        names=(None, None),
        tasks=tasks,
        replay_ceiling=CeilingFlags({"sandbox_s": CEILING_S}, {"sandbox_s": "test"}),
        concurrency=4,
        cwd=FIX,
    )
    report = _submit(settings, options, "job-tight", resume=False)
    assert report["exit_code"] == 4 and report["status"] == "ceiling_reached"
    assert report["ceiling_reached"]["limit"] == "sandbox_s"
    charged = report["spend"]["replay"]["charged"]["sandbox_s"]
    ran = [p for p in report["pairs"] if p["status"] != "not_run"]
    assert charged <= CEILING_S
    # it stopped only when the smallest run and its kill margin no longer fitted: on main it
    # stopped before the first run (375.7 reserved > 6)
    smallest = min(
        r.usage.sandbox_s
        for r in Ledger.for_state_dir(settings.state_dir).runs("job-tight")
        if r.status == "succeeded"
    )
    assert charged + smallest + KILL_MARGIN_S > CEILING_S
    assert len(ran) >= 4
    assert report["not_run"] and all(
        "sandbox_s" in n["reason"] for n in report["not_run"]
    )  # every pair not run is listed with the reason
    assert len(ran) + len(report["not_run"]) == 80
    # a resume runs nothing twice and stays under the ceiling
    again = _submit(settings, options, "job-tight", resume=True)
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        keys = [c.key for c in ledger.charges("job-tight") if c.kind == "run"]
        total = ledger.totals("job-tight")["replay"].charged.sandbox_s
    assert len(keys) == len(set(keys))
    assert total <= CEILING_S and again["exit_code"] == 4


def test_the_report_names_incomplete_runs_and_never_scores_them(tmp_path: Path) -> None:
    """A run cut by the ceiling and one lost to the infrastructure: listed, not ranked."""
    from runner.ledger import Amount, CeilingGuard
    from runner.providers.metered import StopSignal
    from runner.submit.report import build_report, grade_job
    from runner.submit.scheduler import Scheduler

    settings = Settings(state_dir=tmp_path / "state", pool=False)
    options = SubmitOptions(
        variants=(FIX / "a.yaml", FIX / "b.yaml"), names=(None, None), tasks=FIX / "tasks.jsonl",
        cwd=FIX,
    )  # fmt: skip
    plan = submit_module.prepare(options, settings, job_id="job-inc")
    cut = {("fixture@b", "t1"): "ceiling_reached", ("fixture@b", "t2"): "infra_error"}

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        status = cut.get((variant, task_id), "succeeded")
        trace = tmp_path / f"{variant}-{task_id}.jsonl"
        end = {"v": 1, "type": "end", "status": status, "output": f"answer about {task_id}"}
        if status != "succeeded":
            end["reason"] = f"cut: {status}"
        trace.write_text(json.dumps(end) + "\n")
        return status, str(trace), Amount()

    with Ledger.for_state_dir(settings.state_dir) as ledger:
        ledger.create_job("job-inc", {}, {})
        guard = CeilingGuard(ledger, "job-inc", {})
        stop = StopSignal()
        outcomes = Scheduler(ledger, guard, "job-inc", run_pair, concurrency=2, stop=stop).run(
            plan.episodes
        )
        grading = grade_job(plan, ledger, guard, settings, FIX)
        job_report = build_report(
            plan, ledger, outcomes, skipped=set(), stop=stop, interrupted=False,
            grading=grading, resumed=False,
        )  # fmt: skip
    report = job_report.to_json()
    incomplete = {(e["variant"], e["task_id"]): e for e in report["incomplete"]}
    assert set(incomplete) == set(cut)
    assert incomplete[("fixture@b", "t1")]["status"] == "ceiling_reached"
    assert incomplete[("fixture@b", "t1")]["reason"] == "cut: ceiling_reached"
    standing = {v["variant"]: v for v in report["grading"]["variants"]}
    assert standing["fixture@b"]["tasks_graded"] == len(plan.tasks) - 2  # never scored
    (verdict,) = report["grading"]["verdicts"]
    assert f"2 of {len(plan.tasks)} planned tasks not compared" in verdict["text"]
    assert "1 ceiling_reached, 1 infra_error" in verdict["text"]
    # the terminal report names them too
    import io

    from rich.console import Console

    from runner.cli.render.report import render_report

    out = io.StringIO()
    render_report(job_report, Console(file=out, width=200))
    text = out.getvalue()
    assert "1 run incomplete (ceiling_reached; never scored, an unknown in every verdict)" in text
    assert "fixture@b×t2" in text
