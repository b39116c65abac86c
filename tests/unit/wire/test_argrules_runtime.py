"""The runtime's call-time guard: a call an argument rule of the manifest denies never runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.errors import CapabilityDenied
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.program import ProgramStep
from runner.wire.argrules import RuleSet
from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
sys.path.insert(0, str(TESTS / "fixtures" / "program"))
import program_tools
from fakehost import Result, completion, manifest_for, run_runtime, scripted, write_run_dir

NO_SECRET = {
    "name": "no-secret-notes",
    "tool": "notes.*",
    "action": "deny",
    "when": {"name": {"matches": "^secret"}},
}
MODEL = {"provider": "scripted", "function": "m:respond", "settings": {"temperature": 0}}


def _run(tmp_path: Path, steps: list[dict[str, Any]], model: Any = None) -> Result:
    workflow = {"name": "w", "version": "1", "model": MODEL if model else None, "steps": steps}
    task = {"task_id": "t1", "input": {}, "observations": []}
    manifest = manifest_for({"notes.write": "execute", "math.add": "execute"})
    manifest["policy"]["rules"] = [NO_SECRET]
    run_dir = write_run_dir(tmp_path / "run", workflow, task, manifest)
    result = run_runtime(run_dir, tmp_path, model=model)
    assert result.returncode == 0, result.stderr
    return result


def test_a_tool_step_whose_call_a_rule_denies_ends_denied_and_names_the_rule(
    tmp_path: Path,
) -> None:
    steps = [
        {"id": "ok", "tool": "notes.write", "args": {"name": "public", "text": "a"}},
        {"id": "bad", "tool": "notes.write", "args": {"name": "secret-1", "text": "b"}},
        {"id": "after", "tool": "math.add", "args": {"a": 1, "b": 2}},
    ]
    result = _run(tmp_path, steps)
    assert (tmp_path / "note-public").exists()
    assert not (tmp_path / "note-secret-1").exists(), "a denied call executed"
    episode = result.episode
    assert episode["status"] == "denied"
    assert episode["not_run"] == ["after"]
    assert episode["failure"] == {
        "call_index": 1,
        "tool": "notes.write",
        "error_class": "runner.errors.CapabilityDenied",
    }
    assert "no-secret-notes" in episode["error"]["message"]
    denied = result.calls[1]
    assert denied["error"]["class"] == "runner.errors.CapabilityDenied"
    assert "no-secret-notes" in denied["error"]["message"]
    assert denied["meta"]["argument_rule"]["rule"] == "no-secret-notes"
    assert "source" not in denied  # neither executed nor served
    assert "meta" not in result.calls[0]  # no rule held for the allowed call


def test_an_agent_cannot_recover_from_a_denied_call(tmp_path: Path) -> None:
    model = scripted(
        [
            completion(None, [("notes__write", {"name": "secret-2", "text": "x"})]),
            completion("recovered"),
        ]
    )
    result = _run(tmp_path, [{"id": "a", "agent": {"tools": ["notes.write"]}}], model)
    assert result.episode["status"] == "denied"
    assert result.episode["failure"]["tool"] == "notes.write"
    assert len(result.requests) == 1  # the model never saw the refusal as a tool result
    assert not (tmp_path / "note-secret-2").exists()


def test_a_program_that_catches_the_refusal_is_denied_all_the_same() -> None:
    rules = RuleSet.from_json(
        [
            {
                "name": "no-abc",
                "tool": "text.count",
                "action": "deny",
                "when": {"text": {"matches": "abc"}},
            }
        ]
    )
    definition = sdk.tool_def(program_tools.count)
    assert definition is not None
    tool = RuntimeTool(definition.manifest_entry(), "execute", program_tools.count, rules)
    registry = RuntimeRegistry([tool], {"name": "shadow"})
    sent: list[dict[str, Any]] = []
    caller = Caller(
        lambda kind, **fields: sent.append(fields["record"]) if kind == "call" else None,
        lambda fields: {},
        "shadow",
        ObservationStore(None),
        TraceStore(None),
        Clock(1767225600.0, 1.0),
    )
    step = {"id": "agent", "program": "stdlib_agent:undeclared", "tools": ["text.count"]}
    with sdk.replay_context(registry.execute_ids), pytest.raises(CapabilityDenied) as caught:
        ProgramStep(step, registry, caller, {}).run()  # the program catches it and returns
    assert caught.value.fields == {"tool_id": "text.count", "rule": "no-abc"}
    assert sent[0]["meta"]["argument_rule"]["rule"] == "no-abc"
