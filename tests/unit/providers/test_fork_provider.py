"""The anchored fork's provider: the prefix's recorded turns, then the fresh provider's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse
from runner.providers.fork import ForkProvider

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _turn(index: int, content: str, request: Mapping[str, Any] = REQUEST) -> dict[str, Any]:
    body = {"model": "m-rec", "choices": [{"message": {"role": "assistant", "content": content}}]}
    return {"index": index, "tool": "model", "request": dict(request), "body": json.dumps(body)}


class Fresh:
    """A fresh provider that counts what it is asked."""

    def __init__(self) -> None:
        self.asked: list[Mapping[str, Any]] = []

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        self.asked.append(request)
        return ProviderResponse(body='{"choices": [{"message": {"content": "fresh"}}]}')

    def forward(self, call: ApiCall) -> ProviderResponse:
        self.asked.append(call.request)
        return ProviderResponse(body='{"choices": [{"message": {"content": "fresh api"}}]}')


def test_the_prefix_turns_are_served_then_every_later_turn_is_fresh() -> None:
    fresh = Fresh()
    tool = {"index": 1, "tool": "kb.search", "args": {}, "body": "[]"}
    provider = ForkProvider([_turn(0, "recorded"), tool], fresh)
    first = provider.complete(REQUEST, "model")
    assert first.error is None and "recorded" in str(first.body)
    assert fresh.asked == []
    later = provider.complete({"messages": [{"role": "user", "content": "next"}]}, "model")
    assert later.body is not None and "fresh" in later.body
    assert len(fresh.asked) == 1 and provider.diverged is None


def test_a_prefix_turn_that_differs_stops_the_fork_and_no_fresh_turn_is_asked() -> None:
    fresh = Fresh()
    provider = ForkProvider([_turn(0, "recorded")], fresh)
    other = {"model": "m", "messages": [{"role": "user", "content": "changed prompt"}]}
    missed = provider.complete(other, "model")
    assert missed.error is not None and missed.error["class"] == "ReplayDivergence"
    assert "differs from its recording" in missed.error["message"]
    after = provider.complete(REQUEST, "model")
    assert after.error is not None
    assert "the anchored fork does not continue" in after.error["message"]
    assert fresh.asked == [] and provider.diverged is not None


def test_without_a_fresh_model_a_turn_past_the_prefix_is_an_error() -> None:
    provider = ForkProvider([], None)
    answer = provider.complete(REQUEST, "model")
    assert answer.error == {"class": "ProviderError", "message": "the workflow configures no model"}


def test_a_program_steps_gateway_requests_follow_the_same_rule() -> None:
    fresh = Fresh()
    recorded = dict(_turn(0, "recorded"), api="chat_completions")
    provider = ForkProvider([recorded], fresh)
    call = ApiCall("chat_completions", "/v1/chat/completions", REQUEST, dict(REQUEST, max_tokens=9))
    first = provider.forward(call)  # matched on the request as the program sent it
    assert first.error is None and "recorded" in str(first.body) and fresh.asked == []
    later = provider.forward(call)
    assert later.body is not None and "fresh api" in later.body and len(fresh.asked) == 1
