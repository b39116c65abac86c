"""``jobs --all`` and ``jobs show`` for ``run`` and ``reproduce`` (a new user's findings).

Before: their ids were ``run-...``/``reproduce-...`` ids of their own that matched no trace,
``jobs show`` of one said "no report", and each said ``complete`` whatever happened. Now a
single-episode job is named by its run's id (the trace's name, what the command printed), its
status is the episode's status (``run``) or the verdict (``reproduce``), and ``jobs show``
opens it. The runtime runs as a local process (`UnsandboxedProcessBackend`: no Docker).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.cli.app import app
from runner.reproduce.reproducer import Reproducer
from runner.runs.run import execute_run
from runner.settings import Settings
from runner.submit.jobs import list_jobs
from tests.support.paths import REPO, TESTS

HELPDESK = REPO / "examples" / "helpdesk"
GOLDEN = TESTS / "fixtures" / "golden"


def test_run_and_reproduce_jobs_are_named_by_their_trace_and_say_what_happened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(state_dir=tmp_path / "state")
    tasks = HELPDESK / "tasks.jsonl"
    backend = UnsandboxedProcessBackend()
    ran = execute_run(settings, HELPDESK / "v1.yaml", tasks, "ticket-1000", backend=backend)
    # v3 under the reproduce policy: its reads have no recording to be served from
    failed = execute_run(
        settings,
        HELPDESK / "v3.yaml",
        tasks,
        "ticket-1000",
        backend=backend,
        policy_name="reproduce",
    )
    assert (ran.status, failed.status) == ("succeeded", "failed")
    reproducer = Reproducer(
        settings, backend_factory=UnsandboxedProcessBackend, workflow=GOLDEN / "golden.yaml"
    )
    replayed = reproducer.reproduce(GOLDEN / "failing.jsonl")
    assert replayed.outcome == "reproduced", replayed.reason
    entries = {e.id: e for e in list_jobs(settings, every_command=True)}
    replay_trace = next(p for p in (tmp_path / "state" / "traces").glob("repro-*.jsonl"))
    assert set(entries) == {ran.run_id, failed.run_id, replay_trace.stem}
    assert entries[ran.run_id].status == "succeeded" and entries[failed.run_id].status == "failed"
    assert entries[replay_trace.stem].status == "reproduced"
    assert entries[replay_trace.stem].command == "reproduce"
    assert entries[ran.run_id].trace == str(ran.trace_path)
    assert entries[ran.run_id].task_id == "ticket-1000"
    assert entries[ran.run_id].variants == ("helpdesk-triage@1",)

    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    runner = CliRunner()
    for job_id, entry in entries.items():  # every id listed opens
        shown = runner.invoke(app, ["jobs", "show", job_id])
        assert shown.exit_code == 0, shown.output
        assert f"{entry.command} {job_id}: {entry.status}" in shown.stdout
        assert f"trace: {entry.trace}" in shown.stdout
        data = json.loads(runner.invoke(app, ["jobs", "show", job_id, "--json"]).stdout)
        assert data["id"] == job_id and data["status"] == entry.status
    listed = runner.invoke(app, ["jobs", "--all"])
    assert "run: failed" in listed.stdout and "reproduce: reproduced" in listed.stdout
    assert "no folder" not in listed.stdout  # a run has its trace, never a job folder
    unknown = runner.invoke(app, ["jobs", "show", "run-nope", "--json"])
    assert unknown.exit_code == 2 and json.loads(unknown.stdout)["field"] == "JOB_ID"
