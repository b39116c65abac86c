"""``check`` is the gate ``submit`` is: an empty folder and a model function ``submit`` refuses
are invalid input (exit 2, named), never "eligible".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

ROOT = REPO
FIX = ROOT / "tests" / "fixtures" / "helpdesk"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_folder_with_no_workflow_is_invalid_input(tmp_path: Path) -> None:
    empty = tmp_path / "workflows"
    empty.mkdir()
    (empty / "README.md").write_text("not a workflow\n")
    code, out, err = run(str(empty))
    assert code == 2, (out, err)
    assert f"{empty}: a folder with no workflow file (*.yaml, *.yml)" in out
    code, out, _ = run(str(empty), "--json")
    data = json.loads(out)
    assert code == 2 and data["eligible"] is False
    assert data["workflows"][0]["problems"][0]["kind"] == "invalid"


def test_a_folder_with_no_workflow_makes_the_whole_check_fail(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    shutil.copy(FIX / "safe.yaml", tmp_path / "safe.yaml")
    shutil.copy(FIX / "hd_tools.py", tmp_path / "hd_tools.py")
    shutil.copy(FIX / "hd_model.py", tmp_path / "hd_model.py")
    code, out, _ = run(str(tmp_path / "safe.yaml"), str(tmp_path / "empty"))
    assert code == 2
    assert "safe.yaml: eligible" in out and "empty: a folder with no workflow" in out


@pytest.mark.parametrize(
    ("function", "needle"),
    [
        ("hd_model:nosuch", "no attribute 'nosuch'"),
        ("nosuch_module:respond", "nosuch_module"),
    ],
)
def test_check_refuses_a_model_function_submit_refuses(
    tmp_path: Path, function: str, needle: str
) -> None:
    for name in ("hd_tools.py", "hd_model.py"):
        shutil.copy(FIX / name, tmp_path / name)
    workflow = tmp_path / "wf.yaml"
    text = (FIX / "safe.yaml").read_text()
    workflow.write_text(text.replace("function: hd_model:respond", f"function: {function}"))
    code, out, err = run(str(workflow))
    assert code == 2, (out, err)
    assert f"{workflow}:7: model.function: " in out and needle in out
    submit = CliRunner().invoke(
        app, ["submit", "--variant", str(workflow), "--tasks", str(tmp_path / "t.jsonl")]
    )
    assert submit.exit_code == 2  # the same gate


def test_the_fixture_workflow_names_a_model_that_exists() -> None:
    code, out, err = run(str(FIX / "safe.yaml"))
    assert code == 0, (out, err)


def test_a_replay_model_is_checkable_but_not_submittable(tmp_path: Path) -> None:
    for name in ("hd_tools.py", "hd_model.py"):
        shutil.copy(FIX / name, tmp_path / name)
    workflow = tmp_path / "wf.yaml"
    text = (FIX / "safe.yaml").read_text()
    workflow.write_text(
        text.replace("  function: hd_model:respond\n", "").replace("scripted", "replay")
    )
    (tmp_path / "t.jsonl").write_text('{"task_id": "t1", "input": {"ticket_id": "T-1"}}\n')
    code, out, _ = run(str(workflow))
    assert code == 0, out  # reproduce serves it from a trace
    submit = CliRunner().invoke(
        app, ["submit", "--variant", str(workflow), "--tasks", str(tmp_path / "t.jsonl")]
    )
    assert submit.exit_code == 2
    assert f"{workflow}:6: model.provider: a replay provider" in submit.stderr
