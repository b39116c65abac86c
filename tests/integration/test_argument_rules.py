"""Argument rules in a real sandbox: the runtime's call-time guard refuses, the trace names it.

A ``local`` tool (it executes in the sandbox) is called with an argument a rule of the policy
denies: the call is refused before the tool's code runs (its marker file is never written), the
episode ends ``denied``, the trace's call line carries ``runner.errors.CapabilityDenied`` and the
rule's name. The same workflow with an allowed argument runs. ``check`` shows the tool as
conditional, and ``policy diff`` over the two traces the runs wrote reports exactly the call
the sandbox refused as newly denied.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker

TOOLS = """
import os

from runner.sdk import Effect, tool


@tool("shell.run", effect=Effect.LOCAL, description="Runs a command (here: notes it).")
def run(command: str) -> dict:
    with open("/tmp/ran-" + str(len(os.listdir("/tmp"))), "w") as handle:
        handle.write(command)
    return {"ran": command, "exit_code": 0}
"""
WORKFLOW = """\
name: guarded
version: "1"
tools: [guarded_tools]
steps:
  - id: cmd
    tool: shell.run
    args: {command: "${task.command}"}
  - id: after
    tool: shell.run
    args: {command: "echo done"}
"""
POLICY = """\
name: guarded
mode: shadow
rules:
  - name: no-recursive-delete
    tool: shell.run
    action: deny
    when:
      command: {matches: '^\\s*rm\\s+-[a-zA-Z]*r'}
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    tasks = [
        {"task_id": "fine", "input": {"command": "ls -la"}},
        {"task_id": "wipe", "input": {"command": "rm -rf /tmp"}},
    ]
    for name, text in (
        ("guarded_tools.py", textwrap.dedent(TOOLS)),
        ("guarded.yaml", WORKFLOW),
        ("guarded-policy.yaml", POLICY),
        ("tasks.jsonl", "".join(json.dumps(t) + "\n" for t in tasks)),
    ):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _cli(args: list[str], cwd: Path, image: str) -> tuple[int, Any, str]:
    env = dict(os.environ)
    env.update({"SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), "SANDBOX_REPLAY_IMAGE": image})
    done = subprocess.run(
        [CLI, *args, "--json"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _lines(trace: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(trace).read_text(encoding="utf-8").splitlines()]


def test_a_call_an_argument_rule_denies_is_refused_in_the_sandbox_and_named(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "guarded")
    code, check, _ = _cli(["check", "guarded.yaml", "--policy", "guarded-policy.yaml"], work, "")
    assert code == 0
    (tool,) = check["workflows"][0]["tools"]
    assert [r["name"] for r in tool["conditional"]] == ["no-recursive-delete"]

    run = ["run", "guarded.yaml", "--tasks", "tasks.jsonl", "--policy", "guarded-policy.yaml"]
    code, fine, err = _cli([*run, "--task", "fine"], work, sandbox_image)
    assert code == 0 and fine["status"] == "succeeded", (fine, err)
    code, wipe, err = _cli([*run, "--task", "wipe"], work, sandbox_image)
    assert code == 1, err  # the episode ran and did not succeed (run's exit code says so)
    assert wipe["status"] == "denied", wipe

    lines = _lines(wipe["trace"])
    calls = [line for line in lines if line["type"] == "call"]
    assert len(calls) == 1  # the refused call; the next step never ran
    refused = calls[0]
    assert refused["args"] == {"command": "rm -rf /tmp"}
    assert refused["error"]["class"] == "runner.errors.CapabilityDenied"
    assert "no-recursive-delete" in refused["error"]["message"]
    assert refused["meta"]["argument_rule"]["rule"] == "no-recursive-delete"
    assert "body" not in refused and "source" not in refused  # nothing executed
    end = lines[-1]
    assert end["status"] == "denied" and end["not_run"] == ["after"]
    assert end["failure"]["error_class"] == "runner.errors.CapabilityDenied"
    assert [json.loads(c["body"])["ran"] for c in _calls(fine["trace"])] == ["ls -la", "echo done"]

    # what the sandbox refused is what policy diff reports, over the traces of both runs
    code, diff, err = _cli(
        [
            "policy",
            "diff",
            "shadow",
            "guarded-policy.yaml",
            "--against",
            fine["trace"],
            wipe["trace"],
        ],
        work,
        sandbox_image,
    )
    assert code == 1, err
    assert diff["newly_denied"]["shell.run"]["count"] == 1
    (example,) = diff["newly_denied"]["shell.run"]["examples"]
    assert example["args"] == '{"command":"rm -rf /tmp"}'
    assert example["new"]["rule"] == "no-recursive-delete"
    assert diff["unchanged"]["shell.run"] == {"allowed": 2, "refused": 0}


def _calls(trace: str) -> list[dict[str, Any]]:
    return [line for line in _lines(trace) if line["type"] == "call"]


SLOW_POLICY = """\
name: slow-patterns
mode: shadow
limits: {timeout_s: 60}
rules:
  - {name: words, tool: shell.run, action: deny, when: {command: {matches: '^(\\w+\\s?){1,16}$'}}}
  - {name: dots, tool: shell.run, action: deny, when: {command: {matches: '(.*a){16}$'}}}
  - {name: pairs, tool: shell.run, action: deny, when: {command: {matches: '(a|aa){16}$'}}}
"""


def test_the_guard_decides_backtracking_patterns_without_holding_the_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    """N06, in the sandbox: the guard searched each rule with ``re`` and a 31-character
    argument held the run to its timeout (``timeout``); now the call is decided (none of the
    three matches it) and runs; the next step's ``echo done`` is two words, denied by them."""
    work = _project(tmp_path / "slow")
    (work / "slow-policy.yaml").write_text(SLOW_POLICY, encoding="utf-8")
    (work / "slow-policy.yaml").chmod(0o644)
    tasks = [
        {"task_id": "slow", "input": {"command": "a" * 30 + "!"}},
        {"task_id": "words", "input": {"command": "ls la tmp"}},
    ]
    (work / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    run = ["run", "guarded.yaml", "--tasks", "tasks.jsonl", "--policy", "slow-policy.yaml"]
    code, slow, err = _cli([*run, "--task", "slow"], work, sandbox_image)
    assert code == 1 and slow["status"] == "denied", (slow, err)  # not "timeout"
    ran, refused = _calls(slow["trace"])  # the 31 characters ran; "echo done" is words
    assert json.loads(ran["body"])["ran"] == "a" * 30 + "!", ran
    assert refused["meta"]["argument_rule"]["rule"] == "words", refused
    code, words, err = _cli([*run, "--task", "words"], work, sandbox_image)
    assert code == 1 and words["status"] == "denied", (words, err)
    (refused,) = _calls(words["trace"])
    assert refused["meta"]["argument_rule"]["rule"] == "words", refused
