"""`sandbox-replay run` without Docker: input errors before anything starts, and exit codes.

The episode itself is replaced by a stub where a status is needed; real runs are in
tests/integration/test_episode.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.commands import run as run_module
from runner.cli.render.episode import print_episode
from runner.episode.request import EpisodeResult
from runner.errors import InfrastructureError
from runner.runs.run import execute_run
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"


def _invoke(*args: str, tmp_path: Path) -> Any:
    return CliRunner().invoke(
        app, ["run", *args], env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state")}
    )


def test_bad_task_id_and_unknown_task_are_exit_2(tmp_path: Path) -> None:
    bad = _invoke(
        str(HELPDESK / "v2.yaml"),
        "--tasks",
        str(HELPDESK / "tasks.jsonl"),
        "--task",
        "a/b",
        tmp_path=tmp_path,
    )
    assert bad.exit_code == 2 and "--task: invalid task id" in bad.output
    unknown = _invoke(
        str(HELPDESK / "v2.yaml"),
        "--tasks",
        str(HELPDESK / "tasks.jsonl"),
        "--task",
        "nope",
        tmp_path=tmp_path,
    )
    assert unknown.exit_code == 2 and "no task 'nope'" in unknown.output
    missing = _invoke(
        str(HELPDESK / "v2.yaml"),
        "--tasks",
        str(tmp_path / "none.jsonl"),
        "--task",
        "x",
        tmp_path=tmp_path,
    )
    assert missing.exit_code == 2 and "cannot read task file" in missing.output


def test_ineligible_workflow_is_exit_3_and_nothing_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_backend(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a backend was asked for")

    monkeypatch.setattr("runner.backends.docker.DockerBackend.connect", no_backend)
    out = _invoke(
        str(HELPDESK / "v3.yaml"),
        "--tasks",
        str(HELPDESK / "tasks.jsonl"),
        "--task",
        "ticket-1000",
        tmp_path=tmp_path,
    )
    assert out.exit_code == 3 and "ticket.close" in out.output
    assert not (tmp_path / "state").exists()


def test_docker_unusable_is_exit_6(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise InfrastructureError("cannot reach the Docker engine at unix:///nowhere")

    monkeypatch.setattr("runner.backends.docker.DockerBackend.connect", unreachable)
    out = _invoke(
        str(HELPDESK / "v2.yaml"),
        "--tasks",
        str(HELPDESK / "tasks.jsonl"),
        "--task",
        "ticket-1000",
        tmp_path=tmp_path,
    )
    assert out.exit_code == 6 and "cannot reach the Docker engine" in out.output


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("succeeded", 0),
        ("failed", 0),  # SPEC.md: episode statuses are data in the output, not an exit code
        ("denied", 0),
        ("timeout", 0),
        ("oom", 0),
        ("crashed", 0),
        ("limit_exceeded", 0),
        ("ceiling_reached", 0),
        ("infra_error", 6),  # no verdict: the infrastructure failed
    ],
)
def test_status_is_data_exit_code_only_for_infrastructure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str, code: int
) -> None:
    trace = tmp_path / "t.jsonl"

    def fake_run(*args: Any, **kwargs: Any) -> EpisodeResult:
        return EpisodeResult(
            "run-1",
            status,
            trace,
            {"status": status, "exit_code": 1, "not_run": ["x"], "outbound": []},
        )

    monkeypatch.setattr(run_module, "execute_run", fake_run)
    human = _invoke("wf.yaml", "--tasks", "t.jsonl", "--task", "t", tmp_path=tmp_path)
    assert human.exit_code == code, human.output
    assert f"run run-1: {status}" in human.output and f"trace: {trace}" in human.output
    assert "not run: x" in human.output
    as_json = _invoke("wf.yaml", "--tasks", "t.jsonl", "--task", "t", "--json", tmp_path=tmp_path)
    assert as_json.exit_code == code
    summary = json.loads(as_json.stdout)
    assert summary["status"] == status and summary["trace"] == str(trace)
    # as in every command's JSON, exit_code is the command's; the trace's own code beside it
    assert summary["exit_code"] == code and summary["episode_exit_code"] == 1


def test_run_is_charged_under_replay_with_its_model_tokens(tmp_path: Path) -> None:
    from runner.backends.unsandboxed import UnsandboxedProcessBackend
    from runner.ledger import Ledger
    from runner.settings import Settings

    settings = Settings(state_dir=tmp_path / "state")
    with capture_logs() as logs:
        result = execute_run(
            settings,
            HELPDESK / "v2.yaml",
            HELPDESK / "tasks.jsonl",
            "ticket-1000",
            backend=UnsandboxedProcessBackend(),
        )
    assert result.status == "succeeded", result.end
    # each model call reserved before it was forwarded, as in submit: no charge above its estimate
    assert not [e for e in logs if e["event"] == "charge_overran_estimate"], logs
    meter = result.end["meter"]
    with Ledger.for_state_dir(tmp_path / "state") as ledger:
        totals = ledger.totals()
    replay = totals["replay"].committed
    assert replay.runs == 1 and totals["live"].committed.runs == 0
    assert (replay.tokens_in, replay.tokens_out) == (meter["tokens_in"], meter["tokens_out"])
    assert replay.tokens_in > 0


def _tasks_with_a_bad_line(tmp_path: Path) -> Path:
    good = (HELPDESK / "tasks.jsonl").read_text().splitlines()[0]
    path = tmp_path / "tasks.jsonl"
    path.write_text(good + '\n{"task_id": "ticket-x", \n')
    return path


def test_a_bad_task_line_is_said_in_words_and_the_asked_task_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def fake_episode(request: Any, **kwargs: Any) -> EpisodeResult:
        ran.append(request.task.task_id)
        return EpisodeResult("run-1", "succeeded", tmp_path / "t.jsonl", {"status": "succeeded"})

    monkeypatch.setattr(
        "runner.backends.docker.DockerBackend.connect", lambda *a, **k: StubBackend()
    )
    monkeypatch.setattr("runner.episode.metered_run.run_episode", fake_episode)
    without_description(monkeypatch)  # the stub backend runs no sandbox
    tasks = _tasks_with_a_bad_line(tmp_path)
    out = _invoke(
        str(HELPDESK / "v2.yaml"), "--tasks", str(tasks), "--task", "ticket-1000", tmp_path=tmp_path
    )
    assert out.exit_code == 0 and ran == ["ticket-1000"], out.output
    assert f"warning: {tasks}:2: invalid JSON" in out.stderr and "line skipped" in out.stderr
    assert "task_line_skipped" not in out.output  # no log event in place of a message
    missing = _invoke(
        str(HELPDESK / "v2.yaml"), "--tasks", str(tasks), "--task", "ticket-x", tmp_path=tmp_path
    )
    assert missing.exit_code == 2 and ran == ["ticket-1000"]
    assert "no task 'ticket-x'" in missing.output
    assert "1 line(s) could not be read (line 2)" in missing.output


def test_record_json_says_its_own_exit_code_beside_the_episode_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.cli.commands import record as record_module

    def fake_record(*args: Any, **kwargs: Any) -> EpisodeResult:
        return EpisodeResult(
            "rec-1", "failed", tmp_path / "t.jsonl", {"status": "failed", "exit_code": 1}
        )

    monkeypatch.setattr(record_module, "record_run", fake_record)
    done = CliRunner().invoke(
        app,
        ["record", "wf.yaml", "--tasks", "t.jsonl", "--task", "t", "--json"],
        env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state")},
    )
    summary = json.loads(done.stdout)
    assert done.exit_code == 0 == summary["exit_code"] and summary["episode_exit_code"] == 1


def test_record_meters_wall_seconds_not_sandbox_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    result = EpisodeResult(
        "rec-1",
        "succeeded",
        Path("t.jsonl"),
        {"status": "succeeded", "meter": {"sandbox_s": 0.059}},
    )
    print_episode(result, sandboxed=False)
    text = capsys.readouterr().out
    assert "0.059 wall s" in text and "sandbox-s" not in text
