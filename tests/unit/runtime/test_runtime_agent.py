"""Agent steps in the runtime: the model loop through the host, tool dispatch, simulated user."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO, TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import (
    Result,
    completion,
    manifest_for,
    run_runtime,
    scripted,
    write_run_dir,
)

MODEL = {"provider": "scripted", "function": "m:respond", "settings": {"temperature": 0}}


def _run(
    tmp_path: Path,
    agent: dict[str, Any],
    dispositions: dict[str, str],
    model: Any,
    observations: list | None = None,
    steps_before: list | None = None,
    task_input: dict | None = None,
) -> Result:
    workflow = {
        "name": "w",
        "version": "1",
        "model": MODEL,
        "steps": [*(steps_before or []), {"id": "answer", "agent": agent}],
    }
    task = {
        "task_id": "t1",
        "input": task_input or {"question": "2+3?"},
        "observations": observations or [],
    }
    run_dir = write_run_dir(tmp_path / "run", workflow, task, manifest_for(dispositions))
    result = run_runtime(run_dir, tmp_path, model=model)
    assert result.returncode == 0, result.stderr
    return result


def test_several_tool_calls_in_one_message_and_results_fed_back(tmp_path: Path) -> None:
    observations = [
        {
            "tool": "kb.search",
            "args": {"query": "sum"},
            "body": json.dumps(["add numbers"]),
            "body_encoding": "text",
        }
    ]
    model = scripted(
        [
            completion(
                None,
                [
                    ("math.add", {"a": 2, "b": 3}),
                    ("kb.search", {"query": "sum"}),
                    ("text.upper", {"text": "ok"}),
                ],
            ),
            completion("The answer is 5."),
        ]
    )
    agent = {
        "tools": ["math.add", "kb.search", "text.upper"],
        "max_turns": 4,
        "system": "You help with ${task.question}",
        "input": "Q: ${task.question}",
    }
    result = _run(
        tmp_path,
        agent,
        {"math.add": "execute", "kb.search": "recorded", "text.upper": "execute"},
        model,
        observations,
    )
    assert result.episode["status"] == "succeeded"
    assert result.episode["output"] == "The answer is 5."
    calls = result.calls
    assert [c["tool"] for c in calls] == ["model", "math.add", "kb.search", "text.upper", "model"]
    assert [c["index"] for c in calls] == [0, 1, 2, 3, 4]
    assert calls[0]["model"] == "scripted-model-1" and calls[0]["source"] == "provider"
    assert json.loads(calls[0]["body"])["choices"][0]["message"]["tool_calls"]
    assert "args" not in calls[0] and "schema_hash" not in calls[0]
    first, second = (r["request"] for r in result.requests)
    assert result.requests[0]["role"] == "model" and result.requests[0]["index"] == 0
    assert first["model"] == "scripted" and first["temperature"] == 0
    assert first["messages"] == [
        {"role": "system", "content": "You help with 2+3?"},
        {"role": "user", "content": "Q: 2+3?"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "math__add",
        "kb__search",
        "text__upper",
    ]
    assert first["tools"][0]["type"] == "function"
    assert first["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in tool_messages)
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_0", "5"),
        ("call_1", '["add numbers"]'),
        ("call_2", '"OK"'),
    ]
    assert second["messages"][2]["role"] == "assistant"


def test_tool_errors_and_unknown_tools_are_observations_for_the_model(tmp_path: Path) -> None:
    model = scripted(
        [
            completion(
                None,
                [
                    ("misc.fail", {"key": "k"}),
                    ("kb.search", {"query": "nothing"}),
                    ("no.such", {}),
                    ("math.add", {"a": 1}),
                ],
            ),
            completion("recovered"),
        ]
    )
    agent = {"tools": ["misc.fail", "kb.search", "math.add"], "max_turns": 3}
    result = _run(
        tmp_path,
        agent,
        {"misc.fail": "execute", "kb.search": "recorded", "math.add": "execute"},
        model,
    )
    assert result.episode["status"] == "succeeded" and result.episode["output"] == "recovered"
    errors = [c.get("error", {}).get("class") for c in result.calls]
    assert errors == [
        None,
        "KeyError",
        "runner.wire.errors.UnrecordedCall",
        "runner.errors.ToolNotResolvable",
        "TypeError",
        None,
    ]
    second = result.requests[1]["request"]["messages"]
    contents = [json.loads(m["content"]) for m in second if m["role"] == "tool"]
    assert [c["error"]["class"] for c in contents] == [
        "KeyError",
        "runner.wire.errors.UnrecordedCall",
        "runner.errors.ToolNotResolvable",
        "TypeError",
    ]
    # the task's input is the first user message when no prompt is given
    assert result.requests[0]["request"]["messages"] == [
        {"role": "user", "content": '{"question":"2+3?"}'}
    ]
    assert result.calls[3]["tool"] == "no.such" and result.calls[3]["effect"] is None


def test_the_loop_stops_at_max_turns(tmp_path: Path) -> None:
    def always_call(role: str, request: dict[str, Any]) -> dict[str, Any]:
        return completion("still going", [("math.add", {"a": 1, "b": 1})])

    result = _run(
        tmp_path, {"tools": ["math.add"], "max_turns": 3}, {"math.add": "execute"}, always_call
    )
    assert len(result.requests) == 3
    assert result.episode["status"] == "succeeded"
    assert result.episode["output"] == "still going"


def test_a_denied_tool_in_the_toolset_denies_before_any_model_turn(tmp_path: Path) -> None:
    result = _run(
        tmp_path, {"tools": ["math.add", "email.send"]}, {"math.add": "execute"}, scripted([])
    )
    assert result.requests == []
    assert result.episode["status"] == "denied"
    assert result.episode["failure"]["tool"] == "email.send"


def test_capability_denied_inside_an_agent_tool_ends_the_episode_denied(tmp_path: Path) -> None:
    model = scripted([completion(None, [("misc.direct_unsafe", {})]), completion("never")])
    result = _run(
        tmp_path, {"tools": ["misc.direct_unsafe"]}, {"misc.direct_unsafe": "execute"}, model
    )
    assert result.episode["status"] == "denied"
    assert result.episode["failure"] == {
        "call_index": 1,
        "tool": "misc.direct_unsafe",
        "error_class": "runner.errors.CapabilityDenied",
    }
    assert len(result.requests) == 1
    assert not (tmp_path / "EMAIL-SENT").exists()


def test_a_model_error_from_the_host_fails_the_episode_at_that_call(tmp_path: Path) -> None:
    def broken(role: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"body": None, "error": {"class": "ProviderError", "message": "no key"}}

    result = _run(
        tmp_path,
        {"tools": []},
        {"math.add": "execute"},
        broken,
        steps_before=[{"id": "s", "tool": "math.add", "args": {"a": 1, "b": 1}}],
    )
    episode = result.episode
    assert episode["status"] == "failed"
    assert episode["failure"] == {"call_index": 1, "tool": "model", "error_class": "ProviderError"}
    assert episode["output"] == 2 and result.calls[1]["error"]["message"].endswith("no key")


def test_an_unparseable_model_body_is_a_model_call_error(tmp_path: Path) -> None:
    result = _run(tmp_path, {"tools": []}, {}, lambda role, req: {"body": "<html>oops"})
    assert result.episode["failure"]["error_class"] == "runner.wire.errors.ModelCallError"
    assert result.calls[0]["body"] == "<html>oops"


@pytest.mark.parametrize(
    "user",
    [
        "You are a customer asking ${task.question}",
        {"simulated": True, "system": "You are a customer asking ${task.question}"},
    ],
)
def test_a_simulated_user_is_served_with_role_user(tmp_path: Path, user: Any) -> None:
    user_replies = ["I need 2+3", "thanks ###STOP###"]

    def host(role: str, request: dict[str, Any]) -> dict[str, Any]:
        if role == "user":
            return completion(user_replies.pop(0), model="user-sim")
        return completion("It is 5.")

    agent = {"tools": [], "max_turns": 5, "user": user}
    result = _run(tmp_path, agent, {}, host)
    assert [c["tool"] for c in result.calls] == ["user", "model", "user"]
    first_user = result.requests[0]["request"]
    assert first_user["messages"] == [
        {"role": "system", "content": "You are a customer asking 2+3?"}
    ]
    model_req = result.requests[1]["request"]
    assert model_req["messages"] == [{"role": "user", "content": "I need 2+3"}]
    second_user = result.requests[2]["request"]["messages"]
    assert second_user[1:] == [
        {"role": "assistant", "content": "I need 2+3"},
        {"role": "user", "content": "It is 5."},
    ]
    assert result.episode["status"] == "succeeded" and result.episode["output"] == "It is 5."
    assert result.calls[0]["model"] == "user-sim"


def test_every_call_record_is_a_valid_trace_call_line(tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads((REPO / "docs" / "trace.schema.json").read_text())
    validator = Draft202012Validator(dict(schema, **{"$ref": "#/$defs/call"}))
    model = scripted(
        [
            completion(
                None,
                [
                    ("misc.fail", {"key": "k"}),
                    ("kb.search", {"query": "x"}),
                    ("no such tool!", {}),
                    ("math.add", {"a": 1}),
                ],
            ),
            {
                "body": json.dumps(
                    {
                        "choices": [
                            {
                                "message": {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "id": "c",
                                            "function": {
                                                "name": "math.add",
                                                "arguments": "{not json",
                                            },
                                        }
                                    ],
                                }
                            }
                        ]
                    }
                )
            },
            completion("ok"),
        ]
    )
    result = _run(
        tmp_path,
        {"tools": ["misc.fail", "kb.search", "math.add"], "max_turns": 4},
        {"misc.fail": "execute", "kb.search": "recorded", "math.add": "execute"},
        model,
    )
    assert len(result.calls) == 8
    for record in result.calls:
        errors = sorted(validator.iter_errors(record), key=str)
        assert not errors, (record, [e.message for e in errors])
    assert result.calls[3]["tool"] == "no_such_tool_"
    assert result.calls[3]["meta"] == {"requested_tool": "no such tool!"}
    assert result.calls[6]["meta"] == {"arguments": "{not json"}


def test_unlisted_tools_are_callable_but_not_listed_in_the_request(tmp_path: Path) -> None:
    model = scripted(
        [
            completion(None, [("math.add", {"a": 2, "b": 3})]),
            completion("5"),
        ]
    )
    result = _run(
        tmp_path,
        {"tools": ["math.add", "kb.search"], "max_turns": 3, "unlisted_tools": ["math.add"]},
        {"math.add": "execute", "kb.search": "recorded"},
        model,
    )
    listed = [[t["function"]["name"] for t in r["request"]["tools"]] for r in result.requests]
    assert listed == [["kb__search"], ["kb__search"]]  # known by name only
    assert result.calls[1]["tool"] == "math.add" and result.calls[1]["body"] == "5"
    assert result.episode["output"] == "5"
