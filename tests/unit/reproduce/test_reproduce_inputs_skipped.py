"""What a new user meets first with ``reproduce``: a traces folder's other files, a FIFO packet.

``reproduce traces/*`` (the shell's glob) names ``tools.manifest.json`` too: among several
arguments a file that is neither a trace nor a packet is skipped, and the command says how many
it skipped (a folder's other files too); one such file named alone is still refused by name.
A FIFO named like a packet is refused as a packet, not as a trace.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.errors import InputError
from runner.reproduce.inputs import expand_inputs
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"


def _traces(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(GOLDEN / "failing.jsonl", folder / "a.jsonl")
    shutil.copy(GOLDEN / "failing.jsonl", folder / "b.jsonl")
    (folder / "tools.manifest.json").write_text("{}\n", encoding="utf-8")
    (folder / "README.md").write_text("notes\n", encoding="utf-8")
    return folder


def test_a_glob_skips_the_files_that_are_not_traces_and_counts_them(tmp_path: Path) -> None:
    folder = _traces(tmp_path)
    skipped: list[Path] = []
    found = expand_inputs(sorted(folder.iterdir()), skipped=skipped)  # what traces/* gives
    assert [p.name for p in found] == ["a.jsonl", "b.jsonl"]
    assert sorted(p.name for p in skipped) == ["README.md", "tools.manifest.json"]
    from_folder: list[Path] = []
    assert expand_inputs([folder], skipped=from_folder) == found
    assert sorted(p.name for p in from_folder) == ["README.md", "tools.manifest.json"]


def test_one_file_named_alone_is_still_taken_and_only_skipped_files_is_an_error(
    tmp_path: Path,
) -> None:
    folder = _traces(tmp_path)
    manifest = folder / "tools.manifest.json"
    assert expand_inputs([manifest], skipped=[]) == [manifest]  # refused by name later
    with pytest.raises(InputError, match=r"no traces \(\*\.jsonl\) or packets.*2 other files"):
        expand_inputs([manifest, folder / "README.md"], skipped=[])


def _invoke(*args: str, tmp_path: Path) -> Any:
    return CliRunner().invoke(
        app, ["reproduce", *args], env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path / "state")}
    )


def test_reproduce_says_how_many_files_it_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.reproduce.report import ReproduceReport

    folder = _traces(tmp_path)
    seen: list[str] = []

    def reproduce(self: Any, path: Path) -> ReproduceReport:
        seen.append(path.name)
        return ReproduceReport(str(path), "reproduced", "same outcome")

    monkeypatch.setattr("runner.reproduce.reproducer.Reproducer.reproduce", reproduce)
    out = _invoke(*(str(p) for p in sorted(folder.iterdir())), tmp_path=tmp_path)
    assert out.exit_code == 0, out.output
    assert seen == ["a.jsonl", "b.jsonl"]
    assert "skipped 2 files that are not traces (*.jsonl) or packets" in out.output
    assert "tools.manifest.json" in out.output


def test_a_fifo_named_as_a_packet_is_refused_as_a_packet(tmp_path: Path) -> None:
    fifo = tmp_path / "review.tar.gz"
    os.mkfifo(fifo)
    out = _invoke(str(fifo), tmp_path=tmp_path)
    assert out.exit_code == 2, out.output
    assert "cannot read packet" in out.output and "cannot read trace" not in out.output
    assert "FIFO" in out.output


def test_a_folders_fifo_or_dangling_link_named_as_a_trace_is_refused_not_dropped(
    tmp_path: Path,
) -> None:
    """Named ``*.jsonl`` in a folder it is the same input as named by the glob (review4).

    ``reproduce traces/`` dropped a FIFO or a dangling link called ``x.jsonl`` without a word,
    while ``reproduce traces/*`` refused it as an invalid trace beside the others.
    """
    folder = _traces(tmp_path)
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    os.mkfifo(folder / "pipe.txt")
    skipped: list[Path] = []
    found = expand_inputs([folder], skipped=skipped)
    names = [p.name for p in found]
    assert names == ["a.jsonl", "b.jsonl", "gone.jsonl", "loop.jsonl", "pipe.jsonl"]
    assert sorted(p.name for p in skipped) == ["README.md", "pipe.txt", "tools.manifest.json"]


def test_a_subfolder_without_traces_among_several_arguments_is_skipped(tmp_path: Path) -> None:
    """``reproduce traces/*`` over a folder that holds an ``old/`` folder of notes (review4).

    The whole command stopped with exit 2 (``folder holds no traces``); among several arguments
    such a folder is skipped and counted like the other files. Named alone it is still an error.
    """
    folder = _traces(tmp_path)
    (folder / "old").mkdir()
    (folder / "old" / "notes.txt").write_text("x\n", encoding="utf-8")
    skipped: list[Path] = []
    found = expand_inputs(sorted(folder.iterdir()), skipped=skipped)
    assert [p.name for p in found] == ["a.jsonl", "b.jsonl"]
    assert "old" in [p.name for p in skipped]
    with pytest.raises(InputError, match="folder holds no traces"):
        expand_inputs([folder / "old"], skipped=[])


def test_a_fifo_in_a_folder_is_refused_as_invalid_beside_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    os.mkfifo(folder / "pipe.jsonl")
    out = _invoke(str(folder), tmp_path=tmp_path)  # the only input: read as a trace, refused
    assert out.exit_code == 2, out.output
    assert "FIFO" in out.output and "Traceback" not in out.output
