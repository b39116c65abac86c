"""The tools a program offers its model, against its declared toolset (issue 27): named in
the trace's end line, the request refused and the episode ``denied`` (fail closed:
runner/providers/offered.py says why); a declared SDK tool's own name counts as declared."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from runner.backends.base import ExitState
from runner.episode.channel import Channel
from runner.episode.state import EpisodeState
from runner.episode.status import classify, failure_of
from runner.providers.offered import MAX_NAME_CHARS, offered_tools, undeclared, undeclared_offered
from runner.tracetools.records import EndRecord

WORKFLOW = {
    "steps": [
        {"id": "agent", "program": "a:run", "tools": ["kb.search", "reply.format"]},
        {"id": "other", "program": "a:run", "tools": []},
    ]
}


@pytest.mark.parametrize(
    ("api", "tools"),
    [
        (
            "chat_completions",
            [
                {"type": "function", "function": {"name": "kb__search"}},
                {"type": "function", "function": {"name": "search_kb"}},
            ],
        ),
        (
            "responses",
            [
                {"type": "function", "name": "kb.search"},
                {"type": "function", "name": "search_kb"},
                {"type": "web_search"},  # not a function tool (the allow-list refuses it)
            ],
        ),
        ("messages", [{"name": "reply__format"}, {"name": "search_kb"}]),
    ],
)
def test_an_offered_tool_nobody_declared_is_named_on_each_api(
    api: str, tools: list[dict[str, Any]]
) -> None:
    request = {"model": "m", "tools": tools}
    assert undeclared_offered(api, request, WORKFLOW, "agent") == ["search_kb"]
    assert "search_kb" in undeclared_offered(api, request, WORKFLOW, "other")


@pytest.mark.parametrize(
    "tools",
    [None, "x", [1, None, {"function": "x"}, {"type": "function", "function": {"name": 3}}]],
)
def test_hostile_tool_lists_give_no_names(tools: Any) -> None:
    assert offered_tools("chat_completions", {"tools": tools}) == []


def test_names_are_bounded_and_unique() -> None:
    long = "x" * 1000
    request = {"tools": [{"name": long}, {"name": long}, *[{"name": f"t{i}"} for i in range(600)]]}
    names = offered_tools("messages", request)
    assert names[0] == "x" * MAX_NAME_CHARS and len(names) == 256  # distinct, one repeated
    assert undeclared(["a.b", "a__b", "c"], ["a.b"]) == ["c"]
    assert offered_tools("messages", {"tools": [{"name": "a\x1b[31mb"}]}) == ["a?[31mb"]


def test_the_end_line_field_reads_back() -> None:
    line = {
        "v": 1,
        "type": "end",
        "status": "succeeded",
        "exit_code": 0,
        "undeclared_tools": [{"step_id": "agent", "name": "search_kb", "requests": 2}],
    }
    end = EndRecord.model_validate(line)
    assert end.undeclared_tools is not None and end.undeclared_tools[0].name == "search_kb"


def test_an_mcp_tool_is_offered_under_its_own_name() -> None:
    """The Agents SDK offers ``notes.search_notes`` (entry prefix ``notes``) as
    ``search_notes``: declared; the server's other tool, offered too, is named."""
    workflow = {
        "tools": [{"mcp": {"command": ["python3", "s.py"], "prefix": "notes"}}],
        "steps": [{"id": "agent", "program": "a:run", "tools": ["notes.search_notes"]}],
    }
    request = {"tools": [{"type": "function", "name": n} for n in ("search_notes", "delete_note")]}
    assert undeclared_offered("responses", request, workflow, "agent") == ["delete_note"]
    plain = {**workflow, "tools": [{"mcp": {"command": ["python3", "s.py"]}}]}
    assert undeclared_offered("responses", request, plain, "agent") == [
        "search_notes",
        "delete_note",
    ]


MANIFEST = {"tools": [{"id": "kb.search", "name": "search_kb"}, {"id": "reply.format"}]}


def test_a_declared_sdk_tools_own_name_declares_it() -> None:
    request = {"tools": [{"name": "search_kb"}, {"name": "reply__format"}, {"name": "x"}]}
    assert undeclared_offered("messages", request, WORKFLOW, "agent", MANIFEST) == ["x"]
    assert undeclared_offered("messages", request, WORKFLOW, "agent") == ["search_kb", "x"]


class _Provider:
    def __init__(self) -> None:
        self.forwarded: list[Any] = []

    def forward(self, call: Any) -> Any:  # pragma: no cover - must not be reached
        self.forwarded.append(call)
        raise AssertionError("an undeclared offered tool's request was forwarded")


def _state() -> EpisodeState:
    workflow = dict(WORKFLOW, name="w", version="1", model=None)
    workflow["steps"] = [
        dict(WORKFLOW["steps"][0], model={"provider": "openai", "name": "gpt-4.1-mini"})
    ]
    prepared = SimpleNamespace(run_id="r", run_spec={"workflow": workflow}, manifest=MANIFEST)
    request = SimpleNamespace(mode="shadow")
    state = EpisodeState(request=request, prepared=prepared, channel=Channel())  # type: ignore[arg-type]
    state.hello = {"type": "hello"}
    return state


def test_a_request_offering_an_undeclared_tool_is_refused_and_the_episode_denied() -> None:
    """Was: forwarded, the name only listed in the end line (the episode ``succeeded``)."""
    state, provider = _state(), _Provider()
    message = {
        "type": "gateway_request",
        "id": "g0",
        "index": 0,
        "step_id": "agent",
        "api": "chat_completions",
        "path": "/v1/chat/completions",
        "request": {
            "model": "m",
            "messages": [],
            "tools": [
                {"type": "function", "function": {"name": "search_kb", "parameters": {}}},
                {"type": "function", "function": {"name": "delete_all", "parameters": {}}},
            ],
        },
        "headers": {},
    }
    [reply] = state._on_gateway_request(message, provider)  # type: ignore[arg-type]
    assert reply["status"] == 400 and provider.forwarded == []
    assert reply["error"]["class"] == "runner.errors.CapabilityDenied"
    assert (
        "delete_all" in reply["error"]["message"] and "search_kb" not in reply["error"]["message"]
    )
    assert state.undeclared_tools == {("agent", "delete_all"): 1}
    state.episode = {"status": "failed"}  # the program saw the refusal as an error
    status, reason = classify(state, ExitState(exit_code=0))
    assert status == "denied" and reason is not None and "'delete_all'" in reason
    failure = failure_of(state, status, state.episode)
    assert failure["tool"] == "delete_all" and failure["error_class"].endswith("CapabilityDenied")


def test_an_undeclared_tool_past_the_first_256_is_still_named() -> None:
    """Security review: only ``tools[:256]`` were read, so 256 copies of a declared tool and
    then ``rm_rf`` passed the fail-closed check (and the gateway forwarded the request)."""
    padding = [{"type": "function", "function": {"name": "kb__search"}}] * 256
    request = {"tools": [*padding, {"type": "function", "function": {"name": "rm_rf"}}]}
    assert undeclared_offered("chat_completions", request, WORKFLOW, "agent") == ["rm_rf"]
    many = {"tools": [{"name": f"t{i}"} for i in range(10_000)]}
    assert len(undeclared_offered("messages", many, WORKFLOW, "agent")) <= 256  # bounded


def test_a_legacy_chat_functions_list_is_read_too() -> None:
    """Security review: Chat Completions' deprecated ``functions`` (the gateway allow-list
    passes it) offered ``rm_rf`` unseen."""
    request = {"functions": [{"name": "rm_rf", "parameters": {"type": "object"}}]}
    assert undeclared_offered("chat_completions", request, WORKFLOW, "agent") == ["rm_rf"]
    declared = {"functions": [{"name": "kb__search"}]}
    assert undeclared_offered("chat_completions", declared, WORKFLOW, "agent") == []
