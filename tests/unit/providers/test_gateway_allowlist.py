"""The gateway allow-list: real SDK requests pass, the rest is refused.

The accepted requests are built by the official SDKs themselves (``openai``, ``anthropic``,
``openai-agents``; an httpx mock transport captures each body, nothing is sent), so the list
is held to what programs really send; the refused ones are the review's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from runner.episode import gatewayhost
from runner.providers.allowlist import FORCED, NotInert, check_request

API_OF = {"/chat/completions": "chat_completions", "/responses": "responses"}


def _captured(call: Callable[[Callable[[Any], Any]], Any], answer: dict[str, Any]) -> list[Any]:
    """Paths, bodies and headers of the requests ``call`` makes through a capturing transport.

    ``call`` gets ``transport(module)``: a mock transport of ``module`` (``httpx``; the
    ``anthropic`` SDK uses its fork ``httpx2``) that records each request and answers
    ``answer``.
    """
    seen: list[Any] = []

    def transport(module: Any) -> Any:
        def handler(request: Any) -> Any:
            seen.append((request.url.path, json.loads(request.content), dict(request.headers)))
            return module.Response(200, json=answer)

        return module.MockTransport(handler)

    call(transport)
    return seen


CHAT_ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
MESSAGE_ANSWER = {
    "id": "m",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [
        {"type": "text", "text": "ok"},
        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def _openai_calls(transport: Callable[[Any], Any]) -> None:
    import openai

    client = httpx.Client(transport=transport(httpx))
    api = openai.OpenAI(api_key="x", base_url="http://gw/v1", http_client=client)
    api.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ],
        tools=[TOOL],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "f"}},
        temperature=0,
        max_completion_tokens=100,
        response_format={"type": "json_object"},
        seed=1,
        store=False,
        reasoning_effort="low",
        parallel_tool_calls=False,
    )


def _responses_calls(transport: Callable[[Any], Any]) -> None:
    import openai

    client = httpx.Client(transport=transport(httpx))
    api = openai.OpenAI(api_key="x", base_url="http://gw/v1", http_client=client)
    api.responses.create(
        model="gpt-4o",
        instructions="be brief",
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "thought"}],
                "encrypted_content": "gAAAA",
            },
        ],
        tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        include=["reasoning.encrypted_content"],
        reasoning={"effort": "low", "summary": "auto"},
        text={"format": {"type": "text"}},
        max_output_tokens=100,
        store=False,
        truncation="auto",
    )
    # an answer's output items passed back as the SDK dumps them
    first = api.responses.create(model="gpt-4o", input="q")
    api.responses.create(
        model="gpt-4o",
        input=[{"role": "user", "content": "q"}, *[i.model_dump() for i in first.output]],  # type: ignore[list-item]
    )


def _agents_calls(transport: Callable[[Any], Any]) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool

    @function_tool
    def search(query: str) -> str:
        """Search."""
        return "kb-1"

    api = openai.AsyncOpenAI(
        api_key="x",
        base_url="http://gw/v1",
        http_client=httpx.AsyncClient(transport=transport(httpx)),
    )
    agent = Agent(
        name="a",
        instructions="be brief",
        tools=[search],
        model=OpenAIResponsesModel(model="gpt-4o", openai_client=api),
    )
    Runner.run_sync(agent, "hello", run_config=RunConfig(tracing_disabled=True))


def _anthropic_calls(transport: Callable[[Any], Any]) -> None:
    import anthropic
    import httpx2

    client = httpx2.Client(transport=transport(httpx2))
    api = anthropic.Anthropic(api_key="x", base_url="http://gw", http_client=client)
    api.messages.create(
        model="claude-sonnet-4-20250514",
        max_tokens=2048,
        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "x"}],
                    }
                ],
            },
        ],
        tools=[{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        tool_choice={"type": "auto"},
        thinking={"type": "enabled", "budget_tokens": 1024},
        stop_sequences=["END"],
        metadata={"user_id": "u"},
    )
    # an answer's blocks passed back as the SDK dumps them (tests/fixtures/frameworks)
    first = api.messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "q"}]
    )
    api.messages.create(
        model="m",
        max_tokens=64,
        messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x"}],
            },
        ],
    )


RESPONSE_ANSWER = {
    "id": "r",
    "object": "response",
    "created_at": 0,
    "model": "gpt-4o",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


@pytest.mark.parametrize(
    ("calls", "answer"),
    [
        (_openai_calls, CHAT_ANSWER),
        (_responses_calls, RESPONSE_ANSWER),
        (_agents_calls, RESPONSE_ANSWER),
        (_anthropic_calls, MESSAGE_ANSWER),
    ],
    ids=["chat", "responses", "agents", "messages"],
)
def test_what_the_official_sdks_send_is_inert(calls: Any, answer: dict[str, Any]) -> None:
    seen = _captured(calls, answer)
    assert seen
    for path, body, headers in seen:
        api = "messages" if path.endswith("/messages") else API_OF[path.removeprefix("/v1")]
        passed = {k: v for k, v in headers.items() if k in gatewayhost.PASSED_HEADERS}
        check_request(api, body, passed)


def _refused(api: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> NotInert:
    with pytest.raises(NotInert) as caught:
        check_request(api, body, headers or {})
    return caught.value


USER = {"role": "user", "content": "hi"}
REFUSED = [
    ("responses", {"tools": [{"type": "mcp", "server_url": "https://e.example"}]}, "tools[0].type"),
    ("responses", {"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ("responses", {"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}, "tools[0].type"),
    ("responses", {"tool_choice": {"type": "mcp", "server_label": "x"}}, "tool_choice.type"),
    ("responses", {"previous_response_id": "resp_1"}, "previous_response_id"),
    ("responses", {"conversation": {"id": "conv_1"}}, "conversation"),
    ("responses", {"prompt": {"id": "pmpt_1"}}, "prompt"),
    ("responses", {"background": True}, "background"),
    ("responses", {"store": True}, "store"),
    ("responses", {"include": ["file_search_call.results"]}, "include[0]"),
    ("responses", {"input": [{"type": "item_reference", "id": "m"}]}, "input[0].type"),
    ("responses", {"input": [{"type": "web_search_call", "id": "w"}]}, "input[0].type"),
    ("responses", {"input": [{"type": "mcp_call", "id": "w"}]}, "input[0].type"),
    ("responses", {"input": [{"type": "reasoning", "id": "rs", "summary": []}]}, "input[0]."),
    (
        "responses",
        {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
        "input[0].content[0].type",
    ),
    (
        "responses",
        {
            "input": [
                {
                    "type": "function_call_output",
                    "call_id": "c",
                    "output": [{"type": "input_image", "image_url": "https://e.example/i.png"}],
                }
            ]
        },
        "input[0].output[0].type",
    ),
    ("chat_completions", {"web_search_options": {}}, "web_search_options"),
    ("chat_completions", {"audio": {"voice": "alloy"}}, "audio"),
    ("chat_completions", {"modalities": ["text", "audio"]}, "modalities"),
    ("chat_completions", {"prediction": {"type": "content", "content": "x"}}, "prediction"),
    ("chat_completions", {"service_tier": "priority"}, "service_tier"),
    ("chat_completions", {"messages": [{"role": "assistant", "audio": {"id": "a"}}]}, "messages"),
    (
        "chat_completions",
        {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]},
        "messages[0].content[0].type",
    ),
    (
        "chat_completions",
        {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
        "messages[0].content[0].type",
    ),
    ("chat_completions", {"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0].type"),
    ("messages", {"mcp_servers": [{"type": "url", "url": "https://e.example"}]}, "mcp_servers"),
    ("messages", {"container": "c"}, "container"),
    ("messages", {"tools": [{"type": "web_search_20250305", "name": "w"}]}, "tools[0].type"),
    ("messages", {"tools": [{"type": "code_execution_20250522", "name": "c"}]}, "tools[0].type"),
    ("messages", {"speed": "fast"}, "speed"),
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        "messages[0].content[0].type",
    ),
    (
        "messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": [{"type": "document", "source": {}}],
                        }
                    ],
                }
            ]
        },
        "messages[0].content[0].content[0].type",
    ),
    (
        "messages",
        {"messages": [{"role": "assistant", "content": [{"type": "server_tool_use"}]}]},
        "messages[0].content[0].type",
    ),
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "src": 1}]}]},
        "messages[0].content[0].src",
    ),
]


@pytest.mark.parametrize(("api", "extra", "param"), REFUSED)
def test_provider_tools_media_stored_state_and_unknown_fields_are_refused(
    api: str, extra: dict[str, Any], param: str
) -> None:
    base = {
        "chat_completions": {"model": "m", "messages": [USER]},
        "responses": {"model": "m", "input": "hi"},
        "messages": {"model": "m", "max_tokens": 8, "messages": [USER]},
    }[api]
    refused = _refused(api, {**base, **extra})
    assert refused.param.startswith(param), refused
    assert refused.kind in ("provider_tool", "media", "stored_state", "billing", "unknown")


def test_beta_headers_and_odd_versions_are_refused() -> None:
    body = {"model": "m", "max_tokens": 8, "messages": [USER]}
    assert _refused("messages", body, {"anthropic-beta": "files-api-2025-04-14"}).kind == (
        "beta_header"
    )
    assert _refused("messages", body, {"anthropic-version": "latest\r\nx: y"}).param == (
        "header anthropic-version"
    )
    chat = {"model": "m", "messages": [USER]}
    assert _refused("chat_completions", chat, {"openai-beta": "assistants=v2"}).kind == (
        "beta_header"
    )


def test_the_host_refuses_outside_reproduce_and_forwards_responses_unstored() -> None:
    workflow = {
        "steps": [{"id": "p", "program": "m:f", "model": {"provider": "openai", "name": "x"}}]
    }
    message = {
        "id": "g0",
        "step_id": "p",
        "api": "responses",
        "path": "/v1/responses",
        "request": {"model": "m", "input": "hi", "previous_response_id": "resp_1"},
    }
    with pytest.raises(gatewayhost.GatewayRequestRefused) as caught:
        gatewayhost.parse_request(message, workflow, reproduce=False)
    answer = gatewayhost.invalid("g0", caught.value)
    assert answer["status"] == 400 and answer["body"] is None
    assert answer["error"]["class"] == "GatewayRequestRefused"
    assert answer["error"]["param"] == "previous_response_id"
    # reproduce forwards nothing: the request is matched as recorded
    replayed = gatewayhost.parse_request(message, workflow, reproduce=True)
    assert replayed.body == message["request"]
    # record is live and unsandboxed by design: what production sends is what it records
    live = gatewayhost.parse_request(message, workflow, reproduce=False, live=True)
    assert live.body["previous_response_id"] == "resp_1"
    with pytest.raises(gatewayhost.GatewayRequestRefused, match="undeclared_provider"):
        gatewayhost.parse_request(
            {**message, "api": "messages"}, workflow, reproduce=False, live=True
        )
    plain = {**message, "request": {"model": "m", "input": "hi"}}
    call = gatewayhost.parse_request(plain, workflow, reproduce=False)
    assert call.body == {"model": "x", "input": "hi", **FORCED["responses"]}
    assert call.request == {"model": "m", "input": "hi"}  # what the trace keeps


def test_the_host_refuses_a_request_nested_past_what_a_record_can_hold() -> None:
    workflow = {"steps": [{"id": "p", "program": "m:f", "model": None}]}
    deep: Any = "x"
    for _ in range(64):
        deep = [deep]
    message = {
        "id": "g0",
        "step_id": "p",
        "api": "chat_completions",
        "path": "/v1/chat/completions",
        "request": {"model": "m", "messages": [USER], "metadata": deep},
    }
    with pytest.raises(gatewayhost.GatewayRequestError, match="nested deeper than 64"):
        gatewayhost.parse_request(message, workflow, reproduce=False)


def test_a_model_that_searches_the_web_on_every_call_is_refused() -> None:
    workflow = {"steps": [{"id": "p", "program": "m:f", "model": {"provider": "openai"}}]}
    message = {
        "id": "g0",
        "step_id": "p",
        "api": "chat_completions",
        "path": "/v1/chat/completions",
        "request": {"model": "gpt-4o-mini-search-preview", "messages": [USER]},
    }
    with pytest.raises(gatewayhost.GatewayRequestRefused, match="searches the web"):
        gatewayhost.parse_request(message, workflow, reproduce=False)
    # the step's own model name is what is forwarded, and so what is checked
    named = {
        "steps": [{"id": "p", "program": "m:f", "model": {"provider": "openai", "name": "gpt-4.1"}}]
    }
    assert gatewayhost.parse_request(message, named, reproduce=False).body["model"] == "gpt-4.1"
