"""``jobs``: list, show and prune the jobs of a state directory (no Docker)."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from runner.backends import labels
from runner.cli.app import app
from runner.cli.commands import register
from runner.cli.render.joblist import print_job_list
from runner.errors import InputError
from runner.ledger import Amount, Ledger
from runner.settings import Settings
from runner.submit.jobs import list_jobs, parse_age, prune_jobs

DAY = 86400.0
NOW = time.time()  # the CLI reads the real clock


def _job(
    state: Path, job_id: str, age_days: float, *, owner_pid: int | None = None, usd: float = 0.0
) -> Path:
    """A finished submission: a ledger row with one run and its charge, a folder, a trace."""
    created = NOW - age_days * DAY
    traces = state / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    trace = traces / f"{job_id}-run.jsonl"
    trace.write_text("{}\n")
    with Ledger(state / "ledger.sqlite3", clock=lambda: created) as ledger:
        plan = {"variants": [{"name": "v1"}, {"name": "v2"}], "tasks": ["t1", "t2"], "repeats": 1}
        ledger.create_job(job_id, plan, {})
        ledger.set_job_status(job_id, "complete")
        run = ledger.start_run(job_id, "v1", "t1")
        ledger.finish_run(run.key, "succeeded", trace_path=str(trace))
        ledger.reserve(f"{job_id}-c", job_id, "replay", Amount(runs=1, usd=usd), kind="run")
        ledger.settle(f"{job_id}-c", Amount(runs=1, usd=usd))
    folder = state / "jobs" / job_id
    folder.mkdir(parents=True)
    owner = labels.current_owner() if owner_pid is None else None
    record = {"job_id": job_id, "options": {}}
    if owner_pid is not None:  # an orchestrator that is alive: this test's parent process
        owner = labels.Owner(
            host=labels.host_id(),
            pid=owner_pid,
            start=labels.process_start_time(owner_pid) or "",
        )
        record["owner"] = {
            labels.OWNER_HOST: owner.host,
            labels.OWNER_PID: str(owner.pid),
            labels.OWNER_START: owner.start,
        }
    (folder / "job.json").write_text(json.dumps(record))
    (folder / "report.json").write_text(json.dumps({"exit_code": 0}))
    return folder


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _settings() -> Settings:
    return Settings()


def test_jobs_are_listed_newest_first_with_variants_tasks_status_spend(state: Path) -> None:
    _job(state, "job-old", 10, usd=0.25)
    _job(state, "job-new", 1)
    entries = list_jobs(_settings(), now=lambda: NOW)
    assert [e.id for e in entries] == ["job-new", "job-old"]
    old = entries[1].to_json()
    assert old["variants"] == ["v1", "v2"] and old["tasks"] == 2 and old["exit_code"] == 0
    assert old["status"] == "complete" and old["spend_usd"] == 0.25
    assert old["folder"] == str((state / "jobs" / "job-old").resolve())


def test_prune_by_age_and_keep_removes_folder_rows_and_traces(state: Path) -> None:
    for name, age in (("job-a", 30), ("job-b", 20), ("job-c", 8), ("job-d", 1)):
        _job(state, name, age)
    dry = prune_jobs(_settings(), older_than_s=7 * DAY, keep=1, dry_run=True, now=lambda: NOW)
    assert [e.id for e in dry.removed] == ["job-a", "job-b", "job-c"] and dry.traces == 3
    assert (state / "jobs" / "job-a").is_dir()  # a dry run removes nothing
    # both rules: older than 15 days AND not among the 3 newest -> only job-a
    both = prune_jobs(_settings(), older_than_s=15 * DAY, keep=3, now=lambda: NOW)
    assert [e.id for e in both.removed] == ["job-a"] and both.kept == 3
    assert not (state / "jobs" / "job-a").exists()
    assert not (state / "traces" / "job-a-run.jsonl").exists()
    assert (state / "traces" / "job-b-run.jsonl").exists()
    with Ledger(state / "ledger.sqlite3") as ledger:
        assert ledger.get_job("job-a") is None and not ledger.runs("job-a")
        assert not ledger.charges("job-a") and ledger.get_job("job-b") is not None
    assert both.ledger_rows == 3  # its job row, its run, its charge
    with pytest.raises(InputError, match="--older-than AGE and/or --keep N"):
        prune_jobs(_settings())  # no rule: nothing is selected by default


def test_prune_never_removes_a_live_job_nor_a_path_from_outside(
    state: Path, tmp_path: Path
) -> None:
    _job(state, "job-live", 30, owner_pid=os.getppid())  # alive: pytest's parent
    _job(state, "job-dead", 30)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (state / "jobs" / "link-to-outside").symlink_to(outside)  # a folder that is a link
    (state / "jobs" / "..bad").mkdir()  # a name the id rules refuse
    with Ledger(state / "ledger.sqlite3") as ledger:  # a run whose trace path points outside
        run = ledger.start_run("job-dead", "v2", "t2")
        ledger.finish_run(run.key, "succeeded", trace_path=str(outside / "keep.txt"))
    result = prune_jobs(_settings(), older_than_s=DAY, now=lambda: NOW)
    assert [e.id for e in result.removed] == ["job-dead"]
    assert result.skipped_live == ["job-live"] and (state / "jobs" / "job-live").is_dir()
    assert (outside / "keep.txt").read_text() == "mine"  # never a path from the ledger's say
    assert (state / "jobs" / "link-to-outside").is_symlink() and (state / "jobs" / "..bad").is_dir()


def test_single_episode_rows_are_listed_only_when_asked(state: Path) -> None:
    _job(state, "job-sub", 2)
    with Ledger(state / "ledger.sqlite3") as ledger:
        ledger.create_job("reproduce-x", {"command": "reproduce", "variant": None}, {})
    assert [e.id for e in list_jobs(_settings())] == ["job-sub"]
    every = {e.id: e.command for e in list_jobs(_settings(), every_command=True)}
    assert every == {"job-sub": "submit", "reproduce-x": "reproduce"}


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("7d", 7 * DAY)])
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["7", "d", "-7d", "7y", "1.5d", "٣d"])
def test_a_bad_age_is_named(text: str) -> None:
    with pytest.raises(InputError, match="not an age"):
        parse_age(text)


def test_the_cli_prints_one_json_object_per_command(state: Path) -> None:
    register()
    _job(state, "job-a", 30)
    runner = CliRunner()
    listed = runner.invoke(app, ["jobs", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [j["id"] for j in json.loads(listed.stdout)["jobs"]] == ["job-a"]
    table = runner.invoke(app, ["jobs"])
    assert "job-a" in table.stdout and "v1, v2" in table.stdout
    dry = runner.invoke(app, ["jobs", "prune", "--older-than", "7d", "--dry-run", "--json"])
    body = json.loads(dry.stdout)
    assert body["dry_run"] is True and [j["id"] for j in body["removed"]] == ["job-a"]
    bad = runner.invoke(app, ["jobs", "prune", "--older-than", "soon", "--json"])
    assert bad.exit_code == 2 and json.loads(bad.stdout)["field"] == "--older-than"
    unknown = runner.invoke(app, ["jobs", "show", "job-zzz", "--json"])
    assert unknown.exit_code == 2 and "error" in json.loads(unknown.stdout)


def test_the_list_at_80_columns_keeps_each_job_id_whole(state: Path) -> None:
    _job(state, "job-20261207T193643Z-b90866", 1, usd=1.5)
    out = io.StringIO()
    print_job_list(list_jobs(_settings(), now=lambda: NOW), state, Console(file=out, width=80))
    text = out.getvalue()
    assert "job-20261207T193643Z-b90866" in text and "$1.5000" in text and "…" not in text
    table = text.split("folders:")[0]  # the folder's path line is the terminal's to wrap
    assert max(len(line) for line in table.splitlines()) <= 80


def test_jobs_show_prints_what_report_prints(state: Path) -> None:
    from dataclasses import replace

    from runner.submit.report import write_report
    from tests.unit.submit.test_verdict_report import _report

    register()
    folder = _job(state, "job-shown", 1)
    write_report(folder, replace(_report(baseline="v1", tasks=6), job_id="job-shown"))
    runner = CliRunner()
    for args in ([], ["--json"]):
        shown = runner.invoke(app, ["jobs", "show", "job-shown", *args])
        reported = runner.invoke(app, ["report", "job-shown", *args])
        assert shown.exit_code == reported.exit_code == 0, shown.output
        assert shown.stdout == reported.stdout and "baseline" in shown.stdout


@pytest.mark.parametrize(
    "plan",
    [
        {"variants": 5},
        {"variants": [{"name": "a"}], "repeats": "x", "tasks": {"a": 1}},
        {"variants": {"name": "a"}},
        {"command": ["submit"]},
    ],
)
def test_a_job_folder_written_by_hand_is_listed_and_pruned_never_a_traceback(
    state: Path, plan: dict[str, object]
) -> None:
    """Security review: ``plan.json`` is anyone's file; ``{"variants": 5}`` made ``jobs`` and
    ``jobs prune`` raise TypeError (a traceback, and nothing could be pruned)."""
    folder = state / "jobs" / "handmade"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(plan))
    (entry,) = list_jobs(_settings(), every_command=True)
    assert entry.id == "handmade" and entry.variants in ((), ("a",))
    result = prune_jobs(_settings(), keep=0, every_command=True)
    assert [e.id for e in result.removed] == ["handmade"] and not folder.exists()


def test_prune_says_why_each_job_was_kept(state: Path) -> None:
    # a new user's finding: "removed 1 job (...); 3 kept" with nothing saying why 3
    for name, age in (("job-a", 30), ("job-b", 20), ("job-c", 2), ("job-d", 1)):
        _job(state, name, age)
    _job(state, "job-live", 40, owner_pid=os.getppid())
    with Ledger(state / "ledger.sqlite3") as ledger:
        ledger.create_job("run-x", {"command": "run", "variant": "v1", "task": "t1"}, {})
    result = prune_jobs(_settings(), older_than_s=7 * DAY, keep=1, dry_run=True, now=lambda: NOW)
    assert [e.id for e in result.removed] == ["job-a", "job-b"] and result.kept == 3
    assert result.kept_reasons() == {"newest": ["job-d"], "recent": ["job-c"], "live": ["job-live"]}
    assert result.not_considered == 1  # run-x: without --all
    register()
    runner = CliRunner()
    args = ["jobs", "prune", "--older-than", "7d", "--keep", "1", "--dry-run"]
    text = runner.invoke(app, args).stdout
    assert (
        "3 kept: 1 among the 1 newest (--keep 1), 1 not older than 7d (--older-than),"
        " 1 still running" in text
    ), text
    assert "not considered: 1 run, record and reproduce job(s) (--all prunes them too)" in text
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert data["kept_because"]["recent"] == ["job-c"] and data["not_considered"] == 1
