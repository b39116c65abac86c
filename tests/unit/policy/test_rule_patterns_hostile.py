"""A policy's regular expressions against hostile arguments and parsers.

N06: patterns the old shape checker accepted (``^(\\w+\\s?){1,16}$``, ``(.*a){16}$``,
``(a|aa){16}$``) backtracked for minutes over a 31-character argument: ``policy diff`` took
76 s. Now each is searched by `runner.wire.linearre` and ``policy diff`` decides every call.
N12: a pattern of 500 nested groups crashed Python's own parser (a traceback, exit 1); now it
is a clear exit 2 naming the file, the rule and the field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO
from tests.unit.policy.test_diff import _trace

ISSUE_PATTERNS = {
    "t1": r"^(\w+\s?){1,16}$",
    "t2": r"(.*a){16}$",
    "t3": r"(a|aa){16}$",
}
SLOW = "a" * 30 + "!"  # on the backtracking engine: over 20 s for t1 and t2 each, measured


def _cli(tmp_path: Path, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _policy(tmp_path: Path, name: str, rules: dict[str, str]) -> Path:
    text = f"name: {name}\nmode: shadow\n"
    if rules:
        text += "rules:\n"
    for tool, pattern in rules.items():
        quoted = pattern.replace("'", "''")
        text += (
            f"  - name: rule-{tool}\n    tool: {tool}\n    action: deny\n"
            f"    when:\n      text: {{matches: '{quoted}'}}\n"
        )
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_policy_diff_decides_backtracking_patterns_over_hostile_arguments(tmp_path: Path) -> None:
    old = _policy(tmp_path, "old", {})
    new = _policy(tmp_path, "new", ISSUE_PATTERNS)
    calls = [(tool, "local", {"text": SLOW}) for tool in ISSUE_PATTERNS]
    calls += [
        ("t1", "local", {"text": "a b c"}),
        ("t2", "local", {"text": "x" + "a" * 16}),
        ("t3", "local", {"text": "a" * 20}),
    ]
    trace = _trace(tmp_path, calls)
    # a hang detector, not a speed claim: the old engine needed minutes here
    done = _cli(tmp_path, "policy", "diff", str(old), str(new), str(trace), "--json", timeout_s=60)
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert {t: v["count"] for t, v in report["newly_denied"].items()} == dict.fromkeys(
        ISSUE_PATTERNS, 1
    ), report
    assert report["unchanged"] == {t: {"allowed": 1, "refused": 0} for t in ISSUE_PATTERNS}


def test_a_pattern_of_500_nested_groups_is_an_input_error_naming_the_field(
    tmp_path: Path,
) -> None:
    old = _policy(tmp_path, "old", {})
    new = _policy(tmp_path, "new", {"t1": "(" * 500 + "a" + ")" * 500})
    trace = _trace(tmp_path, [("t1", "local", {"text": "a"})])
    done = _cli(tmp_path, "policy", "diff", str(old), str(new), str(trace), timeout_s=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    assert f"{new}:4" in done.stderr and "rule 'rule-t1': when.text.matches" in done.stderr
    assert "nested more than 100 deep" in done.stderr, done.stderr
