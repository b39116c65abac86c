"""An anchored fork in the runtime: the prefix served and verified, the rest fresh, a diverged
prefix stops the fork (`runner.runtime.replay.calls.Caller` with ``fork_at``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import Result, completion, manifest_for, run_runtime, scripted, write_run_dir

# the shadow policy's dispositions: read served, pure and local executed
DISPOSITIONS = {"ticket.get": "recorded", "kb.search": "recorded", "math.add": "execute"}


def _call(index: int, tool: str, args: dict[str, Any], value: Any, clock: float) -> dict[str, Any]:
    return {
        "v": 1,
        "type": "call",
        "index": index,
        "step_id": "s",
        "tool": tool,
        "args": args,
        "clock": clock,
        "body": json.dumps(value),
        "body_encoding": "text",
    }


def _fork(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    prefix: list[dict[str, Any]],
    fork_at: int,
    observations: list[dict[str, Any]] | None = None,
    model: Any = None,
) -> Result:
    workflow = {"name": "w", "version": "2", "model": {"provider": "scripted"}, "steps": steps}
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t1", "input": {}, "observations": observations or []},
        manifest_for(DISPOSITIONS),
        recorded_calls=prefix,
        fork_at=fork_at,
    )
    result = run_runtime(run_dir, tmp_path, model=model)
    assert result.returncode == 0, result.stderr
    return result


STEPS = [
    {"id": "a", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
    {"id": "b", "tool": "math.add", "args": {"a": 1, "b": 2}},
    {"id": "c", "tool": "kb.search", "args": {"query": "${steps.a.output.subject}"}},
]


def test_the_prefix_comes_from_the_trace_and_the_rest_from_the_observations(
    tmp_path: Path,
) -> None:
    prefix = [
        _call(0, "ticket.get", {"ticket_id": "T-1"}, {"subject": "refund"}, 500.0),
        _call(1, "math.add", {"a": 1, "b": 2}, 3, 501.0),
    ]
    observations = [
        {"tool": "kb.search", "args": {"query": "refund"}, "body": '["kb-1"]'},
        # the same read as the prefix's, with another answer: the prefix is served from the trace
        {"tool": "ticket.get", "args": {"ticket_id": "T-1"}, "body": '{"subject": "other"}'},
    ]
    result = _fork(tmp_path, STEPS, prefix, 2, observations)
    calls = result.calls
    assert [(c["index"], c["tool"], c["source"]) for c in calls] == [
        (0, "ticket.get", "trace"),
        (1, "math.add", "executed"),
        (2, "kb.search", "observation"),
    ]
    # the prefix's clock readings are the trace's; the fresh part goes on from the last one
    assert [c["clock"] for c in calls] == [500.0, 501.0, 502.0]
    assert result.of("divergence") == []
    assert result.episode["status"] == "succeeded" and result.episode["output"] == ["kb-1"]


def test_a_prefix_call_with_other_arguments_stops_the_fork(tmp_path: Path) -> None:
    prefix = [
        _call(0, "ticket.get", {"ticket_id": "T-9"}, {"subject": "refund"}, 500.0),
        _call(1, "math.add", {"a": 1, "b": 2}, 3, 501.0),
    ]
    steps = [
        # the step catches nothing: a program could; the fork still ends failed (below)
        *STEPS,
    ]
    result = _fork(tmp_path, steps, prefix, 2, [])
    assert [(c["index"], c["tool"]) for c in result.calls] == [(0, "ticket.get")]
    assert result.calls[0]["error"]["class"] == "runner.wire.errors.UnrecordedCall"
    assert [(d["kind"], d["index"]) for d in result.of("divergence")] == [("unrecorded_call", 0)]
    assert result.episode["status"] == "failed"


def test_a_pure_result_that_differs_in_the_prefix_stops_every_later_call(tmp_path: Path) -> None:
    prefix = [
        _call(0, "ticket.get", {"ticket_id": "T-1"}, {"subject": "refund"}, 500.0),
        _call(1, "math.add", {"a": 1, "b": 2}, 4, 501.0),  # recorded 4; the code returns 3
    ]
    observations = [{"tool": "kb.search", "args": {"query": "refund"}, "body": '["kb-1"]'}]
    result = _fork(tmp_path, STEPS, prefix, 2, observations)
    # call #2 never ran: the fork does not continue from a state that is not the recorded one
    assert [(c["index"], c["tool"]) for c in result.calls] == [(0, "ticket.get"), (1, "math.add")]
    assert [d["kind"] for d in result.of("divergence")] == ["pure_result"]
    episode = result.episode
    assert episode["status"] == "failed"
    assert episode["failure"]["error_class"] == "runner.runtime.replay.calls.ForkStopped"


def test_a_model_turn_where_the_prefix_has_a_tool_call_breaks_the_prefix(tmp_path: Path) -> None:
    prefix = [_call(0, "ticket.get", {"ticket_id": "T-1"}, {"subject": "refund"}, 500.0)]
    steps = [
        {
            "id": "agent",
            "agent": {"system": "s", "input": "hi", "tools": ["kb.search"], "max_turns": 2},
        },
    ]
    result = _fork(tmp_path, steps, prefix, 1, [], model=scripted([completion(content="done")]))
    assert [(c["index"], c["tool"]) for c in result.calls] == [(0, "model")]
    notes = result.of("divergence")
    assert [(d["kind"], d["index"]) for d in notes] == [("unrecorded_call", 0)]
    assert "where the trace has 'ticket.get'" in notes[0]["message"]
    assert result.episode["status"] == "failed"


def test_a_program_that_catches_the_divergence_still_ends_failed() -> None:
    sys.path.insert(0, str(TESTS / "fixtures" / "program"))
    import program_tools

    from runner import sdk
    from runner.runtime.registry import RuntimeRegistry, RuntimeTool
    from runner.runtime.replay.calls import Caller
    from runner.runtime.replay.clock import Clock
    from runner.runtime.replay.recordings import ObservationStore, TraceStore
    from runner.runtime.steps.engine import Episode

    tools = []
    for func, disposition in (
        (program_tools.kb_search, "recorded"),
        (program_tools.upper, "execute"),
    ):
        definition = sdk.tool_def(func)
        assert definition is not None
        executed = func if disposition == "execute" else None
        tools.append(RuntimeTool(definition.manifest_entry(), disposition, executed))
    registry = RuntimeRegistry(tools, {"name": "shadow"})
    sent: list[tuple[str, dict[str, Any]]] = []
    trace = TraceStore([_call(0, "kb.search", {"query": "recorded"}, {"hits": []}, 10.0)])
    caller = Caller(
        lambda type_, **fields: sent.append((type_, fields)),
        lambda fields: {},
        "shadow",
        ObservationStore(None),
        trace,
        Clock(0.0, 1.0, trace),
        fork_at=1,
    )
    step = {"id": "p", "program": "stdlib_agent:forgiving", "tools": ["kb.search", "text.upper"]}
    workflow = {"name": "w", "version": "2", "steps": [step]}
    with sdk.replay_context(registry.execute_ids):
        episode = Episode(workflow, {"question": "asked"}, registry, caller, caller._send).run()
    # the program caught the prefix's miss and the stop of call #1, and returned: still failed
    assert episode["output"] == {"caught": ["UnrecordedCall", "ForkStopped"]}
    assert episode["status"] == "failed"
    assert episode["failure"]["error_class"] == "runner.runtime.replay.calls.ForkStopped"
    assert [f["record"]["tool"] for k, f in sent if k == "call"] == ["kb.search"]
