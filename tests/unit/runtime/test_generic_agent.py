"""The generic tool-calling agent step an imported run replays through.

Fixed messages after the system prompt; a bare choice body; a served recording's text fed back
verbatim; the simulated user's object form (stop texts, turn limit); tools offered under a
function name derived from the id (dots as ``__``) and mapped back; a source verdict that travels
with a replay whose calls agree. No Docker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.reproduce.diff import apply_source_verdict
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.callrecords import message_of
from runner.runtime.steps.agent import AgentStep
from runner.sdk import function_name
from runner.trace.format import failure_signature
from runner.wire.errors import ModelCallError, RecordedError

WORKFLOW = """name: generic
version: "1"
tools: [tools.manifest.json]
model: {provider: replay}
steps:
  - id: agent
    agent:
      tools: [%s]
      max_turns: 5
      system: "Be brief."
      fixed_messages: [{role: assistant, content: "Hi! How can I help?"}]
      user: %s
"""


def _manifest(folder: Path, ids: list[str]) -> None:
    tools = [
        {
            "id": i,
            "effect": "read",
            "description": "",
            "schema": {},
            "schema_hash": "h",
            "module": None,
            "qualname": None,
        }
        for i in ids
    ]
    (folder / "tools.manifest.json").write_text(json.dumps({"tools": tools}), "utf-8")


def _load(tmp_path: Path, tools: str, user: str) -> Any:
    ids = [t.strip() for t in tools.split(",") if t.strip()]
    _manifest(tmp_path, ids)
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW % (tools, user), "utf-8")
    return load_workflow(path)


def test_user_object_form_loads_and_normalises(tmp_path: Path) -> None:
    wf = _load(
        tmp_path,
        "kb.search",
        '{system: "${task.instructions}", stop: ["###STOP###", "###TRANSFER###"], max_turns: 0}',
    )
    agent = wf.normalised()["steps"][0]["agent"]
    assert agent["user"]["stop"] == ["###STOP###", "###TRANSFER###"]
    assert agent["user"]["max_turns"] == 0 and agent["user"]["system"] == "${task.instructions}"
    assert agent["fixed_messages"] == [{"role": "assistant", "content": "Hi! How can I help?"}]
    assert load_workflow(wf.path).spec.steps[0].agent.user.stop == ["###STOP###", "###TRANSFER###"]


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ('{stop: [""]}', "stop"),
        ("{stop: []}", "stop"),
        ("{max_turns: -1}", "max_turns"),
        ("{colour: red}", "colour"),
    ],
)
def test_bad_user_object_names_the_field(tmp_path: Path, user: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        _load(tmp_path, "kb.search", user)
    assert field in str(info.value) and "wf.yaml" in str(info.value)


def test_bad_user_reference_is_reported(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        _load(tmp_path, "kb.search", '{system: "${nope.x}"}')
    assert "user" in str(info.value) and "system" in str(info.value)


def test_function_names_collide_at_load_time(tmp_path: Path) -> None:
    assert function_name("kb.search") == "kb__search" and function_name("calculate") == "calculate"
    with pytest.raises(InputError) as info:
        _load(tmp_path, "kb.search, kb__search", "null")
    message = str(info.value)
    assert "'kb.search'" in message and "'kb__search'" in message and "kb__search" in message
    with pytest.raises(InputError) as info:
        _load(tmp_path, "a." + "b" * 63, "null")
    assert "64" in str(info.value)


def test_message_of_accepts_a_bare_choice_and_still_refuses_garbage() -> None:
    choice = {
        "finish_reason": "stop",
        "index": 0,
        "message": {"role": "assistant", "content": "ok"},
    }
    assert message_of(json.dumps(choice).encode(), "model") == {
        "role": "assistant",
        "content": "ok",
    }
    completion = {"model": "m-1", "choices": [choice]}
    assert message_of(json.dumps(completion).encode(), "model")["_model"] == "m-1"
    with pytest.raises(ModelCallError):
        message_of(b'{"something": 1}', "model")


class FakeCaller:
    """Serves scripted model/user messages and tool bodies; records requests."""

    def __init__(self, model: list[dict[str, Any]], user: list[str], tools: dict[str, Any]) -> None:
        self.model, self.user, self.tools = list(model), list(user), tools
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.tool_calls: list[tuple[str, Any]] = []
        self.served_text: str | None = None

    def call_model(self, step_id: str, role: str, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((role, json.loads(json.dumps(request))))
        if role == "user":
            return {"role": "assistant", "content": self.user.pop(0)}
        return dict(self.model.pop(0))

    def call_tool(self, step_id: str, tool: Any, args: Any) -> Any:
        self.tool_calls.append((tool.id, args))
        text, error = self.tools[tool.id]
        self.served_text = text
        if error:
            raise RecordedError("ToolError", text)
        return text

    def record_failed(self, step_id: str, tool_id: str, args: Any, error: BaseException) -> None:
        raise AssertionError(f"unexpected failed call {tool_id}")


def _call(name: str, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _step(user: Any, caller: FakeCaller, tools: list[str]) -> AgentStep:
    registry = RuntimeRegistry(
        [RuntimeTool({"id": t, "effect": "read", "schema": {}}, "recorded", None) for t in tools]
    )
    step = {
        "id": "agent",
        "agent": {
            "tools": tools,
            "max_turns": 6,
            "system": "Be brief.",
            "fixed_messages": [{"role": "assistant", "content": "Hi! How can I help?"}],
            "user": user,
        },
    }
    return AgentStep(step, {"model": {"provider": "replay"}}, registry, caller, {"q": 1}, {})  # type: ignore[arg-type]


def test_fixed_messages_verbatim_bodies_stop_texts_and_function_names() -> None:
    caller = FakeCaller(
        model=[
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [_call("kb__search"), _call("lookup", "c2")],
            },
            {"role": "assistant", "content": "Done."},
        ],
        user=["I need help", "thanks ###TRANSFER###"],
        tools={"kb.search": ("plain text, not JSON", False), "lookup": ("Error: not found", True)},
    )
    output = _step(
        {"system": "sim", "stop": ["###STOP###", "###TRANSFER###"]}, caller, ["kb.search", "lookup"]
    ).run()
    assert output == "Done."
    assert caller.tool_calls == [("kb.search", {}), ("lookup", {})]
    roles = [r for r, _ in caller.requests]
    assert roles == ["user", "model", "model", "user"]  # the greeting is no turn; TRANSFER ends it
    first_user = caller.requests[0][1]["messages"]
    assert first_user == [
        {"role": "system", "content": "sim"},
        {"role": "user", "content": "Hi! How can I help?"},
    ]
    model = caller.requests[2][1]
    assert model["messages"][:3] == [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "I need help"},
    ]
    assert [t["function"]["name"] for t in model["tools"]] == ["kb__search", "lookup"]
    results = [m for m in model["messages"] if m["role"] == "tool"]
    # the recorded text verbatim: not quoted, and an error stays the source's own text
    assert [r["content"] for r in results] == ["plain text, not JSON", "Error: not found"]


def test_user_turn_limit_zero_ends_after_the_first_answer() -> None:
    caller = FakeCaller(model=[{"role": "assistant", "content": "Hello."}], user=["hi"], tools={})
    assert _step({"system": "sim", "max_turns": 0}, caller, []).run() == "Hello."
    assert [r for r, _ in caller.requests] == ["user", "model"]


def _calls(*tools: str) -> list[dict[str, Any]]:
    return [{"index": i, "tool": t, "args": {}} for i, t in enumerate(tools)]


def test_source_verdict_travels_only_with_the_same_calls() -> None:
    recorded_end = {
        "status": "failed",
        "failure": {
            "call_index": 2,
            "tool": "workflow",
            "error_class": "task_failed",
            "exit_code": 1,
        },
        "failure_signature": failure_signature(2, "workflow", "task_failed", 1),
    }
    recorded = _calls("user", "model", "user")
    end = apply_source_verdict(
        recorded, recorded_end, _calls("user", "model", "user"), {"status": "succeeded"}
    )
    assert end["status"] == "failed" and end["source_verdict"] is True
    assert end["failure_signature"] == recorded_end["failure_signature"]
    other = apply_source_verdict(
        recorded, recorded_end, _calls("user", "model", "kb"), {"status": "succeeded"}
    )
    assert other == {"status": "succeeded"}
    tool_failure = dict(
        recorded_end, failure={**recorded_end["failure"], "tool": "kb", "error_class": "KeyError"}
    )
    assert (
        apply_source_verdict(recorded, tool_failure, recorded, {"status": "succeeded"})["status"]
        == "succeeded"
    )
