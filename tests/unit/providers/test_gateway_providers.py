"""Host providers of program steps: Responses and Messages over HTTP, routing, metering, replay.

Against fake servers on 127.0.0.1 that the tests start (tests/support/fake_openai.py,
tests/support/fake_anthropic.py); nothing leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.anthropic import AnthropicProvider
from runner.providers.apis import ApiCall, sse_events, summarise
from runner.providers.base import ProviderResponse
from runner.providers.gateway import GatewayRouter, model_override
from runner.providers.metered import MeteredProvider, StopSignal
from runner.providers.openai import OpenAIProvider
from runner.providers.replay import ReplayProvider
from runner.providers.replay_api import first_differing_field
from tests.support import fake_anthropic, fake_openai

PRICES = {
    "gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6},
    "claude-sonnet-4*": {"input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0},
}


def call(api: str, body: dict[str, Any], step_id: str = "agent") -> ApiCall:
    path = {"chat_completions": "/v1/chat/completions", "responses": "/v1/responses"}.get(
        api, "/v1/messages"
    )
    return ApiCall(api=api, path=path, request=dict(body), body=dict(body), step_id=step_id)


@pytest.fixture
def oai() -> Iterator[fake_openai.FakeOpenAI]:
    with fake_openai.serve(fake_openai.FakeOpenAI()) as server:
        yield server


@pytest.fixture
def ant() -> Iterator[fake_anthropic.FakeAnthropic]:
    with fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as server:
        yield server


def test_openai_forwards_responses_streams_raw_with_model_and_usage(
    oai: fake_openai.FakeOpenAI,
) -> None:
    provider = OpenAIProvider(oai.url, "sk-test")
    served = provider.forward(call("responses", {"model": "gpt-4o", "input": "hi", "stream": True}))
    assert served.error is None and served.status == 200
    assert served.body == oai.bodies[0].decode()  # byte for byte
    assert served.content_type.startswith("text/event-stream")
    assert served.model == fake_openai.MODEL_ID
    assert served.tokens() == (100, 20)
    assert oai.paths == ["/v1/responses"]
    assert oai.headers[0]["Authorization"] == "Bearer sk-test"


def test_openai_chat_stream_without_include_usage_states_no_usage(
    oai: fake_openai.FakeOpenAI,
) -> None:
    served = OpenAIProvider(oai.url).forward(
        call("chat_completions", {"model": "m", "messages": [], "stream": True})
    )
    assert served.body is not None and served.body.rstrip().endswith("data: [DONE]")
    assert served.model == fake_openai.MODEL_ID and not served.has_usage
    with_usage = OpenAIProvider(oai.url).forward(
        call(
            "chat_completions",
            {
                "model": "m",
                "messages": [],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    )
    assert with_usage.tokens() == (100, 20)


def test_openai_does_not_serve_messages() -> None:
    served = OpenAIProvider("http://127.0.0.1:9/v1").forward(call("messages", {"model": "c"}))
    assert served.body is None and "does not serve" in str(served.error)


def test_anthropic_speaks_messages_with_the_key_on_the_host_streams_included(
    ant: fake_anthropic.FakeAnthropic,
) -> None:
    provider = AnthropicProvider(ant.url, "sk-ant-test")
    body = {"model": "claude-sonnet-4-20250514", "max_tokens": 64, "messages": []}
    plain = provider.forward(call("messages", body))
    assert plain.body == ant.bodies[0].decode()
    assert plain.model == fake_anthropic.MODEL_ID and plain.tokens() == (120, 30)
    stream = provider.forward(call("messages", {**body, "stream": True}))
    assert stream.body == ant.bodies[1].decode()
    events = [name for name, _ in sse_events(stream.body or "")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert stream.tokens() == (120, 30)  # message_start's input, message_delta's output
    assert ant.headers[0]["x-api-key"] == "sk-ant-test"
    assert ant.headers[0]["anthropic-version"] == "2023-06-01"


def test_anthropic_settings_and_environment(tmp_path: Path) -> None:
    from runner.settings import Settings

    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "ANTHROPIC_API_KEY": "from-env"}
    provider = AnthropicProvider.from_settings(None, environ=env)
    assert provider.base_url == "http://127.0.0.1:1"
    assert provider._client.headers["x-api-key"] == "from-env"
    settings = Settings(
        state_dir=tmp_path, anthropic_base_url="http://127.0.0.1:2", anthropic_api_key="mine"
    )
    provider = AnthropicProvider.from_settings(settings, environ=env)
    assert provider.base_url == "http://127.0.0.1:2"
    assert provider._client.headers["x-api-key"] == "mine"


def test_an_http_error_is_the_apis_own_body_with_an_error() -> None:
    with fake_anthropic.serve(fake_anthropic.FakeAnthropic(status=400)) as ant:
        served = AnthropicProvider(ant.url).forward(call("messages", {"model": "c"}))
    assert served.status == 400 and served.body is not None
    assert json.loads(served.body)["type"] == "error"
    assert served.error is not None and served.error["class"] == "ProviderHTTPError"


def test_summarise_reads_model_and_usage_of_each_api() -> None:
    assert summarise("messages", '{"model": "c-1", "usage": {"input_tokens": 3}}', False) == (
        "c-1",
        {"input_tokens": 3},
    )
    chat = 'data: {"model": "g", "choices": []}\n\ndata: {"usage": {"prompt_tokens": 5}}\n\n'
    assert summarise("chat_completions", chat + "data: [DONE]\n\n", True) == (
        "g",
        {"prompt_tokens": 5},
    )
    assert summarise("responses", "not json", False) == (None, {})


def test_routing_picks_the_family_by_api_and_overrides_only_the_steps_family(
    oai: fake_openai.FakeOpenAI, ant: fake_anthropic.FakeAnthropic, tmp_path: Path
) -> None:
    from runner.settings import Settings

    settings = Settings(state_dir=tmp_path, openai_base_url=oai.url, anthropic_base_url=ant.url)
    router = GatewayRouter(None, None, {"agent": {"provider": "openai"}}, [], settings)
    router.forward(call("chat_completions", {"model": "gpt-4o", "messages": []}))
    router.forward(call("messages", {"model": "claude-x", "max_tokens": 5, "messages": []}))
    assert len(oai.requests) == 1 and len(ant.requests) == 1
    assert model_override({"provider": "openai", "name": "gpt-4.1-mini"}, "openai") == (
        "gpt-4.1-mini"
    )
    assert model_override({"provider": "openai", "name": "gpt-4.1-mini"}, "anthropic") is None
    assert model_override({"provider": "scripted", "function": "m:f", "name": "s"}, "x") == "s"
    nothing = GatewayRouter(None, None, {"agent": None}, [], settings)
    refused = nothing.forward(call("chat_completions", {"model": "m"}))
    assert refused.body is None and "no model" in str(refused.error)


def test_a_scripted_model_receives_api_path_and_body_and_returns_the_raw_body() -> None:
    from runner.providers.scripted import ScriptedProvider

    seen: list[dict[str, Any]] = []

    def model(request: dict[str, Any], *, api: str, path: str) -> str:
        seen.append({"api": api, "path": path, "body": request})
        return 'event: message_stop\ndata: {"type": "message_stop"}\n\n'

    served = ScriptedProvider(model).forward(call("messages", {"model": "s", "stream": True}))
    assert seen == [
        {"api": "messages", "path": "/v1/messages", "body": {"model": "s", "stream": True}}
    ]
    assert served.body == 'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    assert served.content_type == "text/event-stream"


class _Answer:
    name = "fake"

    def __init__(self, response: ProviderResponse) -> None:
        self.response = response
        self.sent: list[ApiCall] = []

    def forward(self, api_call: ApiCall) -> ProviderResponse:
        self.sent.append(api_call)
        return self.response

    def complete(self, request: Any, role: str) -> ProviderResponse:
        raise AssertionError("not a turn")


def metered(tmp_path: Path, inner: Any, usd: float | None = 1.0) -> tuple[MeteredProvider, Any]:
    ledger = Ledger.for_state_dir(tmp_path)
    ledger.create_job("job", {}, {})
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(usd=usd)})
    provider = MeteredProvider(
        inner,
        guard,
        StopSignal(),
        PRICES,
        model=None,
        variant="v",
        task_id="t",
        run_key="job/v/t",
        max_tokens=100,
    )
    return provider, ledger


def test_metering_caps_each_apis_output_tokens_and_settles_stated_usage(tmp_path: Path) -> None:
    answer = ProviderResponse(
        body="{}",
        model="claude-sonnet-4-20250514",
        usage={"input_tokens": 10, "output_tokens": 5},
    )
    inner = _Answer(answer)
    provider, ledger = metered(tmp_path, inner)
    provider.forward(call("messages", {"model": "claude-sonnet-4", "max_tokens": 5000}))
    provider.forward(call("responses", {"model": "gpt-4.1-mini", "input": "x"}))
    assert inner.sent[0].body["max_tokens"] == 100
    assert inner.sent[0].request["max_tokens"] == 5000  # the program's request is kept apart
    assert inner.sent[1].body["max_output_tokens"] == 100
    assert provider.charged.tokens_in == 20 and provider.charged.tokens_out == 10
    ledger.close()


def test_an_answer_without_usage_is_settled_at_its_reservation(tmp_path: Path) -> None:
    provider, ledger = metered(tmp_path, _Answer(ProviderResponse(body="data: [DONE]\n\n")))
    provider.forward(call("chat_completions", {"model": "gpt-4.1-mini", "messages": []}))
    assert provider.charged.tokens_out == 100 and provider.charged.usd > 0  # never zero
    ledger.close()


def test_a_refused_reservation_forwards_nothing(tmp_path: Path) -> None:
    inner = _Answer(ProviderResponse(body="{}"))
    provider, ledger = metered(tmp_path, inner, usd=0.0000001)
    served = provider.forward(call("messages", {"model": "claude-sonnet-4", "max_tokens": 9}))
    assert served.body is None and served.error is not None
    # more than the whole ceiling: refused alone, never forwarded
    assert served.error["class"] == "CallRefused" and inner.sent == []
    assert provider.charged == Amount()
    ledger.close()


def test_replay_serves_by_canonical_body_and_names_the_first_differing_field() -> None:
    recorded = {
        "index": 3,
        "tool": "model",
        "api": "messages",
        "request": {"model": "c", "messages": [{"role": "user", "content": "hi"}]},
        "body": "RAW",
        "body_encoding": "text",
        "http_status": 200,
        "model": "c-1",
    }
    same = ReplayProvider([recorded]).forward(
        call("messages", {"messages": [{"content": "hi", "role": "user"}], "model": "c"})
    )
    assert same.body == "RAW" and same.error is None and same.model == "c-1"
    other = ReplayProvider([recorded]).forward(
        call("messages", {"model": "c", "messages": [{"role": "user", "content": "bye"}]})
    )
    assert other.body is None and other.error is not None
    assert "first differing field messages[0].content" in other.error["message"]
    assert "differs from its recording" in other.error["message"]
    wrong_api = ReplayProvider([recorded]).forward(call("responses", dict(recorded["request"])))
    assert "responses request" in str(wrong_api.error)
    past = ReplayProvider([]).forward(call("messages", {}))
    assert "unrecorded" in str(past.error)


def test_first_differing_field_paths() -> None:
    assert first_differing_field({"a": 1}, {"a": 1}) is None
    assert first_differing_field({"a": [1, 2]}, {"a": [1]})[0] == "a[1]"
    assert first_differing_field({"a": {"b": 1}}, {"a": {"b": 2}})[:1] == ("a.b",)
