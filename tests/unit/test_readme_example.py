"""The README's "Your own workflow" example works as printed: its tool module, scripted model,
workflow and task line are taken from README.md, checked eligible and run (as a local process:
no Docker here; the sandboxed run is the same episode driver)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> dict[str, str]:
    """The fenced blocks of the section, by the file name on their first line (or language)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Your own workflow") : text.index("## The sandbox")]
    found: dict[str, str] = {}
    for language, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S):
        first = body.splitlines()[0]
        name = first[2:].strip() if first.startswith("# ") else language
        found[name] = body
    return found


def test_the_readme_example_is_eligible_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.admission.eligibility import check_eligibility
    from runner.backends.unsandboxed import UnsandboxedProcessBackend
    from runner.runs.run import execute_run
    from runner.settings import Settings

    blocks = _blocks()
    for name in ("my_tools.py", "my_model.py", "weather.yaml"):
        (tmp_path / name).write_text(blocks[name], encoding="utf-8")
    task = json.loads(blocks["json"])  # shown on several lines; a task file has one a line
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    for module in ("my_tools", "my_model"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.chdir(tmp_path)
    assert check_eligibility([tmp_path / "weather.yaml"], "shadow").exit_code == 0
    result = execute_run(
        Settings(state_dir=tmp_path / "state"),
        tmp_path / "weather.yaml",
        tmp_path / "tasks.jsonl",
        task["task_id"],
        backend=UnsandboxedProcessBackend(),
    )
    assert result.status == "succeeded", result.end
    assert task["expected"]["output_contains"] in result.end["output"]
