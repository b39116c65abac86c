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
