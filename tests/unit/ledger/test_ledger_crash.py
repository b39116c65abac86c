"""The ledger after a crash: a dead run is charged what the engine measured.

Before: after ``kill -9`` of ``submit`` and ``--resume``, every run in flight stayed charged at
its full reservation (timeout plus grace: ~316 sandbox-s for a run of ~1.5 s). Now the reaper
reads each leftover container's start and finish before removing it and the run is charged
those seconds; what nothing measured (a container already gone, a model call in flight) is
charged at its reservation and marked ``estimated``, in the ledger and the report.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from runner.backends.base import Reaped
from runner.backends.docker.reaper import engine_time, reap_dead, run_seconds
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.cli.render.report import estimated_lines
from runner.episode.reaping import reap_and_settle, settle_reaped
from runner.ledger import Amount, Ledger, run_key, schema
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit.jobfolder import job_dir
from runner.submit.options import SubmitOptions
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"
RESERVED_S = 315.7


def test_engine_timestamps_and_run_seconds() -> None:
    assert engine_time("2019-03-04T05:06:07.123456789Z") == pytest.approx(1551675967.123456)
    assert engine_time("2019-03-04T06:06:07.5+01:00") == pytest.approx(1551675967.5)
    assert engine_time("0001-01-01T00:00:00Z") is None
    assert engine_time("yesterday") is None and engine_time(None) is None
    ran = {"StartedAt": "2019-03-04T05:06:07Z", "FinishedAt": "2019-03-04T05:06:08.5Z"}
    assert run_seconds(ran, now=0.0) == 1.5
    running = {"StartedAt": "2019-03-04T05:06:07Z", "FinishedAt": "0001-01-01T00:00:00Z"}
    assert run_seconds({**running, "Running": True}, now=1551675970.0) == 3.0
    never = {"StartedAt": "0001-01-01T00:00:00Z", "FinishedAt": "0001-01-01T00:00:00Z"}
    assert run_seconds(never, now=1e12) == 0.0
    assert run_seconds({}, now=1e12) is None


class _API:
    def __init__(self, states: dict[str, Any]) -> None:
        self.states = states
        self.calls: list[tuple[str, str]] = []

    def inspect_container(self, container: str) -> dict[str, Any]:
        self.calls.append(("inspect", container))
        state = self.states[container]
        if isinstance(state, Exception):
            raise state
        return {"Id": container, "State": state}

    def remove_container(self, container: str, force: bool = False) -> None:
        self.calls.append(("remove", container))


def test_the_reaper_reads_the_engines_times_before_it_removes_each_container() -> None:
    from docker.errors import NotFound

    me = L.current_owner()
    dead = L.Owner(me.host, 2**22 + 12345, "1")  # no such pid

    def summary(name: str, owner: L.Owner, key: str) -> dict[str, Any]:
        extra = {L.LEDGER_KEY: key}
        found = L.sandbox_labels(session_id="s", run_id=name, owner=owner, version="0", extra=extra)
        return {"Id": f"id-{name}", "Names": [f"/{name}"], "Labels": found}

    api = _API(
        {
            "id-a": {"StartedAt": "2019-03-04T05:06:07Z", "FinishedAt": "2019-03-04T05:06:08.5Z"},
            "id-b": NotFound("gone"),
        }
    )
    listing = [summary("a", dead, "k-a"), summary("b", dead, "k-b"), summary("live", me, "k-l")]
    reaped = reap_dead(api, listing, me.host, clock=lambda: 0.0)
    assert [(r.name, r.labels[L.LEDGER_KEY], r.sandbox_s) for r in reaped] == [
        ("a", "k-a", 1.5),
        ("b", "k-b", None),
    ]
    assert api.calls == [
        ("inspect", "id-a"),
        ("remove", "id-a"),
        ("inspect", "id-b"),
        ("remove", "id-b"),
    ]  # inspected before removal; the live owner's container untouched


def _crashed_job(settings: Settings, job_id: str) -> tuple[Any, SubmitOptions, dict[str, str]]:
    """A job as a ``kill -9`` leaves it: two runs and a model call reserved, rows running."""
    options = SubmitOptions(
        variants=(FIX / "a.yaml",), names=(None,), tasks=FIX / "tasks.jsonl", cwd=FIX
    )
    plan = submit_module.prepare(options, settings, job_id=job_id)
    folder = job_dir(settings, job_id)
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(plan.to_json(), default=str))
    job = {"job_id": job_id, "options": options.to_json(), "owner": {}}  # no snapshot: taken anew
    (folder / "job.json").write_text(json.dumps(job, default=str))
    variant = plan.variants[0].name
    keys = {t: run_key(job_id, variant, t, 1) for t in ("t1", "t2")}
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        ledger.create_job(job_id, plan.to_json(), {})
        for task, key in keys.items():
            ledger.reserve(
                f"{key}/run",
                job_id,
                "replay",
                Amount(runs=1, sandbox_s=RESERVED_S),
                kind="run",
                variant=variant,
                task_id=task,
                run_key=key,
            )
            ledger.start_run(job_id, variant, task, 1, key=key)
        ledger.reserve(
            f"{keys['t1']}/model/0",
            job_id,
            "replay",
            Amount(tokens_in=1000, tokens_out=500, usd=0.01),
            kind="model_call",
            run_key=keys["t1"],
            model="gpt-4.1",
        )
    return plan, options, keys


class _ReapingBackend(UnsandboxedProcessBackend):
    """Runs the runtime locally (no Docker) and reaps what a dead submit left behind."""

    def __init__(self, reaped: list[Reaped]) -> None:
        super().__init__()
        self.reaped = reaped

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        reaped, self.reaped = self.reaped, []
        return reaped


def test_resume_charges_dead_runs_what_the_engine_measured_and_marks_the_rest_estimated(
    tmp_path: Path,
) -> None:
    settings = Settings(state_dir=tmp_path / "state")
    plan, options, keys = _crashed_job(settings, "job-crash")
    # t1's container was still there (it ran 1.5 s); t2's was gone
    reaped = [Reaped("sandbox-replay-t1", "r1", {L.LEDGER_KEY: keys["t1"]}, 1.5)]
    result = submit_module.execute(
        plan,
        options,
        settings,
        backend_factory=lambda: _ReapingBackend(reaped),
        resume=True,
        handle_signals=False,
    )
    assert result.report is not None and result.report.status == "complete"
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        charges = {c.key: c for c in ledger.charges("job-crash")}
        runs = {r.key: r for r in ledger.runs("job-crash")}
        totals = ledger.totals("job-crash")["replay"]
    measured = charges[f"{keys['t1']}/run"]
    assert measured.state == "settled" and measured.actual is not None
    assert (measured.actual.sandbox_s, measured.estimated) == (1.5, False)
    assert (runs[keys["t1"]].status, runs[keys["t1"]].usage.sandbox_s) == ("interrupted", 1.5)
    gone = charges[f"{keys['t2']}/run"]
    assert gone.actual is not None and gone.actual.sandbox_s == RESERVED_S and gone.estimated
    in_flight = charges[f"{keys['t1']}/model/0"]
    assert in_flight.actual == Amount(tokens_in=1000, tokens_out=500, usd=0.01)
    assert in_flight.estimated
    assert runs[keys["t2"]].status == "interrupted"
    # the four pairs ran again (attempt 2 for the dead ones); their charges were measured
    rerun = [c for c in charges.values() if c.kind == "run" and c.key.endswith("/run")]
    assert len(rerun) == 6 and sum(c.estimated for c in rerun) == 1
    assert totals.estimated_charges == 2
    assert totals.estimated == Amount(
        runs=1, tokens_in=1000, tokens_out=500, usd=0.01, sandbox_s=RESERVED_S
    )
    spend = result.report.spend["replay"]
    assert spend["estimated_charges"] == 2 and spend["estimated"]["sandbox_s"] == RESERVED_S
    (line,) = estimated_lines(result.report.spend)
    assert line.startswith("replay: 2 charge(s) estimated") and "315.7 sandbox-s" in line


def test_reap_and_settle_uses_only_this_ledger_and_is_idempotent(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state")
    _, _, keys = _crashed_job(settings, "job-reap")
    reaped = [
        Reaped("a", "r1", {L.LEDGER_KEY: keys["t1"]}, 2.0),
        Reaped("b", "r2", {L.LEDGER_KEY: "run/replay/elsewhere/v/t/1"}, 3.0),  # not ours
        Reaped("c", "r3", {}, 4.0),  # no ledger key (an older version's sandbox)
    ]
    assert [r.name for r in reap_and_settle(_ReapingBackend(reaped), settings.state_dir)] == [
        "a",
        "b",
        "c",
    ]
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        assert settle_reaped(ledger, reaped) == 0  # settled once
        charge = {c.key: c for c in ledger.charges("job-reap")}[f"{keys['t1']}/run"]
        assert charge.actual is not None and charge.actual.sandbox_s == 2.0
        assert not charge.estimated
        still_open = [c for c in ledger.charges("job-reap") if c.state == "reserved"]
        assert len(still_open) == 2  # t2's run and the model call: for --resume
    empty = tmp_path / "no-ledger"
    reap_and_settle(_ReapingBackend(reaped), empty)
    assert not (empty / "ledger.sqlite3").exists()  # never created just to reap


def test_migration_adds_estimated_and_keeps_old_charges_measured(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    raw = sqlite3.connect(path, isolation_level=None)
    assert schema.migrate(raw, path, target=2) == 2
    raw.execute(
        "INSERT INTO jobs (id, created, status, plan, settings) VALUES ('old', 1, 'complete',"
        " '{}', '{}')"
    )
    raw.execute(
        "INSERT INTO charges (idempotency_key, job_id, purpose, kind, state, est_runs,"
        " est_tokens_in, est_tokens_out, est_usd, est_sandbox_s, act_runs, act_tokens_in,"
        " act_tokens_out, act_usd, act_sandbox_s, created, updated) VALUES ('c', 'old',"
        " 'replay', 'run', 'settled', 1, 0, 0, 0, 10, 1, 0, 0, 0, 2, 1, 1)"
    )
    raw.close()
    with Ledger(path) as ledger:
        assert ledger.version == 4
        (charge,) = ledger.charges("old")
        assert charge.estimated is False
        assert ledger.totals("old")["replay"].estimated_charges == 0


def test_a_recent_sandbox_of_another_ledger_is_left_for_that_ledger() -> None:
    me = L.current_owner()
    dead = L.Owner(me.host, 2**22 + 12345, "1")
    now = 1551675967.0 + 3600

    def summary(name: str, ledger: str | None) -> dict[str, Any]:
        extra = {L.LEDGER: ledger} if ledger else {}
        found = L.sandbox_labels(session_id="s", run_id=name, owner=dead, version="0", extra=extra)
        return {"Id": f"id-{name}", "Names": [f"/{name}"], "Labels": found}

    finished = {"StartedAt": "2019-03-04T05:06:07Z", "FinishedAt": "2019-03-04T05:06:09Z"}
    api = _API({f"id-{n}": finished for n in ("mine", "theirs", "unlabelled", "old")})
    listing = [summary("mine", "aaaa"), summary("theirs", "bbbb"), summary("unlabelled", None)]
    reaped = reap_dead(api, listing, me.host, ledger="aaaa", clock=lambda: now)
    assert [r.name for r in reaped] == ["mine", "unlabelled"]
    assert ("remove", "id-theirs") not in api.calls
    # idle for more than a day: removed anyway (nothing is left behind forever)
    later = reap_dead(
        api, [summary("old", "bbbb")], me.host, ledger="aaaa", clock=lambda: now + 86400
    )
    assert [r.name for r in later] == ["old"]
