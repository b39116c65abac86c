"""The demo's traces reproduce from a CRLF checkout of the example (Git for Windows).

Every text file of a copy of examples/helpdesk gets CRLF line endings (workflows, tool modules,
the scripted model, tasks, the traces themselves), as ``core.autocrlf=true`` checks them out.
Before line endings were normalised the workflow was matched by the sha256 of its bytes: both
traces were ``refused`` (exit 5, "run it from the project folder"), in the project folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker

TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".jsonl", ".md", ".txt"}


def crlf_copy(source: Path, target: Path) -> int:
    """Copy ``source`` to ``target`` with every text file's line endings made CRLF."""
    shutil.copytree(source, target)
    converted = 0
    for path in target.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            data = path.read_bytes().replace(b"\r\n", b"\n")
            path.write_bytes(data.replace(b"\n", b"\r\n"))
            converted += 1
    return converted


def test_the_demo_traces_reproduce_from_a_crlf_checkout(tmp_path: Path, sandbox_image: str) -> None:
    work = tmp_path / "helpdesk"
    assert crlf_copy(REPO / "examples" / "helpdesk", work) >= 6
    assert b"\r\n" in (work / "v1.yaml").read_bytes()
    assert b"\r\n" in (work / "traces" / "failing.jsonl").read_bytes()

    failing = run_cli(["reproduce", "traces/failing.jsonl"], work, sandbox_image)
    assert failing.returncode == 0, failing.stdout + failing.stderr
    assert "traces/failing.jsonl: reproduced (exit 0)" in failing.stdout

    incomplete = run_cli(["reproduce", "traces/incomplete.jsonl"], work, sandbox_image)
    assert incomplete.returncode == 1, incomplete.stdout + incomplete.stderr
    assert "not_reproduced (exit 1)" in incomplete.stdout
    assert "first difference [extra_turn]: call #3 kb.search" in incomplete.stdout
    assert "workflow.hash" not in incomplete.stdout  # the environment diff: the same workflow
