"""Acceptance: secrets a run saw never reach its trace, an import or a packet.

A workflow whose read tool returns an OpenAI-style key, an AWS access key id and an SSN-shaped
string (a policy's pattern rule) is recorded (``sandbox-replay record``), packed (``packet``,
from a trace recorded without redaction) and a public τ² trace holding the three is imported:
none of the three is found in any written file, as raw bytes, JSON-escaped or base64
(`tests.support.secrets_search`); the recorded trace has three redaction records, which
``lint`` lists; ``reproduce`` of the redacted trace, and of the packet, says ``reproduced`` in a
real container.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.realdata import realdata
from tests.support.secrets_search import (
    AWS_KEY_ID,
    OPENAI_KEY,
    SECRETS,
    SSN,
    found_in,
    found_in_tree,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "redaction"
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker


def _cli(args: list[str], cwd: Path, image: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update({"SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), "SANDBOX_REPLAY_IMAGE": image})
    return subprocess.run(
        [CLI, "--log-format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _redactions(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for line in lines for r in line.get("redactions", [])]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _record(work: Path, image: str, policy: str, out: str) -> Path:
    done = _cli(
        [
            "record",
            "vault.yaml",
            "--tasks",
            "tasks.jsonl",
            "--task",
            "vault-1",
            "-o",
            out,
            "--policy",
            policy,
            "--json",
        ],
        work,
        image,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return work / out


def test_a_recorded_run_keeps_no_secret_lists_three_redactions_and_reproduces(
    work: Path, sandbox_image: str
) -> None:
    trace = _record(work, sandbox_image, "policy.yaml", "trace.jsonl")
    assert found_in(trace.read_bytes()) == []
    lines = _lines(trace)
    redactions = _redactions(lines)
    assert sorted(r["rule"] for r in redactions) == ["aws_access_key", "openai", "ssn"]
    assert {(r["field"], r["length"]) for r in redactions} == {
        ("body", len(OPENAI_KEY)),
        ("body", len(AWS_KEY_ID)),
        ("body", len(SSN)),
    }
    lint = _cli(["lint", str(trace), "--json"], work, sandbox_image)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    listed = json.loads(lint.stdout)["traces"][0]["redactions"]
    assert [(r["index"], r["rule"]) for r in listed] == [(0, r["rule"]) for r in redactions]
    assert found_in(lint.stdout.encode()) == []
    text = _cli(["lint", str(trace)], work, sandbox_image)
    assert "3 redactions" in text.stdout, text.stdout
    done = _cli(["reproduce", "--json", str(trace)], work, sandbox_image)
    (report,) = json.loads(done.stdout)["traces"]
    assert (done.returncode, report["outcome"]) == (0, "reproduced"), report
    assert found_in_tree(work) == []  # the replay trace and the state folder too


def test_a_packet_of_an_unredacted_trace_holds_no_secret_and_reproduces(
    work: Path, sandbox_image: str
) -> None:
    trace = _record(work, sandbox_image, "policy-off.yaml", "plain.jsonl")
    assert len(found_in(trace.read_bytes())) >= 3  # the positive control: they were there
    packet = work / "out" / "case.tar.gz"
    done = _cli(
        ["packet", str(trace), "-o", str(packet), "--policy", "policy.yaml"], work, sandbox_image
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert found_in_tree(packet.parent) == []
    unpacked = work / "unpacked"
    with tarfile.open(packet) as archive:
        archive.extractall(unpacked, filter="data")
    assert found_in_tree(unpacked) == []
    assert len(_redactions(_lines(unpacked / "trace.jsonl"))) == 3
    fresh = work / "fresh"
    fresh.mkdir()
    shutil.copyfile(packet, fresh / "case.tar.gz")
    done = _cli(["reproduce", "--json", "case.tar.gz"], fresh, sandbox_image)
    (report,) = json.loads(done.stdout)["traces"]
    assert (done.returncode, report["outcome"]) == (0, "reproduced"), report


def test_an_import_of_a_public_trace_holding_the_secrets_writes_none_of_them(
    tmp_path: Path, sandbox_image: str
) -> None:
    source = realdata("tau2-retail", "results.json")
    results = json.loads(source.read_text(encoding="utf-8"))
    simulation = results["simulations"][0]
    results["simulations"] = [simulation]
    told = next(m for m in simulation["messages"] if m.get("role") == "tool")
    told["content"] = json.dumps(
        {"note": told["content"], "api_key": OPENAI_KEY, "aws": AWS_KEY_ID, "ssn": SSN}
    )
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    shutil.copyfile(source.parent / "retail_tools.json", tmp_path / "retail_tools.json")
    shutil.copyfile(FIXTURE / "policy.yaml", tmp_path / "policy.yaml")
    assert len(found_in((tmp_path / "results.json").read_bytes())) >= 3
    done = _cli(
        [
            "import",
            "tau2",
            "results.json",
            "--tools",
            "retail_tools.json",
            "--out",
            "imported",
            "--policy",
            "policy.yaml",
        ],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert found_in_tree(tmp_path / "imported") == []
    (trace,) = (tmp_path / "imported" / "traces").glob("*.jsonl")
    rules = {r["rule"] for r in _redactions(_lines(trace))}
    assert rules == {"openai", "aws_access_key", "ssn"}
    done = _cli(["reproduce", "--json", str(trace)], tmp_path, sandbox_image)
    (report,) = json.loads(done.stdout)["traces"]
    assert (done.returncode, report["outcome"]) == (0, "reproduced"), report
    assert SECRETS  # the three made-up values searched for
