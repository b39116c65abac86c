"""A run sees only the declared tool code, copied into the command's tool snapshot: not the
state folder (ledger, other runs' traces) when it lies inside a tool folder, as it does when a
project keeps `.sandbox-replay/` beside its tool modules; nor the dot entries beside the tool
code (`.env`, `.git`) or inside a tool package, a virtual environment in it, or a link out of
it."""

from __future__ import annotations

import os
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
    here = Path(__file__).resolve().parent
    state = here / ".sandbox-replay"
    return {"exists": state.exists(), "folder": sorted(os.listdir(here))}
"""

PEEK_STEPS = """
- id: peek
  tool: state.peek
  args: {}
"""


def test_state_folder_inside_a_tool_root_is_not_in_the_sandbox(
    sandbox_image: str, tmp_path: Path
) -> None:
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
    assert out.body("peek") == {"exists": False, "folder": ["peek_tools.py"]}


DOT_TOOLS = """
import os
from pathlib import Path

from runner.sdk import Effect, tool

HERE = Path(__file__).resolve().parent

@tool("dots.peek", effect=Effect.PURE)
def peek() -> dict:
    out = {"module_dir": sorted(os.listdir(HERE)), "package": sorted(os.listdir(HERE / "pkg"))}
    for name in (".env", ".git/config", "pkg/.env", "pkg/venv/pyvenv.cfg", "pkg/link.txt"):
        try:
            out[name] = (HERE / name).read_text()
        except OSError as exc:
            out[name] = "blocked: %s" % type(exc).__name__
    return out
"""


def test_dot_entries_venvs_and_links_out_are_not_in_the_sandbox(
    sandbox_image: str, tmp_path: Path
) -> None:
    from runner.backends.docker import DockerBackend

    project = Project(tmp_path / "proj", DOT_TOOLS, module="dot_tools")
    (project.root / ".env").write_text("OPENAI_API_KEY=sk-project-secret-123\n")
    git = project.root / ".git"
    git.mkdir()
    (git / "config").write_text("[remote]\n  url = https://token@example.invalid/x.git\n")
    package = project.root / "pkg"
    (package / "venv").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data.json").write_text("{}\n")
    (package / ".env").write_text("NESTED=sk-nested-secret\n")
    (package / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("host-only-secret\n")
    (package / "link.txt").symlink_to(outside)
    os.chmod(project.root, 0o755)
    steps = "- id: peek\n  tool: dots.peek\n  args: {}\n"
    text = project.workflow(steps).read_text().replace("[dot_tools]", "[dot_tools, pkg]")
    (project.root / "wf-pkg.yaml").write_text(text)
    backend = DockerBackend.connect()
    try:
        out = project.run(
            backend, sandbox_image, project.root / "wf-pkg.yaml", state_dir=tmp_path / "state"
        )
    finally:
        backend.close()
    assert out.result.status == "succeeded", out.end  # the tool modules still import
    body = out.body("peek")
    assert body["module_dir"] == ["dot_tools.py", "pkg"]  # no .env, .git, workflows
    assert body["package"] == ["__init__.py", "data.json"]  # no .env, venv, link out
    for name in (".env", ".git/config", "pkg/.env", "pkg/venv/pyvenv.cfg", "pkg/link.txt"):
        assert body[name] == "blocked: FileNotFoundError", (name, body[name])
    trace = out.result.trace_path.read_text()
    assert "sk-project-secret" not in trace and "host-only-secret" not in trace
