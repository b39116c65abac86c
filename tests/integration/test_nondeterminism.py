"""Acceptance in real containers: every replay lists what it read that its trace does not pin.

A pure tool (it runs again in reproduce) reads ``time.time()`` directly, draws from ``random``
with no seed, reads ``os.environ["DET_SETTING"]``, opens ``/etc/passwd`` (outside the tool
snapshot) and tries to connect out (inside the sandbox: there is no network). Its result does
not depend on any of it, so the replay is ``reproduced``; the report lists each read, and
``--strict-determinism`` refuses the replay (exit 5). A workflow whose pure tool reads nothing
of the kind lists nothing and passes under ``--strict-determinism``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli, run_cli_json

pytestmark = pytest.mark.docker

TOOLS = """
import os
import random
import socket
import time

from runner.sdk import Effect, tool


@tool("det.touch", effect=Effect.PURE, description="Reads what a trace does not pin.")
def touch() -> str:
    time.time()
    random.random()
    try:
        os.environ["DET_SETTING"]
    except KeyError:
        pass
    with open("/etc/passwd", encoding="utf-8") as handle:
        handle.read(1)
    try:  # no network in the sandbox: the attempt fails at once and is logged
        socket.create_connection(("10.255.255.1", 9), timeout=2).close()
    except OSError:
        pass
    return "ok"


@tool("det.clean", effect=Effect.PURE, description="Reads nothing of the kind.")
def clean(text: str) -> str:
    return text.upper()
"""

TOUCH = """\
name: det-touch
version: "1"
tools: [det_tools]
steps:
  - id: touch
    tool: det.touch
"""

AGENT = """
import time

from det_tools import clean


def run(task: dict) -> dict:
    started = time.time()  # an agent reading the machine's clock directly
    return {"text": clean(task["text"]), "late": started < 0}
"""

AGENT_WORKFLOW = """\
name: det-agent
version: "1"
tools: [det_tools]
steps:
  - id: agent
    program: det_agent:run
    tools: [det.clean]
"""

CLEAN = """\
name: det-clean
version: "1"
tools: [det_tools]
steps:
  - id: clean
    tool: det.clean
    args: {text: "${task.text}"}
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    task = {"task_id": "t1", "input": {"text": "hi"}}
    for name, text in (
        ("det_tools.py", textwrap.dedent(TOOLS)),
        ("touch.yaml", TOUCH),
        ("clean.yaml", CLEAN),
        ("det_agent.py", textwrap.dedent(AGENT)),
        ("agent.yaml", AGENT_WORKFLOW),
        ("tasks.jsonl", json.dumps(task) + "\n"),
    ):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _trace(work: Path, workflow: str, image: str) -> str:
    code, summary, err = run_cli_json(
        ["--log-format", "json", "run", workflow, "--tasks", "tasks.jsonl", "--task", "t1"],
        work,
        image,
    )
    assert code == 0 and summary["status"] == "succeeded", (summary, err)
    return str(summary["trace"])


def _reproduce(work: Path, trace: str, image: str, *flags: str) -> tuple[int, dict[str, Any]]:
    code, payload, err = run_cli_json(["reproduce", "--json", *flags, trace], work, image)
    (report,) = payload["traces"]
    assert payload["exit_code"] == code, err
    return code, report


def test_each_unpinned_read_is_listed_and_strict_determinism_refuses(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "det")
    trace = _trace(work, "touch.yaml", sandbox_image)
    code, report = _reproduce(work, trace, sandbox_image)
    assert (code, report["outcome"]) == (0, "reproduced"), report
    found = {(e["kind"], e["what"]): e for e in report["nondeterminism"]["entries"]}
    assert found[("wall_clock", "time.time")]["site"].endswith("det_tools.py:12"), found
    # the user's file, not the sandbox's copy of it (was: /sandbox/tools/0/det_tools.py:12)
    assert not found[("wall_clock", "time.time")]["site"].startswith("/sandbox/"), found
    assert ("randomness", "random.random") in found, found
    assert found[("environment_variable", "DET_SETTING")]["present"] is False, found
    assert ("file_read", "/etc/passwd") in found, found
    assert any(k == "outbound" and "10.255.255.1:9" in w for k, w in found), found
    # nothing else: the outbound log names the lookup and the connect of the one attempt
    others = [w for k, w in found if k == "outbound" and "10.255.255.1:9" not in w]
    assert len(found) - len(others) >= 5 and not others, json.dumps(list(found.values()))
    assert report["nondeterminism"]["not_observed"]  # what it cannot see is said
    terminal = run_cli(["reproduce", trace], work, sandbox_image)
    assert f"nondeterminism: {len(found)} reads the trace does not pin" in terminal.stdout
    assert "environment_variable DET_SETTING (1 read, unset in the sandbox" in terminal.stdout
    code, report = _reproduce(work, trace, sandbox_image, "--strict-determinism")
    assert (code, report["outcome"]) == (5, "refused"), report
    assert "the replay itself: reproduced" in report["reason"]
    assert len(report["refusals"]) == len(found), report["refusals"]
    assert any("/etc/passwd" in r for r in report["refusals"])
    terminal = run_cli(["reproduce", "--strict-determinism", trace], work, sandbox_image)
    said = [line for line in terminal.stdout.splitlines() if "DET_SETTING" in line]
    assert len(said) == 1, terminal.stdout  # each refusal said once (was: twice)


def test_a_clean_replay_lists_nothing_and_passes_strict_determinism(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "det")
    trace = _trace(work, "clean.yaml", sandbox_image)
    code, report = _reproduce(work, trace, sandbox_image, "--strict-determinism")
    assert (code, report["outcome"]) == (0, "reproduced"), report
    assert report["nondeterminism"]["entries"] == [], report["nondeterminism"]
    assert report["nondeterminism"]["dropped"] == 0


def test_an_agent_program_reading_the_clock_directly_is_listed(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "det")
    trace = _trace(work, "agent.yaml", sandbox_image)
    code, report = _reproduce(work, trace, sandbox_image, "--strict-determinism")
    assert (code, report["outcome"]) == (5, "refused"), report
    found = {(e["kind"], e["what"]): e for e in report["nondeterminism"]["entries"]}
    clock = found[("wall_clock", "time.time")]
    assert clock["by"] == "code" and clock["site"].endswith("det_agent.py:8"), found
    assert report["refusals"] == [f"wall_clock time.time (1 read, {clock['site']})"], report
