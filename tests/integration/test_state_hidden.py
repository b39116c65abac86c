"""A run cannot read the state folder (ledger, other runs' traces) when it lies inside a tool
folder, as it does when a project keeps `.sandbox-replay/` beside its tool modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration._episodes import Project

pytestmark = pytest.mark.docker

PEEK_TOOLS = """
import os
from pathlib import Path

from runner.sdk import Effect, tool

@tool("state.peek", effect=Effect.PURE)
def peek() -> dict:
    state = Path(__file__).resolve().parent / ".sandbox-replay"
    entries = sorted(os.listdir(state)) if state.is_dir() else []
    return {"exists": state.is_dir(), "entries": entries}
"""

PEEK_STEPS = """
- id: peek
  tool: state.peek
  args: {}
"""


def test_state_folder_inside_a_tool_root_is_hidden(sandbox_image: str, tmp_path: Path) -> None:
    from runner.backends.docker import DockerBackend

    project = Project(tmp_path / "proj", PEEK_TOOLS, module="peek_tools")
    state = project.root / ".sandbox-replay"
    (state / "traces").mkdir(parents=True)
    (state / "traces" / "other-run.jsonl").write_text('{"secret": 1}\n')
    backend = DockerBackend.connect()
    try:
        out = project.run(backend, sandbox_image, project.workflow(PEEK_STEPS), state_dir=state)
    finally:
        backend.close()
    assert out.result.status == "succeeded", out.end
    assert out.body("peek") == {"exists": True, "entries": []}
