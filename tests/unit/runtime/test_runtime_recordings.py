"""Serving recorded calls: observations (shadow) and the trace (reproduce); divergence."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import (
    Result,
    completion,
    manifest_for,
    run_runtime,
    scripted,
    write_run_dir,
)

from runner.runtime.replay.recordings import (
    ObservationStore,
    TraceStore,
    differing_fields,
    value_of,
)
from runner.wire.errors import RecordedError, UnrecordedCall


def _obs(tool: str, args: Any, value: Any = None, **extra: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args, "body": json.dumps(value), "body_encoding": "text", **extra}


# --- the matching rules, in process ---------------------------------------------------------


def test_matching_ignores_key_order_but_not_values_list_order_or_extra_keys() -> None:
    store = ObservationStore([_obs("kb.search", {"q": "x", "tags": ["a", "b"]}, [1])])
    assert value_of(store.serve("kb.search", {"tags": ["a", "b"], "q": "x"})) == [1]
    for args in (
        {"q": "x", "tags": ["b", "a"]},
        {"q": "y", "tags": ["a", "b"]},
        {"q": "x", "tags": ["a", "b"], "extra": 1},
    ):
        with pytest.raises(UnrecordedCall):
            ObservationStore([_obs("kb.search", {"q": "x", "tags": ["a", "b"]}, [1])]).serve(
                "kb.search", args
            )


def test_repeated_calls_consume_recordings_in_order_then_all_used() -> None:
    store = ObservationStore(
        [_obs("clock.tick", {}, 1), _obs("other", {}, 0), _obs("clock.tick", {}, 2)]
    )
    assert [value_of(store.serve("clock.tick", {})) for _ in range(2)] == [1, 2]
    with pytest.raises(UnrecordedCall) as info:
        store.serve("clock.tick", {})
    assert "matched, but all 2 recorded occurrences already used" in str(info.value)
    assert "clock.tick" in str(info.value)


def test_a_miss_names_tool_arguments_and_the_nearest_call_with_differing_fields() -> None:
    store = ObservationStore(
        [
            _obs("ticket.get", {"ticket_id": "T-9", "verbose": True}, {}),
            _obs("ticket.get", {"ticket_id": "T-1"}, {}),
            _obs("kb.search", {"query": "T-2"}, []),
        ]
    )
    with pytest.raises(UnrecordedCall) as info:
        store.serve("ticket.get", {"ticket_id": "T-2"})
    message = str(info.value)
    assert "tool 'ticket.get'" in message and '{"ticket_id":"T-2"}' in message
    assert 'nearest recorded call: ticket.get {"ticket_id":"T-1"}' in message
    assert 'ticket_id: "T-2" (call) != "T-1" (recorded)' in message
    assert info.value.differing == ['ticket_id: "T-2" (call) != "T-1" (recorded)']
    with pytest.raises(UnrecordedCall) as other:
        store.serve("user.get", {"id": 1})
    assert "no recorded call of this tool (recorded tools: kb.search, ticket.get)" in str(
        other.value
    )


def test_differing_fields_names_missing_and_extra_keys() -> None:
    assert differing_fields({"a": 1, "c": 3}, {"a": 1, "b": 2}) == [
        "b: only in the recording",
        "c: only in the call",
    ]
    assert differing_fields([1], [2]) == ["arguments: [1] (call) != [2] (recorded)"]


def test_a_recorded_error_is_raised_again_with_its_class() -> None:
    record = {
        "tool": "ticket.get",
        "args": {},
        "error": {"class": "helpdesk.errors.NotFound", "message": "no T-1"},
    }
    with pytest.raises(RecordedError) as info:
        value_of(record)
    assert info.value.recorded_class == "helpdesk.errors.NotFound"
    assert str(info.value) == "no T-1"


def test_non_json_and_base64_bodies_are_served_as_recorded() -> None:
    assert value_of({"body": "plain text", "body_encoding": "text"}) == "plain text"
    assert value_of({"body": "eyJhIjogMX0=", "body_encoding": "base64"}) == {"a": 1}
    from runner.errors import ReplayDivergence

    with pytest.raises(ReplayDivergence, match="truncated"):
        value_of({"tool": "t", "body": "{", "truncated": True, "original_length": 9})


def test_the_trace_store_serves_by_position_and_tool() -> None:
    store = TraceStore(
        [
            {"index": 0, "tool": "model", "request": {}},
            {"index": 1, "tool": "ticket.get", "args": {"id": 1}, "body": "1", "clock": 5.0},
        ]
    )
    assert store.serve(1, "ticket.get", {"id": 1})["body"] == "1"
    assert store.clock_at(1) == 5.0 and store.clock_at(0) is None
    with pytest.raises(UnrecordedCall, match=r"#1: tool 'kb.search'.*has tool 'ticket.get'"):
        store.serve(1, "kb.search", {"id": 1})
    with pytest.raises(UnrecordedCall, match=r"#2: .*no call at this index"):
        store.serve(2, "ticket.get", {"id": 1})
    with pytest.raises(UnrecordedCall, match="id: 2 \\(call\\) != 1 \\(recorded\\)"):
        store.serve(1, "ticket.get", {"id": 2})


# --- through the runtime --------------------------------------------------------------------


def _run(
    tmp_path: Path,
    steps: list,
    dispositions: dict,
    task: dict,
    mode: str = "shadow",
    recorded_calls: list | None = None,
    model: Any = None,
    clock: dict | None = None,
) -> Result:
    workflow = {"name": "w", "version": "1", "model": {"provider": "scripted"}, "steps": steps}
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        dict(task, task_id="t1"),
        manifest_for(dispositions),
        mode=mode,
        recorded_calls=recorded_calls,
        clock=clock,
    )
    result = run_runtime(run_dir, tmp_path, model=model)
    assert result.returncode == 0, result.stderr
    return result


def test_a_recorded_error_keeps_its_class_in_the_trace_and_failure(tmp_path: Path) -> None:
    task = {
        "input": {},
        "observations": [
            {
                "tool": "ticket.get",
                "args": {"ticket_id": "T-1"},
                "error": {"class": "helpdesk.errors.NotFound", "message": "no such ticket"},
            }
        ],
    }
    result = _run(
        tmp_path,
        [{"id": "f", "tool": "ticket.get", "args": {"ticket_id": "T-1"}}],
        {"ticket.get": "recorded"},
        task,
    )
    assert result.calls[0]["error"] == {
        "class": "helpdesk.errors.NotFound",
        "message": "no such ticket",
    }
    assert result.episode["failure"] == {
        "call_index": 0,
        "tool": "ticket.get",
        "error_class": "helpdesk.errors.NotFound",
    }
    assert not (tmp_path / "LIVE-READ-EXECUTED").exists()


def test_an_exhausted_observation_fails_the_tool_step_naming_the_call(tmp_path: Path) -> None:
    task = {"input": {}, "observations": [_obs("ticket.get", {"ticket_id": "T-1"}, {"n": 1})]}
    steps = [
        {"id": "a", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
        {"id": "b", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
        {"id": "c", "tool": "math.add", "args": {"a": 1, "b": 1}},
    ]
    result = _run(tmp_path, steps, {"ticket.get": "recorded", "math.add": "execute"}, task)
    episode = result.episode
    assert episode["status"] == "failed" and episode["not_run"] == ["c"]
    assert episode["failure"]["error_class"] == "runner.wire.errors.UnrecordedCall"
    assert "matched, but its one recorded occurrence already used" in episode["error"]["message"]
    divergences = result.of("divergence")
    assert [(d["kind"], d["index"], d["tool"]) for d in divergences] == [
        ("unrecorded_call", 1, "ticket.get")
    ]
    assert result.calls[1]["meta"]["divergence"][0]["kind"] == "unrecorded_call"
    assert not (tmp_path / "LIVE-READ-EXECUTED").exists()


def test_a_divergent_challenger_runs_to_a_complete_episode(tmp_path: Path) -> None:
    # recorded trajectory: ticket.get then kb.search("refund"); the challenger reads in the
    # other order, and its agent asks for a search that was never recorded (an observation it
    # recovers from) before it finishes; every step runs.
    task = {
        "input": {"t": "T-1"},
        "observations": [
            _obs("ticket.get", {"ticket_id": "T-1"}, {"subject": "refund"}),
            _obs("kb.search", {"query": "refund"}, ["policy 7"]),
        ],
    }
    steps = [
        {"id": "search", "tool": "kb.search", "args": {"query": "refund"}},
        {"id": "fetch", "tool": "ticket.get", "args": {"ticket_id": "${task.t}"}},
        {"id": "answer", "agent": {"tools": ["kb.search"], "max_turns": 3}},
        {"id": "final", "tool": "text.upper", "args": {"text": "${steps.answer.output}"}},
    ]
    model = scripted(
        [completion(None, [("kb.search", {"query": "refund policy"})]), completion("see policy 7")]
    )
    result = _run(
        tmp_path,
        steps,
        {"kb.search": "recorded", "ticket.get": "recorded", "text.upper": "execute"},
        task,
        model=model,
    )
    assert result.episode["status"] == "succeeded", result.episode
    assert result.episode["output"] == "SEE POLICY 7"
    assert [c["tool"] for c in result.calls] == [
        "kb.search",
        "ticket.get",
        "model",
        "kb.search",
        "model",
        "text.upper",
    ]
    assert result.calls[3]["error"]["class"] == "runner.wire.errors.UnrecordedCall"
    assert len(result.of("divergence")) == 1


def _recorded(
    index: int,
    tool: str,
    args: dict | None = None,
    body: Any = None,
    clock: float = 0.0,
    **extra: Any,
) -> dict[str, Any]:
    record = {
        "v": 1,
        "type": "call",
        "index": index,
        "step_id": "s",
        "tool": tool,
        "clock": clock,
        **extra,
    }
    if tool in ("model", "user"):
        record["request"] = {}
        record["body"] = body
    else:
        record["args"] = args or {}
        if body is not None:
            record.update(body=json.dumps(body), body_encoding="text")
    return record


def test_reproduce_serves_every_non_pure_call_from_the_trace_and_executes_pure(
    tmp_path: Path,
) -> None:
    recorded = [
        _recorded(0, "ticket.get", {"ticket_id": "T-1"}, {"subject": "hi"}, clock=111.0),
        _recorded(1, "email.send", {"to": "a@example.com", "body": "hi"}, "sent", clock=222.0),
        _recorded(2, "notes.write", {"name": "n", "text": "hi"}, {"written": 2}, clock=333.0),
        _recorded(3, "misc.now", {}, 999.0, clock=444.0),
        _recorded(4, "math.add", {"a": 1, "b": 1}, 3, clock=555.0),
    ]
    steps = [
        {"id": "s0", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
        {
            "id": "s1",
            "tool": "email.send",
            "args": {"to": "a@example.com", "body": "${steps.s0.output.subject}"},
        },
        {"id": "s2", "tool": "notes.write", "args": {"name": "n", "text": "hi"}},
        {"id": "s3", "tool": "misc.now", "args": {}},
        {"id": "s4", "tool": "math.add", "args": {"a": 1, "b": 1}},
    ]
    # the manifest says execute for local and unsafe: reproduce still serves them from the trace
    dispositions = {
        "ticket.get": "recorded",
        "email.send": "execute",
        "notes.write": "execute",
        "misc.now": "execute",
        "math.add": "execute",
    }
    result = _run(
        tmp_path, steps, dispositions, {"input": {}}, mode="reproduce", recorded_calls=recorded
    )
    calls = result.calls
    assert [c["source"] for c in calls] == ["trace", "trace", "trace", "executed", "executed"]
    assert [c["clock"] for c in calls] == [111.0, 222.0, 333.0, 444.0, 555.0]
    assert not (tmp_path / "EMAIL-SENT").exists() and not (tmp_path / "note-n").exists()
    # pure tools ran: misc.now read the recorded clock (444 != recorded body 999),
    # math.add returned 2 where the trace says 3; both reported, the episode completes
    assert calls[3]["body"] == "444.0" and calls[4]["body"] == "2"
    divergences = result.of("divergence")
    assert [(d["kind"], d["index"], d["tool"]) for d in divergences] == [
        ("pure_result", 3, "misc.now"),
        ("pure_result", 4, "math.add"),
    ]
    assert "returned 2 but the trace recorded 3" in divergences[1]["message"]
    assert result.episode["status"] == "succeeded" and result.episode["output"] == 2


def test_reproduce_an_unrecorded_call_is_a_hard_error_with_index_tool_and_args(
    tmp_path: Path,
) -> None:
    recorded = [_recorded(0, "ticket.get", {"ticket_id": "T-1"}, {"s": 1})]
    steps = [
        {"id": "a", "tool": "kb.search", "args": {"query": "q"}},
        {"id": "b", "tool": "ticket.get", "args": {"ticket_id": "T-1"}},
    ]
    result = _run(
        tmp_path,
        steps,
        {"kb.search": "recorded", "ticket.get": "recorded"},
        {"input": {}},
        mode="reproduce",
        recorded_calls=recorded,
    )
    episode = result.episode
    assert episode["status"] == "failed" and episode["not_run"] == ["b"]
    assert episode["failure"] == {
        "call_index": 0,
        "tool": "kb.search",
        "error_class": "runner.wire.errors.UnrecordedCall",
    }
    assert episode["error"]["message"].startswith(
        'unrecorded call #0: tool \'kb.search\' with arguments {"query":"q"}'
    )
    assert "the trace has tool 'ticket.get'" in episode["error"]["message"]


def test_reproduce_sends_model_turns_to_the_host_with_their_index(tmp_path: Path) -> None:
    body = json.loads(completion("done")["body"])
    recorded = [_recorded(0, "model", body=json.dumps(body), clock=10.0)]
    result = _run(
        tmp_path,
        [{"id": "a", "agent": {"tools": []}}],
        {},
        {"input": {}},
        mode="reproduce",
        recorded_calls=recorded,
        model=scripted([]),
    )
    assert result.requests[0]["index"] == 0 and result.requests[0]["role"] == "model"
    assert result.calls[0]["clock"] == 10.0
    assert result.episode["output"] == "done"


def test_reproduce_a_pure_tool_that_now_raises_is_a_pure_result_divergence(tmp_path: Path) -> None:
    # recorded live: the pure tool succeeded; replayed here it raises (as a tool that secretly
    # fetched over the network would, with no network)
    recorded = [_recorded(0, "misc.fail", {"key": "k"}, "fine", clock=1.0)]
    result = _run(
        tmp_path,
        [{"id": "a", "tool": "misc.fail", "args": {"key": "k"}}],
        {"misc.fail": "execute"},
        {"input": {}},
        mode="reproduce",
        recorded_calls=recorded,
    )
    divergence = result.of("divergence")
    assert [(d["kind"], d["index"], d["tool"]) for d in divergence] == [
        ("pure_result", 0, "misc.fail")
    ]
    assert "raised error KeyError: 'k' but the trace recorded \"fine\"" in divergence[0]["message"]
    assert result.episode["status"] == "failed"
    assert result.calls[0]["meta"]["divergence"][0]["kind"] == "pure_result"
