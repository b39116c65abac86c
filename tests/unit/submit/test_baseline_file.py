"""``submit --baseline FILE``: the gate's baseline named by its workflow file (no Docker).

A new user's finding: ``--baseline v1.yaml`` was refused ("'v1.yaml' is not a variant of this
job"): the flag wanted the variant's name (``fixture@a``). Now a workflow file is accepted: one
of the ``--variant`` files (the same file, however written), or another file, which then runs as
the first variant (a baseline is compared on fresh runs of the same tasks in the same job).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.errors import InfrastructureError
from runner.submit.options import load_job_file
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


def _dry_run(*args: str) -> tuple[int, dict[str, Any], str]:
    done = CliRunner().invoke(
        app, ["submit", *args, "--tasks", "tasks.jsonl", "--dry-run", "--json"]
    )
    body = done.stdout[done.stdout.index("{") :] if "{" in done.stdout else "{}"
    return done.exit_code, json.loads(body), done.output


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(FIX)

    def no_engine(*args: Any, **kwargs: Any) -> Any:  # the plan without an engine: no Docker
        raise InfrastructureError("no engine in this test")

    monkeypatch.setattr("runner.backends.docker.DockerBackend.connect", no_engine)


@pytest.mark.parametrize("named", ["a.yaml", "./a.yaml", str(FIX / "a.yaml")])
def test_a_variant_s_file_names_that_variant(named: str) -> None:
    code, data, output = _dry_run("--variant", "a.yaml", "--variant", "b.yaml", "--baseline", named)
    assert code == 0, output
    plan = data["plan"]
    assert plan["baseline"] == "fixture@a"
    assert [v["name"] for v in plan["variants"]] == ["fixture@a", "fixture@b"]  # none added


def test_another_file_runs_as_the_first_variant() -> None:
    code, data, output = _dry_run("--variant", "b.yaml", "--baseline", "a.yaml")
    assert code == 0, output
    plan = data["plan"]
    assert plan["baseline"] == "fixture@a" and plan["runs"] == 8
    assert [v["name"] for v in plan["variants"]] == ["fixture@a", "fixture@b"]


def test_a_name_still_works_and_a_missing_file_is_named() -> None:
    code, data, _ = _dry_run(
        "--variant", "a.yaml", "--variant", "b.yaml", "--baseline", "fixture@b"
    )
    assert code == 0 and data["plan"]["baseline"] == "fixture@b"
    code, data, _ = _dry_run("--variant", "a.yaml", "--baseline", "nope.yaml")
    assert code == 2 and data["field"] == "--baseline" and data["file"] == "nope.yaml", data


def test_a_job_file_s_baseline_may_be_a_file_beside_it(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml", "tasks.jsonl"):
        (tmp_path / name).write_text((FIX / name).read_text())
    job = tmp_path / "job.yaml"
    job.write_text((FIX / "job.yaml").read_text() + "baseline: b.yaml\n")
    options = load_job_file(job)
    assert options.baseline == str(tmp_path / "b.yaml")
    assert options.variants == (tmp_path / "a.yaml", tmp_path / "b.yaml")  # none added
