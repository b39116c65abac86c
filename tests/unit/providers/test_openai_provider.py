"""The `openai` provider against a fake OpenAI-compatible server on 127.0.0.1 (no other traffic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from runner.errors import InputError
from runner.providers.factory import provider_for
from runner.providers.metered import response_usd
from runner.providers.openai import OpenAIProvider
from runner.settings import Settings
from tests.support.fake_openai import MODEL_ID, FakeOpenAI, serve

REQUEST = {
    "model": "gpt-4.1-mini",
    "messages": [{"role": "user", "content": "hello 日本"}],
    "temperature": 0,
}
PRICES = {"gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6}}


def test_raw_body_model_from_response_usage_and_key_header() -> None:
    with serve(FakeOpenAI()) as fake:
        provider = OpenAIProvider(fake.url, "sk-test", attempts=2)
        served = provider.complete(REQUEST, "model")
        provider.close()
    assert served.error is None
    assert served.body == fake.bodies[0].decode()  # exact text, indentation included
    assert served.model == MODEL_ID  # from the response, not the request's alias
    assert served.tokens() == (100, 20)
    assert fake.requests[0] == REQUEST
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert response_usd(PRICES, served, "gpt-4.1-mini") == pytest.approx(
        (100 * 0.4 + 20 * 1.6) / 1e6
    )


def test_transient_503_is_retried_then_served() -> None:
    with serve(FakeOpenAI(fail_first=2)) as fake:
        served = OpenAIProvider(fake.url, attempts=3).complete(REQUEST, "model")
    assert served.error is None and served.model == MODEL_ID
    assert len(fake.requests) == 3


def test_transient_failure_after_all_attempts_is_an_error_turn() -> None:
    with serve(FakeOpenAI(fail_first=10)) as fake:
        served = OpenAIProvider(fake.url, attempts=2).complete(REQUEST, "model")
    assert served.body is None
    assert served.error is not None and served.error["class"] == "ProviderUnavailable"
    assert "503" in served.error["message"] and len(fake.requests) == 2


def test_permanent_http_error_is_reported_at_once() -> None:
    with serve(FakeOpenAI(status=401)) as fake:
        served = OpenAIProvider(fake.url, attempts=4).complete(REQUEST, "model")
    assert served.error is not None and served.error["class"] == "ProviderHTTPError"
    assert "HTTP 401" in served.error["message"] and "nope" in served.error["message"]
    assert len(fake.requests) == 1  # not retried


def test_connection_refused_is_an_error_turn_not_an_exception() -> None:
    with serve(FakeOpenAI()) as fake:
        url = fake.url
    served = OpenAIProvider(url, attempts=2).complete(REQUEST, "model")  # server gone
    assert served.error is not None and served.error["class"] == "ProviderUnavailable"


def test_default_model_fills_a_request_without_one() -> None:
    with serve(FakeOpenAI()) as fake:
        request = {k: v for k, v in REQUEST.items() if k != "model"}
        OpenAIProvider(fake.url, model="gpt-4.1-nano").complete(request, "user")
        missing = OpenAIProvider(fake.url).complete(request, "model")
    assert fake.requests[0]["model"] == "gpt-4.1-nano"
    assert missing.error is not None and len(fake.requests) == 1


def test_settings_win_over_environment_and_environment_is_the_fallback() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "env-key"}
    settings = Settings(openai_base_url="http://127.0.0.1:1/v1", openai_api_key=SecretStr("s-key"))
    provider = OpenAIProvider.from_settings(settings, environ=env)
    assert provider.base_url == "http://127.0.0.1:1/v1"
    assert provider._client.headers["Authorization"] == "Bearer s-key"
    fallback = OpenAIProvider.from_settings(None, environ=env, model="m")
    assert fallback.base_url == "http://127.0.0.1:9/v1" and fallback.model == "m"
    assert fallback._client.headers["Authorization"] == "Bearer env-key"
    with pytest.raises(InputError, match="openai_base_url"):
        OpenAIProvider("ftp://x")
    assert "s-key" not in repr(settings)


def test_provider_for_builds_openai_from_the_workflow_model_block(tmp_path: Path) -> None:
    with serve(FakeOpenAI()) as fake:
        provider = provider_for(
            {"provider": "openai", "name": "gpt-4.1-mini"},
            settings=Settings(openai_base_url=fake.url),
        )
        assert provider is not None and provider.name == "openai"
        served = provider.complete({"messages": REQUEST["messages"]}, "model")
    assert json.loads(served.body or "")["model"] == MODEL_ID
    assert fake.requests[0]["model"] == "gpt-4.1-mini"


def test_unpriced_models_give_none_not_zero() -> None:
    with serve(FakeOpenAI()) as fake:
        served = OpenAIProvider(fake.url).complete(REQUEST, "model")
    assert response_usd({}, served, "gpt-4.1-mini") is None


def test_an_agent_turns_errors_name_the_provider_never_the_url_or_the_key() -> None:
    """Credentials in the base URL and a key echoed in a 401 stay on the host."""
    key = "sk-proj-unit-ECHOEDKEY-5150"

    def echo(headers: dict[str, str]) -> bytes:
        sent = headers.get("Authorization", "")
        return json.dumps({"error": {"message": f"bad key {sent}", "code": "invalid"}}).encode()

    with serve(FakeOpenAI(status=401, error_body=echo)) as fake:
        served = OpenAIProvider(fake.url, key, attempts=1).complete(REQUEST, "model")
    assert served.error is not None and served.error["class"] == "ProviderHTTPError"
    assert key not in served.error["message"] and "bad key" in served.error["message"]
    assert served.error["message"].startswith("openai: HTTP 401")
    with serve(FakeOpenAI()) as fake:
        gone = fake.url.replace("http://", "http://ops:pw-in-the-url@")
    down = OpenAIProvider(gone, key, attempts=1).complete(REQUEST, "model")
    assert down.error is not None and down.error["class"] == "ProviderUnavailable"
    message = down.error["message"]
    assert message.startswith("openai: ") and "pw-in-the-url" not in message
    assert gone.split("@")[1] not in message and "ops:" not in message
