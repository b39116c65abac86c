"""Shared pieces of the attack tests test_attacks_channel.py, _runtime.py and _sandbox.py.

The hostile tool module is tests/fixtures/attacks/hostile_tools.py, written into a fresh project
folder (with a scripted model and a `.env` holding a fake key) that the sandbox mounts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration._backends import backend, backend_entry
from tests.integration._episodes import Outcome, Project

__all__ = ["backend", "backend_entry", "project", "run_steps", "stderr_of"]  # one param per backend

TOOLS = (Path(__file__).parents[1] / "fixtures" / "attacks" / "hostile_tools.py").read_text()

MODEL = """
import json

def respond(request):
    text = json.dumps(request.get("messages"))
    return {"id": "r", "model": "attack-model-1", "usage": {"prompt_tokens": 1,
            "completion_tokens": 1, "total_tokens": 2},
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                  "content": "HOST-SERVED " + text}}]}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = Project(tmp_path_factory.mktemp("attacks_more") / "proj", TOOLS)
    (project.root / "attack_model.py").write_text(MODEL)
    (project.root / "attack_model.py").chmod(0o644)
    (project.root / ".env").write_text("OPENAI_API_KEY=sk-project-secret-123\n")
    (project.root / ".env").chmod(0o644)
    return project


def run_steps(
    project: Project,
    backend: Any,
    image: str,
    tmp_path: Path,
    steps: str,
    model: str | None = None,
    **kw: Any,
) -> Outcome:
    workflow = project.workflow(steps, model=model)
    return project.run(backend, image, workflow, state_dir=tmp_path / "state", **kw)


def stderr_of(out: Outcome) -> str:
    return "\n".join(out.end.get("stderr_tail") or [])
