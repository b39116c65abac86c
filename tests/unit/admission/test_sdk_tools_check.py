"""``check`` and the agent SDKs' own tools (issue 27): listed with their effect classes, read
from source (nothing of the workflow imported on the host), a ``@tool`` declaration stacked
with the SDK's decorator in either order, the policy's ``map:`` for the undeclared ones, and
an SDK tool a program defines for its model that its step does not declare refused, named.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.admission.eligibility import check_eligibility
from tests.support.paths import REPO

FIX = REPO / "tests" / "fixtures" / "frameworks"


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(REPO)
    yield


def _rel(name: str) -> str:
    return str((FIX / name).relative_to(REPO))


def test_check_lists_the_sdk_tools_with_their_effect_classes_without_importing() -> None:
    before = set(sys.modules)
    report = check_eligibility([_rel("sdk_tools_v1.yaml")], _rel("sdk_map_policy.yaml"))
    assert not ({"sdk_tools_agent", "langchain_core", "anthropic"} & (set(sys.modules) - before))
    assert report.eligible, report.lines()
    assert report.lines()[1:] == [
        '  openai-agents tool "search_kb" as kb.search: read (recorded)',
        '  openai-agents tool "other" as kb.other: read (recorded)',
        f'  openai-agents tool "bare": pure (policy map "bare" in {_rel("sdk_map_policy.yaml")})'
        " (execute)",
        '  anthropic tool "get_weather": read (policy map "get_*" in '
        f"{_rel('sdk_map_policy.yaml')}) (recorded)",
    ]
    tools = report.to_json()["workflows"][0]["tools"]
    assert tools[0]["framework"] == "openai-agents" and tools[0]["sdk_name"] == "search_kb"


def test_without_a_map_an_undeclared_sdk_tool_is_unsafe_and_named() -> None:
    """Was: the stacked declarations were 'unsafe ... other decorators', the bare SDK tools
    did not resolve ('eligible: 0 tool(s)' for a step declaring none)."""
    report = check_eligibility([_rel("sdk_tools_v1.yaml")], "shadow")
    assert report.exit_code == 3
    denied = {p.tool: p.message for p in report.problems}
    assert set(denied) == {"bare", "get_weather"}  # kb.search, kb.other: read
    assert "an undeclared anthropic tool" in denied["get_weather"]


def test_an_sdk_tool_the_program_defines_and_its_step_does_not_declare_is_refused(
    tmp_path: Path,
) -> None:
    shutil.copy(FIX / "sdk_tools_agent.py", tmp_path / "sdk_tools_agent.py")
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        "name: w\nversion: '1'\ntools: [sdk_tools_agent]\nsteps:\n  - id: agent\n"
        "    program: sdk_tools_agent:run\n    tools: [kb.search, kb.other]\n"
    )
    report = check_eligibility([str(workflow)], "shadow")
    assert report.exit_code == 3
    named = sorted(p.tool or "" for p in report.problems if p.kind == "undeclared")
    assert named == ["bare", "get_weather"]
    assert all("sdk_tools_agent.py:" in p.message for p in report.problems)


def test_a_langchain_tool_is_listed_and_agrees_with_the_sandboxs_description(
    tmp_path: Path,
) -> None:
    """langchain-core is not in the SDK image: the sandbox's view is the runtime's, run here."""
    pytest.importorskip("langchain_core")
    from runner.admission.describe import sandbox_registry
    from runner.backends.unsandboxed import UnsandboxedProcessBackend
    from runner.policy import load_policy
    from runner.settings import Settings
    from tests.support.toolviews import assert_agree

    project = tmp_path / "p"  # the state folder outside the project (its snapshot)
    project.mkdir()
    shutil.copy(FIX / "sdk_tools_langchain.py", project / "sdk_tools_langchain.py")
    workflow = project / "wf.yaml"
    workflow.write_text(
        "name: w\nversion: '1'\ntools: [sdk_tools_langchain]\nsteps:\n  - id: agent\n"
        "    program: sdk_tools_langchain:run\n    tools: [lookup_term]\n"
    )
    report = check_eligibility([str(workflow)], _rel("sdk_map_policy.yaml"))
    assert report.lines()[1] == (
        '  langchain tool "lookup_term": read (policy map "lookup_term" in '
        f"{_rel('sdk_map_policy.yaml')}) (recorded)"
    )

    def describe(loaded: Any) -> Any:
        return sandbox_registry(
            loaded,
            backend=UnsandboxedProcessBackend(),
            settings=Settings(state_dir=tmp_path / "state"),
            image="img",
            policy=load_policy("shadow"),
        )

    assert assert_agree(workflow, describe) == 1
