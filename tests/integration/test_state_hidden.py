"""A run cannot read the state folder (ledger, other runs' traces) when it lies inside a tool
folder, as it does when a project keeps `.sandbox-replay/` beside its tool modules; nor the
other dot entries beside the tool code (`.env`, `.git`)."""

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


DOT_TOOLS = """
import os
from pathlib import Path

from runner.sdk import Effect, tool

HERE = Path(__file__).resolve().parent

@tool("dots.peek", effect=Effect.PURE)
def peek() -> dict:
    out = {"module_dir": sorted(p for p in os.listdir(HERE) if not p.startswith("wf"))}
    for name in (".env", ".git/config", ".git/HEAD"):
        try:
            out[name] = (HERE / name).read_text()
        except OSError as exc:
            out[name] = "blocked: %s" % type(exc).__name__
    out[".git"] = sorted(os.listdir(HERE / ".git")) if (HERE / ".git").is_dir() else None
    return out
"""


def test_dot_entries_beside_the_tool_code_are_empty(sandbox_image: str, tmp_path: Path) -> None:
    from runner.backends.docker import DockerBackend

    project = Project(tmp_path / "proj", DOT_TOOLS, module="dot_tools")
    (project.root / ".env").write_text("OPENAI_API_KEY=sk-project-secret-123\n")
    (project.root / ".env").chmod(0o644)
    git = project.root / ".git"
    git.mkdir(mode=0o755)
    (git / "config").write_text("[remote]\n  url = https://token@example.invalid/x.git\n")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    for path in (git / "config", git / "HEAD"):
        path.chmod(0o644)
    steps = "- id: peek\n  tool: dots.peek\n  args: {}\n"
    backend = DockerBackend.connect()
    try:
        out = project.run(
            backend, sandbox_image, project.workflow(steps), state_dir=tmp_path / "state"
        )
    finally:
        backend.close()
    assert out.result.status == "succeeded", out.end  # the tool module still imports
    body = out.body("peek")
    assert body[".env"] == ""  # an empty file over the secrets
    assert body[".git"] == []  # an empty folder over the repository
    assert body[".git/config"].startswith("blocked") and body[".git/HEAD"].startswith("blocked")
    assert body["module_dir"] == [".env", ".git", "dot_tools.py"]
    assert "sk-project-secret" not in out.result.trace_path.read_text()
