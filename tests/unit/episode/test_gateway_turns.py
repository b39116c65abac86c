"""One episode's gateway on its own (`runner.episode.gatewayturns.GatewayTurns`), no channel.

The episode state's tests (test_gateway_side_requests.py, test_offered_tools.py) drive it
through `EpisodeState`; these pin the seam: what a turn reports to the state's meter, the
witness taken once per call index, and the bounded notes.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from runner.episode.gatewayturns import GatewayTurns
from runner.episode.tracelines import MAX_COVERAGE
from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse
from tests.unit.episode.test_gateway_host import WORKFLOW, message

ANSWER = json.dumps(
    {"id": "resp_1", "object": "response", "model": "gpt-4.1-mini", "output": [], "usage": {}}
)


class _Provider:
    def __init__(self, body: str = '{"model": "gpt-4.1-mini"}') -> None:
        self.calls: list[ApiCall] = []
        self.body = body

    def forward(self, call: ApiCall) -> ProviderResponse:
        self.calls.append(call)
        return ProviderResponse(body=self.body, model="gpt-4.1-mini", usage={"prompt_tokens": 3})


def _turns(mode: str = "shadow") -> GatewayTurns:
    workflow = json.loads(json.dumps(WORKFLOW))
    workflow["steps"][0]["model"]["apis"] = ["chat_completions", "responses", "responses_retrieve"]
    prepared = SimpleNamespace(run_id="r", run_spec={"workflow": workflow}, manifest=None)
    return GatewayTurns(SimpleNamespace(mode=mode), prepared)  # type: ignore[arg-type]


def test_a_forwarded_call_is_metered_and_witnessed_once_at_its_index() -> None:
    turns, provider = _turns(), _Provider()
    turn = turns.answer(message(index=4), "g0", provider)  # type: ignore[arg-type]
    assert turn.metered and turn.response is not None and len(provider.calls) == 1
    assert turn.reply["type"] == "gateway_response" and turn.reply["id"] == "g0"
    assert turn.reply["status"] == 200 and turn.reply["body"] == provider.body
    witnessed = turns.witnessed(4)
    assert witnessed is not None and witnessed[0] is turn.response
    assert witnessed[1].body["model"] == "gpt-4.1-mini"  # the step's model name applied
    assert turns.witnessed(4) is None  # taken once
    assert turns.witnessed("4") is None


def test_a_retrieval_is_answered_from_the_run_and_not_metered() -> None:
    turns, provider = _turns(), _Provider(ANSWER)
    created = message(
        api="responses", path="/v1/responses", request={"model": "m", "input": "q"}, index=0
    )
    assert turns.answer(created, "g0", provider).metered  # type: ignore[arg-type]
    retrieval = message(
        api="responses_retrieve",
        path="/v1/responses/resp_1",
        request={"response_id": "resp_1"},
        index=1,
    )
    turn = turns.answer(retrieval, "g1", provider)  # type: ignore[arg-type]
    assert not turn.metered and len(provider.calls) == 1  # never forwarded
    assert turn.reply["status"] == 200 and json.loads(turn.reply["body"])["id"] == "resp_1"


@pytest.mark.parametrize(
    ("fields", "error_class"),
    [
        ({"api": "telepathy"}, "GatewayRequestInvalid"),
        ({"request": {"model": "m", "messages": [], "store": True}}, "GatewayRequestRefused"),
    ],
)
def test_a_refused_request_reaches_no_provider_and_reports_no_answer(
    fields: dict[str, Any], error_class: str
) -> None:
    turns, provider = _turns(), _Provider()
    turn = turns.answer(message(**fields), "g0", provider)  # type: ignore[arg-type]
    assert turn.response is None and not turn.metered and provider.calls == []
    assert turn.reply["status"] == 400 and turn.reply["error"]["class"] == error_class
    assert turns.witnessed(0) is None


def test_without_a_provider_the_answer_says_no_model_and_counts_as_a_call() -> None:
    turn = _turns().answer(message(), "g0", None)
    assert turn.reply["status"] == 400 and "configures no model" in turn.reply["error"]["message"]
    assert turn.metered  # as before the split: the state counts the failed turn


def test_notes_are_kept_cleaned_up_to_the_cap_and_the_rest_counted() -> None:
    turns = _turns()
    for i in range(MAX_COVERAGE + 5):
        turns.note({"type": "gateway_note", "kind": "unsupported", "path": "/x" * 600, "n": i})
    assert len(turns.notes) == MAX_COVERAGE and turns.notes_dropped == 5
    assert turns.notes[0] == {"kind": "unsupported", "path": ("/x" * 600)[:512]}
