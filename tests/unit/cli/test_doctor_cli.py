"""``doctor`` with no engine at the address: the checks list, the engine check failed with a
fix a pip user can follow, the others not run; the same in ``--json`` (no Docker needed)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from runner.cli.app import app

ENV = {"DOCKER_HOST": "unix:///nonexistent.sock", "SANDBOX_REPLAY_DOCKER_HOST": ""}


def test_no_engine_lists_the_checks_with_the_engine_failed_and_its_fix() -> None:
    out = CliRunner().invoke(app, ["doctor"], env=ENV)
    assert out.exit_code == 6, out.output
    lines = out.stdout.splitlines()
    assert lines[0].startswith("FAIL  engine") and "unix:///nonexistent.sock" in lines[0]
    assert "sudo systemctl start docker" in lines[1] and "DOCKER_HOST" in lines[1]
    assert ".ci/run" not in out.output
    assert any(line.startswith("-     image      not run") for line in lines), lines
    assert lines[-1] == "doctor: required checks failed"


def test_no_engine_in_json_fills_fix_and_marks_checks_not_run() -> None:
    out = CliRunner().invoke(app, ["doctor", "--json"], env=ENV)
    assert out.exit_code == 6
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    engine = checks["engine"]
    assert engine["ok"] is False and "systemctl start docker" in engine["fix"]
    assert "fix:" not in engine["detail"]
    assert checks["image"]["ran"] is False and checks["hardening"]["ran"] is False
