"""``check``'s static reading and the sandbox's description agree on every example and fixture.

The description here is the real one ``submit`` and ``run`` use: `sandbox_registry` in the
hardened container of the sandbox image. Descriptions are kept by snapshot (as those commands
keep them), so workflows over the same modules share one sandbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.admission.describe import sandbox_registry
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

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def describe(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from runner.backends.docker import DockerBackend

    backend = DockerBackend.connect()
    settings = Settings(state_dir=tmp_path_factory.mktemp("state"))

    def run(workflow: Any, image: str | None = None) -> Registry:
        return sandbox_registry(
            workflow,
            backend=backend,
            settings=settings,
            image=image or sandbox_image,
            policy=load_policy("shadow"),
            cache=True,
        )

    yield run
    backend.close()


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(
    "workflow", example_and_fixture_workflows(), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_example_and_fixture_workflow(
    describe: Any, workflow: Path, request: pytest.FixtureRequest
) -> None:
    parts = workflow.relative_to(ROOT).parts
    # tool modules over the agent SDKs (pydantic), an MCP server on the `mcp` package: the
    # SDK image has them
    if "frameworks" in parts or "mcp-docs" in parts:
        image = str(request.getfixturevalue("sdk_image"))
        assert_agree(workflow, lambda wf: describe(wf, image))
        return
    assert_agree(workflow, describe)


@pytest.mark.parametrize("module", LONE_MODULES, ids=lambda p: p.name)
def test_every_fixture_tool_module(describe: Any, module: Path, tmp_path: Path) -> None:
    compared = assert_agree(lone_module_workflow(module, tmp_path / "p"), describe)
    assert compared > 0 or module.name == "loopback.py"
