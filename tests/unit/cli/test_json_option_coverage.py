"""``--json`` on ``image build``, ``view``, ``packet`` and ``tasks extract`` (a new user's finding).

Each prints one JSON object on stdout, and an error as ``{"exit_code", "error", ...}`` the way
every other command does (`runner.cli.app.fail`). Docker is replaced by fakes where the command
would need it; the real builds and packets are in tests/integration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.backends.docker.image import BuildResult
from runner.cli.app import app
from runner.errors import InputError
from tests.support.cli import sigint_as_default
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"
TRACE = HELPDESK / "traces" / "failing.jsonl"


def _invoke(*args: str, tmp_path: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path)})


def test_tasks_extract_json_is_one_object_and_its_error_too(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    done = _invoke("tasks", "extract", str(TRACE), "-o", str(out), "--json", tmp_path=tmp_path)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)  # the whole of stdout: one object, no progress lines
    assert data["output"] == str(out) and data["duplicates"] == [] and data["exit_code"] == 0
    (task,) = data["tasks"]
    written = json.loads(out.read_text().splitlines()[0])
    assert task["task_id"] == written["task_id"]
    assert task["observations"] == len(written["observations"]) > 0
    bad = _invoke(
        "tasks", "extract", str(tmp_path / "no.jsonl"), "-o", str(out), "--json", tmp_path=tmp_path
    )
    error = json.loads(bad.stdout)
    assert bad.exit_code == 2 == error["exit_code"] and "no.jsonl" in error["error"]


def test_packet_json_names_the_packet_its_files_and_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_build(trace: Path, output: Path, workflow: Any, **kwargs: Any) -> list[str]:
        output.write_bytes(b"packet")
        return ["README.md", "trace.jsonl"]

    monkeypatch.setattr("runner.cli.commands.packet.build_packet", fake_build)
    packet = tmp_path / "p.tar.gz"
    done = _invoke("packet", str(TRACE), "-o", str(packet), "--json", tmp_path=tmp_path)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {
        "packet": str(packet),
        "files": ["README.md", "trace.jsonl"],
        "reproduce": f"sandbox-replay reproduce {packet}",
        "exit_code": 0,  # as every command's JSON (a new user's finding: it was missing)
    }

    def refused(*args: Any, **kwargs: Any) -> list[str]:
        raise InputError("cannot read trace: no such file", file="x.jsonl")

    monkeypatch.setattr("runner.cli.commands.packet.build_packet", refused)
    bad = _invoke("packet", "x.jsonl", "-o", str(packet), "--json", tmp_path=tmp_path)
    assert bad.exit_code == 2 and json.loads(bad.stdout)["file"] == "x.jsonl"


class _Engine:
    api = object()

    def close(self) -> None:
        pass


def test_image_build_json_keeps_progress_off_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_build(api: Any, *, image: str, echo: Any, **kwargs: Any) -> BuildResult:
        echo("base image: python:3.11-slim (present locally)")
        return BuildResult(image, "sha256:" + "0" * 64, "python:3.11-slim", "local")

    monkeypatch.setattr("runner.cli.commands.image.DockerBackend.connect", lambda *a: _Engine())
    monkeypatch.setattr("runner.cli.commands.image.build_image", fake_build)
    done = _invoke("image", "build", "--tag", "mine:1", "--json", tmp_path=tmp_path)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["image"] == "mine:1" and data["base_source"] == "local" and data["wheels"] == []
    assert data["exit_code"] == 0
    assert "base image: python:3.11-slim" in done.stderr
    text = _invoke("image", "build", "--tag", "mine:1", tmp_path=tmp_path)
    assert "base image: python:3.11-slim" in text.stdout  # without --json: as before


def test_view_json_is_one_line_with_the_address(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_REPLAY")}
    env["SANDBOX_REPLAY_STATE_DIR"] = str(tmp_path)
    view = subprocess.Popen(
        [sys.executable, "-m", "runner", "view", str(TRACE), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_default,
    )
    try:
        assert view.stdout is not None and view.stderr is not None
        line = view.stdout.readline()
        data = json.loads(line)
        assert data["url"].startswith("http://127.0.0.1:") and data["job_id"] is None, line
        assert data["trace"] == str(TRACE.resolve()) and data["exit_code"] == 0
    finally:
        view.send_signal(signal.SIGINT)
        assert view.wait(10) == 130
    missing = subprocess.run(
        [sys.executable, "-m", "runner", "view", "no-such-job", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    error = json.loads(missing.stdout)
    assert missing.returncode == 2 == error["exit_code"] and "no-such-job" in error["error"]


def test_image_build_refuses_a_bad_tag_before_anything_is_pulled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Was: a registry pull, then exit 6 "invalid reference format" (a new user's finding)."""

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no engine may be asked for a bad tag")

    monkeypatch.setattr("runner.cli.commands.image.DockerBackend.connect", never)
    done = _invoke("image", "build", "--tag", "bad tag", "--json", tmp_path=tmp_path)
    error = json.loads(done.stdout)
    assert done.exit_code == 2 == error["exit_code"] and error["field"] == "--tag"
    assert "'bad tag' is not a Docker image reference" in error["error"]
