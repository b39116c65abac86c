"""Attack test: ``policy diff`` takes each call's effect class from the call line.

The structural layer decides a recorded call by the effect class its own line records
(docs/policy-format.md). A trace is someone else's file: one that records the same tool as
``unsafe`` on one line and ``pure`` on the next is plainly lying about one of them, yet each
line is decided on its own claim, so a change that denies ``unsafe`` reports half of the calls
"unchanged". Fail closed would be: a tool's strictest recorded class decides all its calls
(or the disagreement is reported as invalid input).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.policy import diff_policies, load_policy
from tests.unit.policy.test_diff import _trace


def _policy(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _diff(tmp_path: Path, calls: list[tuple[str, str | None, Any]]) -> dict[str, Any]:
    old = _policy(tmp_path, "old", "name: old\nmode: reproduce\ndeny_effects: []\n")
    new = _policy(tmp_path, "new", "name: new\nmode: shadow\ndeny_effects: [unsafe]\n")
    trace = _trace(tmp_path, calls)
    data = diff_policies(load_policy(str(old)), load_policy(str(new)), [trace]).to_json()
    return json.loads(json.dumps(data))


def test_control_unsafe_calls_are_newly_denied(tmp_path: Path) -> None:
    data = _diff(tmp_path, [("pay.refund", "unsafe", {"id": 1}), ("pay.refund", None, {})])
    assert data["newly_denied"]["pay.refund"]["count"] == 2


def test_one_tool_recorded_with_two_effect_classes_is_not_half_unchanged(tmp_path: Path) -> None:
    data = _diff(tmp_path, [("pay.refund", "unsafe", {"id": 1}), ("pay.refund", "pure", {"id": 2})])
    assert data["newly_denied"]["pay.refund"]["count"] == 2, data["unchanged"]
    assert data["effect_disagreements"] == {"pay.refund": ["pure", "unsafe"]}


def test_a_catastrophic_regex_in_a_policy_does_not_hang_policy_diff(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.paths import REPO

    old = _policy(tmp_path, "old", "name: old\nmode: shadow\n")
    new = _policy(
        tmp_path,
        "new",
        "name: new\nmode: shadow\nrules:\n  - name: redos\n    tool: shell.run\n"
        "    action: deny\n    when:\n      command: {matches: '^(a+)+$'}\n",
    )
    trace = _trace(tmp_path, [("shell.run", "local", {"command": "a" * 40 + "!"})])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runner", "policy", "diff", str(old), str(new), str(trace)],
            capture_output=True,
            timeout=10,
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("policy diff still running after 10 s on one 41-character argument")
    assert done.returncode in (0, 1, 2)
