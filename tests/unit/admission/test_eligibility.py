"""The load-time eligibility check: every problem collected, named; no sandbox is ever created."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from runner.admission.eligibility import check_eligibility
from runner.admission.gate import admit
from runner.backends.base import Backend, Reaped, Sandbox, SandboxSpec
from runner.errors import IneligibleError, InputError
from runner.policy import load_policy
from tests.support.paths import REPO

ROOT = REPO
FIXTURES = ROOT / "tests" / "fixtures" / "helpdesk"
SHADOW = "policies/shadow.yaml"


def fixture(name: str) -> str:
    return str((FIXTURES / name).relative_to(ROOT))


class SpyBackend(Backend):
    """Records every call; creating a sandbox is a test failure by itself."""

    name = "spy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        self.calls.append(f"sandbox {spec.run_id}")
        raise AssertionError("a sandbox was created during the load-time check")

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        self.calls.append("reap")
        return []


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(ROOT)  # paths in messages are shown as given, policies relative to here
    yield


def test_safe_workflow_is_eligible() -> None:
    report = check_eligibility([fixture("safe.yaml")], "shadow")
    assert report.eligible
    assert report.exit_code == 0
    assert report.problems == []
    check = report.workflows[0]
    assert check.registry is not None and check.registry.policy is report.policy
    assert report.lines() == [
        f"{fixture('safe.yaml')}: eligible: 4 steps, 4 tools (2 execute, 2 recorded)"
    ]


def test_unsafe_step_is_rejected_naming_step_tool_effect_and_rule() -> None:
    report = check_eligibility([fixture("unsafe_step.yaml")], load_policy("shadow"))
    assert not report.eligible
    assert report.exit_code == 3
    [problem] = report.problems
    assert problem.message == (
        f'{fixture("unsafe_step.yaml")}: step "close": tool "ticket.close" is unsafe: '
        f"denied by {SHADOW} (deny effect unsafe)"
    )
    assert (problem.kind, problem.step, problem.tool, problem.effect, problem.rule) == (
        "denied",
        "close",
        "ticket.close",
        "unsafe",
        "deny effect unsafe",
    )
    assert (problem.line, problem.field) == (10, "steps.1.tool")


def test_agent_toolset_with_one_unsafe_tool_is_rejected_naming_it() -> None:
    report = check_eligibility([fixture("agent_unsafe.yaml")], "shadow")
    assert report.exit_code == 3
    assert [p.message for p in report.problems] == [
        f'{fixture("agent_unsafe.yaml")}: step "answer" (agent toolset): tool "email.send" is '
        f"unsafe: denied by {SHADOW} (deny effect unsafe)"
    ]
    assert report.problems[0].line == 9


def test_unknown_tool_is_unresolvable_fail_closed() -> None:
    report = check_eligibility([fixture("unknown_tool.yaml")], "shadow")
    assert report.exit_code == 3
    [problem] = report.problems
    assert problem.kind == "unresolvable"
    assert 'tool "ticket.fetch" does not resolve' in problem.message
    # also under reproduce, which denies nothing by class
    assert check_eligibility([fixture("unknown_tool.yaml")], "reproduce").exit_code == 3


def test_undeclared_effect_is_reported_as_unsafe() -> None:
    [problem] = check_eligibility([fixture("undeclared.yaml")], "shadow").problems
    assert 'tool "legacy.purge" is unsafe (no effect class declared): denied by' in problem.message


def test_yaml_typo_is_invalid_input_naming_key_and_line() -> None:
    report = check_eligibility([fixture("typo_key.yaml")], "shadow")
    assert report.exit_code == 2
    [problem] = report.problems
    assert problem.kind == "invalid"
    assert problem.message.startswith(f"{fixture('typo_key.yaml')}:7: steps[0].agrs: ")
    assert "unknown key 'agrs'" in problem.message


def test_unimportable_module_is_invalid_input() -> None:
    report = check_eligibility([fixture("missing_module.yaml")], "shadow")
    assert report.exit_code == 2
    assert "no_such_tools_module" in report.problems[0].message
    assert report.problems[0].line == 5


def test_every_problem_of_every_workflow_is_reported_and_the_worst_code_wins() -> None:
    paths = [
        fixture(n)
        for n in ("safe.yaml", "many_problems.yaml", "agent_unsafe.yaml", "typo_key.yaml")
    ]
    report = check_eligibility(paths, "shadow")
    assert [c.exit_code for c in report.workflows] == [0, 3, 3, 2]
    assert report.exit_code == 2  # SPEC.md: 2 is worse than 3
    many = report.workflows[1].problems
    assert [(p.step, p.tool, p.kind) for p in many] == [
        ("close", "ticket.close", "denied"),
        ("mail", "email.send", "denied"),
        ("mail", "nope.nothing", "unresolvable"),
    ]
    assert len(report.problems) == 5  # 0 + 3 + 1 + 1
    without_typo = check_eligibility(paths[:3], "shadow")
    assert without_typo.exit_code == 3


def test_reproduce_policy_makes_unsafe_tools_eligible_as_recordings() -> None:
    report = check_eligibility([fixture("unsafe_step.yaml")], "reproduce")
    assert report.eligible
    registry = report.workflows[0].registry
    assert registry is not None
    assert registry.resolve("ticket.close").disposition == "recorded"


def test_json_report() -> None:
    data = check_eligibility(
        [fixture("unsafe_step.yaml"), fixture("safe.yaml")], "shadow"
    ).to_json()
    assert data["policy"]["name"] == "shadow"
    assert data["policy"]["source"] == SHADOW
    assert data["exit_code"] == 3
    first, second = data["workflows"]
    assert first["problems"][0]["tool"] == "ticket.close"
    assert "error" not in first["problems"][0]
    assert second["eligible"] is True
    assert {t["id"]: t["disposition"] for t in second["tools"]}["notes.append"] == "execute"


def test_admit_rejects_before_any_sandbox_exists() -> None:
    spy = SpyBackend()
    with pytest.raises(IneligibleError) as info:
        admit([fixture("safe.yaml"), fixture("unsafe_step.yaml")], "shadow", spy)
    assert spy.calls == []
    assert info.value.exit_code == 3
    assert 'tool "ticket.close" is unsafe' in str(info.value)
    assert info.value.problems == [
        f'{fixture("unsafe_step.yaml")}: step "close": tool "ticket.close" is unsafe: '
        f"denied by {SHADOW} (deny effect unsafe)"
    ]
    with pytest.raises(InputError):
        admit([fixture("typo_key.yaml"), fixture("unsafe_step.yaml")], "shadow", spy)
    assert spy.calls == []


def test_admit_hands_out_the_backend_only_after_the_gate() -> None:
    spy = SpyBackend()
    admission = admit([fixture("safe.yaml")], "shadow", spy)
    assert admission.backend is spy
    assert spy.calls == []  # admitting creates nothing either
    workflow, registry = admission.workflow(fixture("safe.yaml"))
    assert workflow.spec.name == "helpdesk"
    assert "ticket.close" not in registry


def test_load_path_imports_no_backend_and_no_docker() -> None:
    code = (
        "import sys\n"
        "import runner.admission.eligibility, runner.cli.commands.check\n"
        "bad = [m for m in sys.modules if m == 'docker' or m.startswith('docker.')"
        " or m.startswith('runner.backends')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_bad_policy_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no policy 'nonexistent'"):
        check_eligibility([fixture("safe.yaml")], "nonexistent")
