"""Only the sandbox-side packages of `runner` are mounted into a sandbox (issue 11).

The CLI, the ledger, the episode driver and the rest of the host side stay on the host: a real
container's mounts (``docker inspect``, read right after start) show, of ``runner``, only
``runner/__init__.py`` and the packages of `runner.runtime.protocol.SANDBOX_PACKAGES`, each
read-only from the installed package; and inside the sandbox the host packages are not there
to import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner import resources
from runner.runtime.protocol import RUNTIME_ROOT, SANDBOX_PACKAGES
from tests.integration._episodes import Project

pytestmark = pytest.mark.docker

LOOK_TOOLS = """
import importlib.util
import os

from runner.sdk import Effect, tool

@tool("runner.look", effect=Effect.PURE)
def look() -> dict:
    root = "/opt/sandbox-replay/runner"
    host = ["runner.cli", "runner.ledger", "runner.episode", "runner.settings", "runner.domain"]
    return {
        "entries": sorted(e for e in os.listdir(root) if e != "__pycache__"),
        "importable": [m for m in host if importlib.util.find_spec(m) is not None],
    }
"""

LOOK_STEPS = """
- id: look
  tool: runner.look
  args: {}
"""


def test_a_container_mounts_only_the_sandbox_side_packages(
    sandbox_image: str, tmp_path: Path
) -> None:
    from runner.backends.docker import DockerBackend

    project = Project(tmp_path / "proj", LOOK_TOOLS, module="look_tools")
    backend = DockerBackend.connect()
    inspected: list[dict[str, Any]] = []
    start = backend.api.start

    def start_and_inspect(container: str, *args: Any, **kwargs: Any) -> Any:
        result = start(container, *args, **kwargs)
        inspected.append(backend.api.inspect_container(container))
        return result

    backend.api.start = start_and_inspect  # type: ignore[method-assign]
    try:
        out = project.run(
            backend, sandbox_image, project.workflow(LOOK_STEPS), state_dir=tmp_path / "state"
        )
    finally:
        backend.close()
    assert out.result.status == "succeeded", out.end
    assert len(inspected) == 1
    target = f"{RUNTIME_ROOT}/runner"
    of_runner = {
        m["Destination"]: m
        for m in inspected[0]["Mounts"]
        if m["Destination"] == target or m["Destination"].startswith(target + "/")
    }
    expected = {f"{target}/__init__.py": resources.package_dir() / "__init__.py"}
    expected |= {f"{target}/{name}": resources.package_dir() / name for name in SANDBOX_PACKAGES}
    assert sorted(of_runner) == sorted(expected)
    for destination, mount in of_runner.items():
        assert Path(mount["Source"]) == expected[destination]
        assert mount["RW"] is False
    assert out.body("look") == {
        "entries": sorted(["__init__.py", *SANDBOX_PACKAGES]),
        "importable": [],
    }
