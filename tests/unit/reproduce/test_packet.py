"""Reviewer packets: contents, determinism, the workflow found by its hash, safe round trip."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.reproduce.inputs import find_workflow_file, safe_extract
from tests.support.fakes import trusted_packet
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"


def test_a_packet_holds_everything_to_reproduce_and_nothing_else(tmp_path: Path) -> None:
    members = trusted_packet(
        GOLDEN / "failing.jsonl", tmp_path / "p.tar.gz", state_dir=tmp_path / "state"
    )
    assert members == [
        "README.md",
        "environment.json",
        "manifest.json",
        "trace.jsonl",
        "workflow/golden.yaml",
        "workflow/golden_model.py",
        "workflow/golden_tools.py",
    ]
    out = tmp_path / "out"
    out.mkdir()
    safe_extract(tmp_path / "p.tar.gz", out)
    assert (out / "trace.jsonl").read_bytes() == (GOLDEN / "failing.jsonl").read_bytes()
    assert (out / "workflow" / "golden_tools.py").read_bytes() == (
        GOLDEN / "golden_tools.py"
    ).read_bytes()
    readme = (out / "README.md").read_text()
    assert "sandbox-replay reproduce p.tar.gz" in readme
    import json

    recorded = json.loads((GOLDEN / "failing.jsonl").read_text().splitlines()[0])
    found = find_workflow_file(out / "trace.jsonl", recorded["workflow"]["hash"], [])
    assert found == (out / "workflow" / "golden.yaml").resolve()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["policy"]["name"] == "reproduce"
    assert {t["id"]: t["disposition"] for t in manifest["tools"]}["text.summarize"] == "execute"
    with tarfile.open(tmp_path / "p.tar.gz") as archive:
        assert all(m.isfile() and m.mtime == 0 for m in archive.getmembers())


def test_the_same_trace_gives_the_same_bytes(tmp_path: Path) -> None:
    trusted_packet(
        GOLDEN / "failing.jsonl", tmp_path / "a" / "p.tar.gz", state_dir=tmp_path / "state"
    )
    trusted_packet(
        GOLDEN / "failing.jsonl", tmp_path / "b" / "p.tar.gz", state_dir=tmp_path / "state"
    )
    digest = [hashlib.sha256((tmp_path / n / "p.tar.gz").read_bytes()).hexdigest() for n in "ab"]
    assert digest[0] == digest[1]


def test_a_trace_away_from_its_workflow_needs_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    away = tmp_path / "away" / "t.jsonl"
    away.parent.mkdir()
    shutil.copyfile(GOLDEN / "failing.jsonl", away)
    with pytest.raises(InputError, match="pass --workflow"):
        trusted_packet(away, tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    assert not (tmp_path / "p.tar.gz").exists()
    trusted_packet(
        away, tmp_path / "p.tar.gz", GOLDEN / "golden.yaml", state_dir=tmp_path / "state"
    )
    assert (tmp_path / "p.tar.gz").stat().st_size > 0


PROGRAM_WORKFLOW = """name: prog
version: "1"
tools: [ptools]
requirements: requirements.txt
model: {provider: openai, name: gpt-4.1-mini}
steps:
  - id: agent
    program: entry:run
    tools: [t.echo]
"""


def _program_project(root: Path, requirements: bool = True) -> Path:
    root.mkdir()
    (root / "prog.yaml").write_text(PROGRAM_WORKFLOW, encoding="utf-8")
    (root / "ptools.py").write_text(
        "from runner.sdk import Effect, tool\n\n\n"
        '@tool("t.echo", effect=Effect.PURE)\ndef echo(text: str) -> str:\n    return text\n',
        encoding="utf-8",
    )
    (root / "entry.py").write_text(
        "import helper\nfrom pkg.sub import value\n\n\ndef run(task_input):\n"
        "    return helper.answer() + value\n",
        encoding="utf-8",
    )
    (root / "helper.py").write_text("def answer():\n    return 'a'\n", encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "sub.py").write_text("value = 'b'\n", encoding="utf-8")
    (root / "unrelated.py").write_text("raise SystemExit('never packed')\n", encoding="utf-8")
    if requirements:
        (root / "requirements.txt").write_text("openai==3.57.0\n", encoding="utf-8")
    return root / "prog.yaml"


def _record(trace: Path, workflow: Path) -> None:
    from runner import sdk

    with sdk.record(trace, task_id="t-1", workflow=str(workflow)):
        pass


def test_a_program_steps_packet_carries_its_module_its_local_imports_and_requirements(
    tmp_path: Path,
) -> None:
    workflow = _program_project(tmp_path / "project")
    trace = tmp_path / "project" / "run.jsonl"
    _record(trace, workflow)
    members = trusted_packet(trace, tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    code = sorted(m for m in members if m.startswith("workflow/"))
    assert code == [
        "workflow/entry.py",  # the program module
        "workflow/helper.py",  # a module of its folder it imports
        "workflow/pkg/__init__.py",  # a package of its folder it imports
        "workflow/pkg/sub.py",
        "workflow/prog.yaml",
        "workflow/ptools.py",
        "workflow/requirements.txt",  # the image's requirements the workflow names
    ]
    out = tmp_path / "out"
    out.mkdir()
    safe_extract(tmp_path / "p.tar.gz", out)
    assert (out / "workflow" / "requirements.txt").read_text() == "openai==3.57.0\n"


def test_a_named_requirements_file_that_is_missing_is_invalid_input(tmp_path: Path) -> None:
    workflow = _program_project(tmp_path / "project", requirements=False)
    trace = tmp_path / "project" / "run.jsonl"
    _record(trace, workflow)
    with pytest.raises(InputError, match=r"requirements file 'requirements\.txt'") as caught:
        trusted_packet(trace, tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    assert caught.value.fields.get("line") == 4
    assert not (tmp_path / "p.tar.gz").exists()


@pytest.mark.parametrize("named", ["../secrets.txt", "/etc/passwd", "req*.txt", "a\\\\b.txt"])
def test_a_requirements_path_outside_the_workflows_folder_is_refused(named: str) -> None:
    from runner.domain.workflow import Workflow

    with pytest.raises(ValueError, match="requirements"):
        Workflow.model_validate(
            {
                "name": "w",
                "version": "1",
                "requirements": named,
                "steps": [{"id": "s", "tool": "t.echo"}],
            }
        )
