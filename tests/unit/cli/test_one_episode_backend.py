"""``--backend`` / ``SANDBOX_REPLAY_BACKEND`` on ``run`` and ``reproduce``.

Both make their backend the way ``submit`` does (`runner.cli.backend_choice`); here the
backends' constructors are replaced so that the test sees which one was asked for, with no
engine. ``ray`` is refused with exit 2 before anything loads. Real namespace runs are in
tests/integration/test_namespace_commands.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.errors import InfrastructureError
from tests.support.paths import REPO, TESTS

HELPDESK = REPO / "examples" / "helpdesk"
GOLDEN = TESTS / "fixtures" / "golden"
RUN = [
    "run",
    str(HELPDESK / "v2.yaml"),
    "--tasks",
    str(HELPDESK / "tasks.jsonl"),
    "--task",
    "ticket-1000",
]
REPRODUCE = ["reproduce", str(GOLDEN / "failing.jsonl"), "--workflow", str(GOLDEN / "golden.yaml")]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each backend's constructor raises an infrastructure error naming the backend."""

    def backend(name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise InfrastructureError(f"{name} backend asked")

        return refuse

    monkeypatch.setattr("runner.backends.docker.DockerBackend.connect", backend("docker"))
    monkeypatch.setattr("runner.backends.namespace.NamespaceBackend.__init__", backend("namespace"))


def _invoke(args: list[str], tmp_path: Path, **env: str) -> Any:
    return CliRunner().invoke(app, args, env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path), **env})


@pytest.mark.parametrize("command", [RUN, REPRODUCE], ids=["run", "reproduce"])
def test_backend_namespace_makes_the_namespace_backend(
    command: list[str], tmp_path: Path, asked: None
) -> None:
    out = _invoke([*command, "--backend", "namespace"], tmp_path)
    assert out.exit_code == 6, out.output
    assert "namespace backend asked" in out.output and "docker backend" not in out.output


@pytest.mark.parametrize("command", [RUN, REPRODUCE], ids=["run", "reproduce"])
def test_the_backend_setting_chooses_without_the_flag(
    command: list[str], tmp_path: Path, asked: None
) -> None:
    out = _invoke(command, tmp_path, SANDBOX_REPLAY_BACKEND="namespace")
    assert out.exit_code == 6 and "namespace backend asked" in out.output, out.output
    flag = _invoke([*command, "--backend", "docker"], tmp_path, SANDBOX_REPLAY_BACKEND="namespace")
    assert flag.exit_code == 6 and "docker backend asked" in flag.output, flag.output


@pytest.mark.parametrize("command", [RUN, REPRODUCE], ids=["run", "reproduce"])
def test_ray_is_refused_with_exit_2_before_anything_runs(
    command: list[str], tmp_path: Path, asked: None
) -> None:
    out = _invoke([*command, "--backend", "ray"], tmp_path)
    assert out.exit_code == 2, out.output
    assert "--backend: " in out.output and "ray is for submit" in out.output
    assert "backend asked" not in out.output and not (tmp_path / "ledger.sqlite").exists()
    env = _invoke(command, tmp_path, SANDBOX_REPLAY_BACKEND="ray")
    assert env.exit_code == 2 and "SANDBOX_REPLAY_BACKEND" in env.output, env.output
