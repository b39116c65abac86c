"""The static reading (``check``) and the runtime's description agree on every example and fixture.

The runtime's ``manifest`` mode runs here as a local process (these modules are trusted
fixtures); tests/integration/test_static_agreement_docker.py asks real sandboxes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.admission.describe import sandbox_registry
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.domain.registry import Registry
from runner.policy import load_policy
from runner.settings import Settings
from tests.support.toolviews import (
    LONE_MODULES,
    ROOT,
    assert_agree,
    example_and_fixture_workflows,
    lone_module_workflow,
)


def _describer(tmp_path: Path) -> Any:
    def describe(workflow: Any) -> Registry:
        return sandbox_registry(
            workflow,
            backend=UnsandboxedProcessBackend(),
            settings=Settings(state_dir=tmp_path / "state"),
            image="img",
            policy=load_policy("shadow"),
        )

    return describe


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    # an example's MCP server (examples/mcp-docs) is started with `python3`: this
    # interpreter's, which has the `mcp` package (the host's may not)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize(
    "workflow", example_and_fixture_workflows(), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_example_and_fixture_workflow(tmp_path: Path, workflow: Path) -> None:
    assert_agree(workflow, _describer(tmp_path))


@pytest.mark.parametrize("module", LONE_MODULES, ids=lambda p: p.name)
def test_every_fixture_tool_module(tmp_path: Path, module: Path) -> None:
    compared = assert_agree(lone_module_workflow(module, tmp_path / "p"), _describer(tmp_path))
    assert compared > 0 or module.name == "loopback.py"


def test_the_set_is_not_empty() -> None:
    workflows = example_and_fixture_workflows()
    assert len(workflows) >= 25 and any("examples/helpdesk" in str(p) for p in workflows)
