"""The scripted model's one calling convention (issue 27): ``respond(request, *, api, path,
role)`` for agent steps and program steps alike; the old program-step envelope still served,
with a deprecation warning."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from runner.providers.apis import ApiCall
from runner.providers.scripted import ScriptedProvider
from tests.support.paths import REPO

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _chat(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"id": "c1", "model": "s-1", "choices": [{"index": 0, "message": message}]}


def respond(request: dict[str, Any], *, api: str = "chat_completions", path: str = "") -> Any:
    """One function for both kinds of steps: Chat Completions, and Messages for a program."""
    last = request["messages"][-1]["content"]
    if api == "messages":
        return {"type": "message", "model": "s-1", "content": [{"type": "text", "text": last}]}
    return _chat(f"{api} {path or '-'}: {last}")


def _program(api: str, body: dict[str, Any]) -> ApiCall:
    path = {"messages": "/v1/messages"}.get(api, "/v1/chat/completions")
    return ApiCall(api=api, path=path, request=body, body=body, step_id="agent")


def test_one_function_answers_agent_steps_and_program_steps_by_one_convention() -> None:
    provider = ScriptedProvider(respond)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented convention warns nothing
        turn = provider.complete(CHAT, "model")
        chat = provider.forward(_program("chat_completions", CHAT))
        messages = provider.forward(_program("messages", {**CHAT, "max_tokens": 5}))
    assert json.loads(turn.body or "")["choices"][0]["message"]["content"] == (
        "chat_completions /v1/chat/completions: hi"
    )
    assert json.loads(chat.body or "")["choices"][0]["message"]["content"] == (
        "chat_completions /v1/chat/completions: hi"
    )
    assert json.loads(messages.body or "")["content"][0]["text"] == "hi"


def test_the_old_envelope_still_answers_program_steps_with_a_deprecation_warning() -> None:
    seen: list[dict[str, Any]] = []

    def envelope(payload: dict[str, Any]) -> str:
        seen.append(payload)
        return json.dumps(_chat(payload["body"]["messages"][-1]["content"]))

    provider = ScriptedProvider(envelope)
    with pytest.warns(DeprecationWarning, match=r"declare keyword parameters"):
        first = provider.forward(_program("chat_completions", CHAT))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per function, not per call
        provider.forward(_program("chat_completions", CHAT))
    assert json.loads(first.body or "")["choices"][0]["message"]["content"] == "hi"
    assert seen[0] == {"api": "chat_completions", "path": "/v1/chat/completions", "body": CHAT}


def test_role_is_a_keyword_when_declared_else_marked_in_the_request_and_text_is_a_body() -> None:
    roles: list[Any] = []

    def with_role(request: dict[str, Any], *, role: str) -> str:
        roles.append((role, request.get("role")))
        return json.dumps(_chat("ok"))

    def without(request: dict[str, Any]) -> dict[str, Any]:
        roles.append(("-", request.get("role")))
        return _chat("ok")

    assert ScriptedProvider(with_role).complete(CHAT, "user").error is None
    assert ScriptedProvider(without).complete(CHAT, "user").error is None
    assert roles == [("user", None), ("-", "user")]
    from runner.providers.scripted import keywords_of

    assert keywords_of(lambda r, **kw: r) == frozenset({"api", "path", "role"})
    bad = ScriptedProvider(lambda r: 3).complete(CHAT, "model")
    assert bad.error is not None and "not the raw body" in bad.error["message"]


def test_the_examples_scripted_models_follow_the_convention() -> None:
    provider = ScriptedProvider("support_model:respond", [REPO / "examples" / "agent-program"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = provider.forward(
            _program(
                "chat_completions",
                {"model": "m", "messages": [{"role": "user", "content": "Ticket T-1: hi"}]},
            )
        )
    assert answer.error is None and answer.model == "support-script-2026-01"
    helpdesk = ScriptedProvider("helpdesk_model:respond", [REPO / "examples" / "helpdesk"])
    tools = [{"type": "function", "function": {"name": "kb__search"}}]
    turn = helpdesk.complete({**CHAT, "tools": tools}, "model")
    assert turn.error is None
