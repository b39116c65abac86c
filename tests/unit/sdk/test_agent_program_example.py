"""examples/agent-program: its production recording works end to end on this host, no Docker.

record_production.py runs the support agent (the ``openai`` SDK, unchanged) inside
``runner.sdk.record`` against the example's scripted model on a loopback port; the traces it
writes are complete for lint, and ``tasks extract`` turns them into tasks whose observations
are what the example's own tasks file holds; the workflow files declare program steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.domain.tasks import load_tasks
from runner.tracetools.lint import lint_trace
from runner.tracetools.tasks_extract import extract_tasks
from tests.support.paths import REPO

EXAMPLE = REPO / "examples" / "agent-program"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for name in ("record_production", "support_agent", "support_agent_v2", "agentloop"):
        sys.modules.pop(name, None)
    import record_production

    return record_production


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("version", ["1", "2"])
def test_recorded_production_runs_become_the_example_tasks(
    tmp_path: Path, example: Any, version: str
) -> None:
    import support_model

    written = [Path(p) for p in example.record_all(version, str(tmp_path / "traces"))]
    assert [p.name for p in written] == [f"prod-v{version}-T-100{i}.jsonl" for i in (1, 2, 3)]
    for path in written:
        lines = _lines(path)
        models = [line for line in lines if line.get("tool") == "model"]
        assert models and all(m["api"] == "chat_completions" for m in models)
        for model in models:  # the raw body is what the scripted endpoint sent for the request
            body = support_model.respond(model["request"], api="chat_completions")
            assert model["body"] == body and model["model"] == support_model.MODEL_ID
        assert lines[0]["workflow"]["version"] == version
        assert lint_trace(path).complete
    done = extract_tasks(written, tmp_path / "recorded.jsonl")
    recorded = load_tasks(tmp_path / "recorded.jsonl").tasks
    shipped = load_tasks(EXAMPLE / "tasks.jsonl").tasks
    assert len(done.tasks) == 3 and set(recorded) == set(shipped)
    for task_id, task in recorded.items():
        ours = {
            (o["tool"], json.dumps(o["args"], sort_keys=True)): o["body"]
            for o in shipped[task_id].observations
        }
        for observation in task.observations:
            key = (observation["tool"], json.dumps(observation["args"], sort_keys=True))
            assert ours[key] == observation["body"]  # the shipped tasks hold what production read
        assert task.input == shipped[task_id].input
    answers = [line for path in written for line in _lines(path)[-1:]]
    if version == "2":
        assert all(a["output"].startswith("Hi ") for a in answers)
    else:
        assert not any(a["output"].startswith("Hi ") for a in answers)


def test_the_example_workflows_declare_program_steps() -> None:
    from runner.domain import workflow as workflow_module

    for name, tools in (
        ("v1.yaml", ["kb.search"]),
        ("v2.yaml", ["ticket.get", "kb.search", "reply.format"]),
    ):
        spec = workflow_module.load_workflow(EXAMPLE / name).spec
        (step,) = spec.steps
        assert step.program is not None and step.tool_ids() == tools
