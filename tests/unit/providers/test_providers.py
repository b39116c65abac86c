"""Providers: scripted (host function) and replay (matching on canonical JSON)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.providers.base import response_from_body
from runner.providers.factory import provider_for
from runner.providers.replay import ReplayProvider
from runner.providers.scripted import ScriptedProvider

REQUEST = {
    "model": "cfg-model",
    "temperature": 0,
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "日本"}],
    "tools": [{"type": "function", "function": {"name": "kb_search"}}],
}


def test_scripted_from_module_records_raw_body_and_model_from_response(tmp_path: Path) -> None:
    (tmp_path / "my_model.py").write_text(
        "def respond(request):\n"
        "    return {'id': 'c', 'model': 'real-model-2026', 'choices': [{'message':"
        " {'role': 'assistant', 'content': 'é ' + request['model']}}],"
        " 'usage': {'prompt_tokens': 5, 'completion_tokens': 1}}\n"
    )
    provider = provider_for(
        {"provider": "scripted", "function": "my_model:respond"}, search_paths=[tmp_path]
    )
    assert provider is not None
    response = provider.complete(REQUEST, "model")
    assert response.model == "real-model-2026"  # never the configured name
    assert json.loads(response.body or "")["choices"][0]["message"]["content"] == "é cfg-model"
    assert response.body is not None and "é" in response.body  # raw text, not escaped
    assert response.tokens() == (5, 1) and response.error is None


def test_scripted_errors_become_error_turns() -> None:
    def raises(request: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("x")

    response = ScriptedProvider(raises).complete(REQUEST, "model")
    assert response.error == {"class": "KeyError", "message": "'x'"} and response.body is None
    assert (
        ScriptedProvider(lambda r: [1]).complete(REQUEST, "model").error["class"] == "ProviderError"
    )  # type: ignore[index]
    nan = ScriptedProvider(lambda r: {"x": float("nan")}).complete(REQUEST, "model")
    assert nan.error is not None and "not JSON" in nan.error["message"]


def test_scripted_user_role_is_passed() -> None:
    seen: list[Any] = []
    ScriptedProvider(lambda r: seen.append(r.get("role")) or {}).complete(REQUEST, "user")
    assert seen == ["user"]


@pytest.mark.parametrize("ref", ["nocolon", "missing_mod_xyz:f", "json:nope", "json:__doc__"])
def test_bad_references_are_input_errors(ref: str) -> None:
    with pytest.raises(InputError) as info:
        provider_for({"provider": "scripted", "function": ref})
    assert info.value.fields["field"] == "model.function"


def test_unknown_provider_and_none() -> None:
    assert provider_for(None) is None
    with pytest.raises(InputError, match="'no-such-provider' is not available"):
        provider_for({"provider": "no-such-provider"})


def _recorded(request: dict[str, Any], body: str, index: int, tool: str = "model") -> dict:
    return {
        "index": index,
        "tool": tool,
        "request": request,
        "body": body,
        "body_encoding": "text",
        "model": "rec-model",
    }


def test_replay_serves_in_order_ignoring_key_order() -> None:
    second = {**REQUEST, "messages": [*REQUEST["messages"], {"role": "assistant", "content": "a"}]}
    calls = [
        _recorded(REQUEST, '{"model":"m1"}', 0),
        _recorded({}, "x", 1, tool="kb.search"),
        _recorded(second, '{"model":"m2","usage":{"prompt_tokens":2}}', 2),
        _recorded({"messages": []}, '{"model":"u"}', 3, tool="user"),
    ]
    provider = ReplayProvider(calls)
    reordered = json.loads(json.dumps(REQUEST, sort_keys=True))
    assert provider.complete(reordered, "model").body == '{"model":"m1"}'
    r2 = provider.complete(second, "model")
    assert r2.model == "m2" and r2.tokens() == (2, 0)
    assert provider.complete({"messages": []}, "user").model == "u"
    miss = provider.complete(second, "model")
    assert miss.error is not None
    assert "all 2 recorded model turns already used" in miss.error["message"]


def test_replay_miss_names_first_differing_message() -> None:
    provider = ReplayProvider([_recorded(REQUEST, "{}", 0)])
    changed = {**REQUEST, "messages": [REQUEST["messages"][0], {"role": "user", "content": "x"}]}
    miss = provider.complete(changed, "model")
    assert miss.error is not None and miss.error["class"] == "ReplayDivergence"
    assert "first differing message index 1" in miss.error["message"]
    settings = provider.complete({**REQUEST, "temperature": 1}, "model")
    assert (
        settings.error is not None and "settings differ in temperature" in settings.error["message"]
    )
    tools = provider.complete({**REQUEST, "tools": []}, "model")
    assert tools.error is not None and "tools differ" in tools.error["message"]
    # after misses the recording is still served
    assert provider.complete(REQUEST, "model").error is None


def test_replay_model_falls_back_to_record_and_base64_bodies() -> None:
    import base64

    raw = b'{"no_model": true, "bad": "\xff"}'
    call = {
        "index": 0,
        "tool": "model",
        "request": REQUEST,
        "model": "rec-model",
        "body": base64.b64encode(raw).decode(),
        "body_encoding": "base64",
    }
    response = ReplayProvider([call]).complete(REQUEST, "model")
    assert response.model == "rec-model"
    assert response.body is not None
    assert response.body.encode("utf-8", "surrogateescape") == raw


def test_response_from_body_tolerates_garbage() -> None:
    assert response_from_body("not json").model is None
    assert response_from_body("[1]").usage == {}
    assert response_from_body('{"model": 5}').model is None


def test_deadline_provider_answers_in_time_or_with_timeout_error() -> None:
    import threading

    from runner.providers.deadline import DeadlineProvider

    quick = DeadlineProvider(ScriptedProvider(lambda r: {"model": "m"}), lambda: 5.0)
    assert quick.complete(REQUEST, "model").model == "m"
    release = threading.Event()
    deadline = time.monotonic() + 0.1
    slow = DeadlineProvider(
        ScriptedProvider(lambda r: release.wait(10) and {}), lambda: deadline - time.monotonic()
    )
    response = slow.complete(REQUEST, "model")
    release.set()
    assert response.error is not None and response.error["class"] == "ProviderTimeout"

    def interrupt(request: dict[str, Any]) -> dict[str, Any]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        DeadlineProvider(ScriptedProvider(interrupt), lambda: 5.0).complete(REQUEST, "model")


def test_deadline_provider_starts_no_call_after_the_deadline() -> None:
    from runner.providers.deadline import DeadlineProvider

    calls: list[dict[str, Any]] = []
    timeouts: list[bool] = []

    def model(request: dict[str, Any]) -> dict[str, Any]:
        calls.append(request)
        return {"model": "m"}

    late = DeadlineProvider(ScriptedProvider(model), lambda: 0.0, lambda: timeouts.append(True))
    for _ in range(3):
        response = late.complete(REQUEST, "model")
        assert response.error is not None and response.error["class"] == "ProviderTimeout"
    assert calls == [] and timeouts == [True, True, True]


def test_a_long_shared_beginning_does_not_hide_the_difference() -> None:
    """The message is cut after the difference, never before it (it was cut at 117 chars)."""
    shared = "We looked into ticket T-1000 and the customer's account history. " * 8
    recorded = {"messages": [{"role": "user", "content": shared + "Refund approved."}]}
    provider = ReplayProvider([_recorded(recorded, "{}", 0)])
    miss = provider.complete(
        {"messages": [{"role": "user", "content": shared + "Refund denied."}]}, "model"
    )
    assert miss.error is not None
    message = miss.error["message"]
    assert "Refund denied." in message and "Refund approved." in message
    assert message.count("We looked into ticket") <= 4  # a window around it, not all 8 turns
