"""``--runtime`` names the Docker engine's OCI runtime: with another backend it is refused.

``run --backend namespace --runtime runsc`` ran the episode in bwrap and exit 0, the asked
gVisor boundary silently absent (review4). The namespace backend runs no container and the Ray
nodes' engines take no runtime from the driver, so the flag with either is invalid usage
(exit 2, ``--runtime`` named), checked before anything runs; with ``docker`` it stands.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.backend_choice import with_runtime
from runner.errors import InputError
from runner.settings import Settings
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


@pytest.mark.parametrize("backend", ["namespace", "ray"])
def test_runtime_with_another_backend_is_refused(backend: str) -> None:
    with pytest.raises(InputError, match="--runtime") as caught:
        with_runtime(Settings(), "runsc", backend=backend)
    assert backend in str(caught.value)
    assert with_runtime(Settings(), "runsc", backend="docker").runtime == "runsc"
    assert with_runtime(Settings(), None, backend=backend).runtime is None


def test_the_setting_chooses_the_backend_when_no_flag_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_BACKEND", "namespace")
    with pytest.raises(InputError, match="--runtime"):
        with_runtime(Settings(), "crun", backend=None)


@pytest.mark.parametrize("command", ["run", "submit"])
def test_the_commands_refuse_it_before_anything_runs(command: str, tmp_path: Path) -> None:
    workflow, tasks = str(FIX / "a.yaml"), str(FIX / "tasks.jsonl")
    args = (
        ["run", workflow, "--tasks", tasks, "--task", "t1"]
        if command == "run"
        else ["submit", "--variant", workflow, "--tasks", tasks, "--dry-run"]
    )
    env = {"SANDBOX_REPLAY_STATE_DIR": str(tmp_path)}
    out = CliRunner().invoke(app, [*args, "--backend", "namespace", "--runtime", "runsc"], env=env)
    assert out.exit_code == 2, out.output
    assert "--runtime" in out.output and "namespace" in out.output


@pytest.mark.parametrize("command", ["run", "reproduce"])
def test_the_one_episode_commands_help_does_not_offer_ray(command: str) -> None:
    """``run --help`` offered ``ray (a Ray cluster's nodes)``, which the command refuses."""
    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "Ray cluster's nodes" not in out.output
    assert "namespace" in out.output and "ray is for submit" in out.output
