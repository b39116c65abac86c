"""``check --junit FILE`` and the conditional tools ``check`` shows for argument rules."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

FIX = "tests/fixtures/helpdesk"
RULES = """name: cond
mode: shadow
rules:
  - name: no-secret-search
    tool: kb.search
    action: deny
    when: {query: {matches: "(?i)password"}}
  - name: unrelated
    tool: shell.*
    action: deny
"""


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def _check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["check", *args])
    return result.exit_code, result.stdout


def test_junit_one_case_per_workflow_pass_fail_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nversion: 1\nsteps: [\n", encoding="utf-8")
    out = tmp_path / "reports" / "check.xml"
    code, _ = _check(
        f"{FIX}/safe.yaml", f"{FIX}/unsafe_step.yaml", str(broken), "--junit", str(out)
    )
    assert code == 2  # invalid input wins over ineligible
    suite = ElementTree.parse(out).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    safe, unsafe, bad = (
        cases[f"{FIX}/safe.yaml"],
        cases[f"{FIX}/unsafe_step.yaml"],
        cases[str(broken)],
    )
    assert safe.find("failure") is None and safe.find("error") is None
    failure = unsafe.find("failure")
    assert failure is not None and 'tool "ticket.close" is unsafe' in str(failure.get("message"))
    error = bad.find("error")
    assert error is not None and error.get("type") == "invalid_input"
    assert {case.get("classname") for case in cases.values()} == {"check"}


def test_a_tool_an_argument_rule_targets_is_shown_conditional(tmp_path: Path) -> None:
    policy = tmp_path / "cond.yaml"
    policy.write_text(RULES, encoding="utf-8")
    code, out = _check(f"{FIX}/safe.yaml", "--policy", str(policy))
    assert code == 0  # still eligible: the rules decide calls, not tools
    lines = out.splitlines()
    assert lines[0].startswith(f"{FIX}/safe.yaml: eligible")
    assert lines[1:] == [
        '  conditional: tool "kb.search": argument rule "no-secret-search" '
        f"(deny kb.search when query matches '(?i)password'), decided at each call by {policy}"
    ]
    code, out = _check(f"{FIX}/safe.yaml", "--policy", str(policy), "--json")
    tools = {t["id"]: t for t in json.loads(out)["workflows"][0]["tools"]}
    assert [r["name"] for r in tools["kb.search"]["conditional"]] == ["no-secret-search"]
    assert tools["ticket.get"]["conditional"] == []


def test_junit_text_from_hostile_names_still_parses(tmp_path: Path) -> None:
    weird = tmp_path / "w\x1b[2J\x07.yaml"
    weird.write_text("name: x\n", encoding="utf-8")
    out = tmp_path / "check.xml"
    code, _ = _check(str(weird), "--junit", str(out))
    assert code == 2
    case = next(ElementTree.parse(out).getroot().iter("testcase"))
    assert "\\x1b[2J" in str(case.get("name"))


def test_a_policy_that_does_not_load_is_one_error_case(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmode: shadow\nrules: [{name: r}]\n", encoding="utf-8")
    out = tmp_path / "check.xml"
    code, _ = _check(f"{FIX}/safe.yaml", "--policy", str(bad), "--junit", str(out))
    assert code == 2
    (case,) = ElementTree.parse(out).getroot().iter("testcase")
    error = case.find("error")
    assert error is not None and error.get("type") == "InputError"
    assert "bad.yaml" in str(error.get("message"))
