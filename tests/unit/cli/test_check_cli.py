"""``sandbox-replay check``: lines, --json, --policy, exit codes 0 / 3 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

ROOT = REPO
FIX = "tests/fixtures/helpdesk"


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


def test_eligible_workflows_exit_0() -> None:
    code, out, _ = run(f"{FIX}/safe.yaml")
    assert code == 0
    assert out.strip() == (f"{FIX}/safe.yaml: eligible: 4 steps, 4 tools (2 execute, 2 recorded)")


def test_unsafe_tool_exit_3_with_the_diagnostic_line() -> None:
    code, out, err = run(f"{FIX}/unsafe_step.yaml", "--policy", "shadow")
    assert code == 3
    assert out.splitlines() == [
        f'{FIX}/unsafe_step.yaml: step "close": tool "ticket.close" is unsafe: '
        "denied by policies/shadow.yaml (deny effect unsafe)"
    ]
    assert err.strip() == "1 tool problem under the policy policies/shadow.yaml"


def test_every_problem_is_printed() -> None:
    code, out, _ = run(f"{FIX}/many_problems.yaml", f"{FIX}/agent_unsafe.yaml", f"{FIX}/safe.yaml")
    assert code == 3
    lines = out.splitlines()
    assert len(lines) == 5
    assert sum('tool "email.send" is unsafe' in line for line in lines) == 2
    assert any('tool "nope.nothing" does not resolve' in line for line in lines)
    assert lines[-1].startswith(f"{FIX}/safe.yaml: eligible")


def test_invalid_input_exit_2_and_wins_over_3() -> None:
    code, out, _ = run(f"{FIX}/unsafe_step.yaml", f"{FIX}/typo_key.yaml")
    assert code == 2
    assert f"{FIX}/typo_key.yaml:7: steps[0].agrs: unknown key 'agrs'" in out


def test_reproduce_policy_and_a_policy_path() -> None:
    assert run(f"{FIX}/unsafe_step.yaml", "--policy", "reproduce")[0] == 0
    assert run(f"{FIX}/unsafe_step.yaml", "--policy", "policies/reproduce.yaml")[0] == 0


def test_bad_policy_exit_2(tmp_path: Path) -> None:
    code, _, err = run(f"{FIX}/safe.yaml", "--policy", "nope")
    assert code == 2
    assert "no policy 'nope'" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmode: shadow\nceilngs: {}\n")
    code, _, err = run(f"{FIX}/safe.yaml", "--policy", str(bad))
    assert code == 2
    assert f"{bad}:3: ceilngs: unknown key 'ceilngs' (did you mean 'ceilings'?)" in err


def test_json_output() -> None:
    code, out, _ = run(f"{FIX}/agent_unsafe.yaml", f"{FIX}/safe.yaml", "--json")
    assert code == 3
    data = json.loads(out)
    assert data["exit_code"] == 3
    assert data["eligible"] is False
    problem = data["workflows"][0]["problems"][0]
    assert (problem["step"], problem["tool"], problem["effect"], problem["rule"]) == (
        "answer",
        "email.send",
        "unsafe",
        "deny effect unsafe",
    )
    assert data["workflows"][1]["eligible"] is True
    code, out, _ = run(f"{FIX}/safe.yaml", "--json", "--policy", "nope")
    assert code == 2
    assert json.loads(out)["exit_code"] == 2


def test_a_folder_means_its_yaml_files(tmp_path: Path) -> None:
    # hd_model.py too: safe.yaml's model function lives there (the check used to find it only
    # when an earlier test had imported it on the host)
    for name in ("safe.yaml", "unsafe_step.yaml", "hd_tools.py", "hd_model.py"):
        (tmp_path / name).write_text((ROOT / FIX / name).read_text())
    code, out, _ = run(str(tmp_path))
    assert code == 3
    assert len(out.splitlines()) == 2
    assert f'{tmp_path}/unsafe_step.yaml: step "close"' in out


def test_missing_file_exit_2() -> None:
    code, out, _ = run(f"{FIX}/absent.yaml")
    assert code == 2
    assert "cannot read workflow" in out


def test_console_script_end_to_end() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner", "check", f"{FIX}/unsafe_step.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert 'step "close": tool "ticket.close" is unsafe' in done.stdout
    assert "Traceback" not in done.stderr


def test_a_tool_id_typo_says_which_id_was_meant() -> None:
    code, out, _ = run(f"{FIX}/typo_tool.yaml")
    assert code == 3  # still ineligible (SPEC.md): only the hint is new
    assert 'tool "ticket.gte" does not resolve' in out and "did you mean ticket.get?" in out


def test_input_errors_do_not_blame_the_policy(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsteps: [\n")
    code, _, err = run(str(broken), str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "2 input errors" in err and "shadow.yaml" not in err, err
    code, _, err = run(str(broken), f"{FIX}/unsafe_step.yaml")
    assert code == 2
    assert "1 input error" in err and "1 tool problem under the policy" in err


def test_an_existing_file_is_a_policy_path_whatever_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a"}\n{"task_id": "b"}\n')
    workflow = ROOT / FIX / "safe.yaml"
    monkeypatch.chdir(tmp_path)
    code, _, err = run(str(workflow), "--policy", "tasks.jsonl")
    assert code == 2
    assert "tasks.jsonl:2:" in err and "policy name" not in err, err


def test_a_workflow_given_as_the_policy_is_named_as_such_in_our_words() -> None:
    code, _, err = run(f"{FIX}/safe.yaml", "--policy", f"{FIX}/safe.yaml")
    assert code == 2
    assert f"{FIX}/safe.yaml:9: --policy: this is a workflow file" in err, err


def test_a_wrong_value_kind_is_said_in_yaml_terms(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\nmode: shadow\ntools: [a]\nlimits: {timeout_s: abc}\n")
    code, _, err = run(f"{FIX}/safe.yaml", "--policy", str(bad))
    assert code == 2
    assert f"{bad}:3: tools: expected a mapping (key: value lines), got a list" in err, err
    assert f"{bad}:4: limits.timeout_s: expected a number, got text 'abc'" in err, err
    assert "Input should be" not in err and "ToolOverrides" not in err


def test_the_text_form_lists_an_mcp_tool_as_the_json_form_does(tmp_path: Path) -> None:
    """A new user saw an MCP tool in ``--json`` only: the text form now names it, its class
    and the annotations that decided it (a saved ``tools/list``: no engine needed)."""
    listed = {"tools": [{"name": "search_docs", "annotations": {"readOnlyHint": True}}]}
    (tmp_path / "docs-tools.json").write_text(json.dumps(listed), encoding="utf-8")
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        "name: m\nversion: '1'\ntools:\n  - mcp: {tools_list: docs-tools.json, prefix: docs}\n"
        "steps:\n  - id: s\n    tool: docs.search_docs\n",
        encoding="utf-8",
    )
    code, out, _ = run(str(workflow))
    assert code == 0, out
    assert out.splitlines()[1] == (
        '  tool "docs.search_docs" of mcp tools_list docs-tools.json: read '
        "(MCP annotations: readOnlyHint: true) (recorded)"
    )
