"""Adding a backend is one registry line: a tiny backend registered so passes every check.

`tiny.TinyBackend` (a thin wrapper around the Docker backend: the checks demand real
isolation) is registered with one line, ``monkeypatch.setitem(BACKENDS, "tiny", ENTRY)``, and
nothing else: the conformance checks (`runner.backends.conformance.CHECKS`, made through the
registry entry, the reaper's child process included), then ``sandbox-replay run --backend
tiny`` and ``doctor``'s refusal (the entry names no doctor) read it from the registry.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.backends.conformance import NotApplicable, Subject
from runner.backends.registry import BACKENDS
from runner.cli.app import app
from tests.integration.conformance.backends import Variant, check_params
from tests.integration.conformance.backends import subject as make_subject
from tests.integration.conformance.tiny import ENTRY
from tests.support.paths import REPO

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def tiny(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Subject]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setitem(BACKENDS, "tiny", ENTRY)  # the one line that adds the backend
        made = make_subject(
            Variant(BACKENDS["tiny"], "tiny"),
            request,
            f"tiny-{uuid.uuid4().hex[:12]}",
            tmp_path_factory.mktemp("tiny"),
        )
        try:
            yield made
        finally:
            made.backend.close()


@pytest.mark.parametrize("check", check_params())  # the reaper's alone (serial)
def test_the_tiny_backend_passes(tiny: Subject, check: Callable[[Subject], None]) -> None:
    assert tiny.backend.name == "tiny"
    try:
        check(tiny)
    except NotApplicable as exc:
        pytest.skip(str(exc))


def test_the_cli_runs_an_episode_on_it_by_name(
    tiny: Subject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(BACKENDS, "tiny", ENTRY)
    helpdesk = REPO / "examples" / "helpdesk"
    env = {"SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state"), "SANDBOX_REPLAY_IMAGE": tiny.image}
    args = ["run", str(helpdesk / "v1.yaml"), "--tasks", str(helpdesk / "tasks.jsonl"),
            "--task", "ticket-1000", "--backend", "tiny", "--json"]  # fmt: skip
    done = CliRunner().invoke(app, args, env=env)
    assert done.exit_code == 0, done.output
    trace = next((tmp_path / "state" / "traces").glob("*.jsonl"))
    run_line = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])
    assert run_line["backend"] == "tiny"  # the trace names the backend the registry made
    doctor = CliRunner().invoke(app, ["doctor", "--backend", "tiny"], env=env)
    assert doctor.exit_code == 2 and "nothing to check" in doctor.output, doctor.output
    monkeypatch.delitem(BACKENDS, "tiny")
    gone = CliRunner().invoke(app, args, env=env)
    assert gone.exit_code == 2 and "no backend 'tiny'" in gone.output, gone.output
