"""`runner.sdk.record` captures the official SDKs' model calls over httpx.

Every server is a loopback fake the test starts (tests/support/fake_openai.py,
tests/support/fake_anthropic.py); nothing leaves the machine. Each model call line must hold
the request body the SDK sent, the body the fake sent byte for byte (a stream's whole event
stream) and the model id read from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from runner import sdk
from runner.sdk.recorder import TRACING_ENV
from runner.tracetools.lint import lint_trace
from runner.tracetools.reader import load_trace
from tests.support import fake_anthropic, fake_openai, fake_streaming
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_streaming import Streamer
from tests.support.paths import REPO

KB_TOOL = {
    "type": "function",
    "function": {
        "name": "kb__search",
        "description": "Search the knowledge base.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


@sdk.tool("kb.search", effect=sdk.Effect.READ, description="Search the knowledge base.")
def kb_search(query: str) -> dict:
    return {"hits": [f"article about {query}"]}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _models(path: Path) -> list[dict[str, Any]]:
    return [line for line in _lines(path) if line.get("tool") == "model"]


def _raw(record: dict[str, Any]) -> bytes:
    assert record["body_encoding"] == "text"
    return record["body"].encode("utf-8")


def _chat_loop(client: openai.OpenAI) -> str:
    messages: list[Any] = [{"role": "user", "content": "How do I reset my password?"}]
    for _ in range(3):
        reply = client.chat.completions.create(
            model="gpt-4.1-mini", messages=messages, tools=[KB_TOOL]
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = kb_search(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    raise AssertionError("no final answer")


@pytest.mark.parametrize("how", ["http_client", "default_transport", "legacy_httpx"])
def test_chat_completions_with_tool_calls_are_recorded_raw(tmp_path: Path, how: str) -> None:
    trace = tmp_path / "chat.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace, task_id="chat-1") as rec:
        options: dict[str, Any] = {"base_url": fake.url, "api_key": "sk-test-not-a-key"}
        if how == "http_client":
            options["http_client"] = rec.http_client()
        elif how == "legacy_httpx":
            options["http_client"] = rec.http_client(library="httpx")
        assert _chat_loop(openai.OpenAI(**options)) == "done"
    lines = _lines(trace)
    assert [line.get("tool") for line in lines[1:-1]] == ["model", "kb.search", "model"]
    models = _models(trace)
    assert [_raw(m) for m in models] == fake.bodies  # byte for byte what the server sent
    assert [m["request"] for m in models] == fake.requests
    for record in models:
        assert (record["api"], record["http_status"]) == ("chat_completions", 200)
        assert (record["model"], record["model_source"]) == (fake_openai.MODEL_ID, "response")
        assert record["meta"]["url"].endswith("/v1/chat/completions")
    assert models[1]["request"]["messages"][-1]["role"] == "tool"
    assert lines[2]["body"] == json.dumps(
        {"hits": ["article about password"]}, separators=(",", ":")
    )
    end = lines[-1]
    assert end["meter"]["tokens_in"] == 200 and end["meter"]["model_calls"] == 2
    assert load_trace(trace).end is not None
    assert lint_trace(trace).complete
    assert "sk-test-not-a-key" not in trace.read_text()


def test_a_chat_stream_is_passed_on_while_it_streams_and_recorded_whole(tmp_path: Path) -> None:
    trace = tmp_path / "stream.jsonl"
    fake = FakeOpenAI()
    server = Streamer(fake_streaming.openai_handler(fake))
    server.hold = True
    with fake_streaming.serve(server, "/v1"), sdk.record(trace) as rec:
        client = openai.OpenAI(
            base_url=server.url, api_key="sk-test", http_client=rec.http_client()
        )
        stream = client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "hi"}],
            tools=[KB_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        arguments = ""
        for position, chunk in enumerate(stream):
            if position == 0:
                server.release.set()  # the server sends the rest only now
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    arguments += (call.function.arguments if call.function else None) or ""
    assert not server.held_too_long, "the first event reached the caller only after the stream"
    assert json.loads(arguments) == {"query": "password"}
    (model,) = _models(trace)
    assert _raw(model) == fake.bodies[0] and model["body"].endswith("data: [DONE]\n\n")
    assert model["meta"]["stream"] is True and model["request"]["stream"] is True
    assert model["model"] == fake_openai.MODEL_ID
    assert model["usage"]["completion_tokens"] == 20
    assert "text/event-stream" in model["meta"]["content_type"]


def test_anthropic_messages_with_tool_use_and_streaming(tmp_path: Path) -> None:
    trace = tmp_path / "anthropic.jsonl"
    fake = FakeAnthropic()
    server = Streamer(fake_streaming.anthropic_handler(fake))
    tools = [
        {
            "name": "kb__search",
            "description": "Search the knowledge base.",
            "input_schema": KB_TOOL["function"]["parameters"],  # type: ignore[index]
        }
    ]
    with fake_streaming.serve(server), sdk.record(trace) as rec:
        client = anthropic.Anthropic(
            base_url=server.url, api_key="sk-ant-test", http_client=rec.http_client()
        )
        messages: list[Any] = [{"role": "user", "content": "How do I reset my password?"}]
        first = client.messages.create(
            model="claude-test-model", max_tokens=256, messages=messages, tools=tools
        )
        use = next(b for b in first.content if b.type == "tool_use")
        result = kb_search(**use.input)  # type: ignore[arg-type]
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": json.dumps(result)}
                ],
            },
        ]
        server.hold = True
        with client.messages.stream(
            model="claude-test-model", max_tokens=256, messages=messages, tools=tools
        ) as stream:
            text = ""
            for position, event in enumerate(stream):
                if position == 0:
                    server.release.set()
                if event.type == "text":
                    text += event.text
            final = stream.get_final_message()
    assert not server.held_too_long
    assert text == "done from claude" and final.stop_reason == "end_turn"
    lines = _lines(trace)
    assert [line.get("tool") for line in lines[1:-1]] == ["model", "kb.search", "model"]
    models = _models(trace)
    assert [_raw(m) for m in models] == fake.bodies
    assert [m["request"] for m in models] == fake.requests
    assert [m["api"] for m in models] == ["messages", "messages"]
    assert all(m["model"] == fake_anthropic.MODEL_ID for m in models)
    assert models[1]["meta"]["stream"] is True and "event: message_stop" in models[1]["body"]
    assert models[1]["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert lines[-1]["meter"]["tokens_in"] == 240


def test_async_clients_and_a_stream_closed_early(tmp_path: Path) -> None:
    trace = tmp_path / "async.jsonl"
    fake = FakeOpenAI()
    server = Streamer(fake_streaming.openai_handler(fake))

    async def main(rec: Any) -> str:
        client = openai.AsyncOpenAI(
            base_url=server.url, api_key="sk-test", http_client=rec.async_http_client()
        )
        reply = await client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "hi"}]
        )
        server.hold = True
        stream = await client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for _ in stream:
            break
        await stream.close()
        server.release.set()
        return str(reply.choices[0].message.content)

    with fake_streaming.serve(server, "/v1"), sdk.record(trace) as rec:
        assert asyncio.run(main(rec)) == "done"
    plain, streamed = _models(trace)
    assert _raw(plain) == fake.bodies[0]
    assert streamed["meta"]["incomplete"] is True and streamed["http_status"] == 200
    first_event = fake.bodies[1].split(b"\n\n")[0] + b"\n\n"
    assert _raw(streamed) == first_event  # what the caller read, nothing made up


def test_only_model_calls_are_recorded_and_the_rest_is_listed(tmp_path: Path) -> None:
    trace = tmp_path / "other.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace) as rec:
        client = rec.http_client()
        assert client.post(f"{fake.url}/files", content=b"x").status_code == 404
    lines = _lines(trace)
    assert len(lines) == 2  # run and end: no call line
    (entry,) = lines[-1]["outbound"]
    assert (entry["host"], entry["outcome"], entry["path"]) == (
        "127.0.0.1",
        "not_recorded",
        "/v1/files",
    )


# --- the OpenAI Agents SDK ------------------------------------------------------------------


@pytest.fixture
def agents_offline() -> Iterator[Any]:
    """The agents package with its tracing off (nothing may ever go to the vendor's host)."""
    import agents

    agents.set_tracing_disabled(True)
    yield agents
    agents.set_tracing_disabled(True)


def _support_agent(agents: Any, client: Any, api: str = "chat_completions") -> Any:
    @agents.function_tool
    def search_kb(query: str) -> str:
        """Search the knowledge base."""
        return json.dumps(kb_search(query=query))

    if api == "responses":
        model = agents.OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client)
    else:
        model = agents.OpenAIChatCompletionsModel(model="gpt-4.1-mini", openai_client=client)
    return agents.Agent(
        name="support",
        instructions="Answer from the knowledge base.",
        tools=[search_kb],
        model=model,
    )


@pytest.mark.parametrize(
    ("how", "api"),
    [
        ("async_http_client", "chat_completions"),
        ("default_transport", "chat_completions"),
        ("async_http_client", "responses"),
    ],
)
def test_an_agents_sdk_runner_with_function_tools(
    tmp_path: Path, agents_offline: Any, how: str, api: str
) -> None:
    agents = agents_offline
    trace = tmp_path / "agents.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace, task_id="agent-1") as rec:
        options: dict[str, Any] = {"base_url": fake.url, "api_key": "sk-test"}
        if how == "async_http_client":
            options["http_client"] = rec.async_http_client()
        agent = _support_agent(agents, openai.AsyncOpenAI(**options), api)
        result = agents.Runner.run_sync(agent, "How do I reset my password?")
    assert result.final_output == "done"
    lines = _lines(trace)
    # the SDK's own tool is the call (issue 27): its arguments and its raw result, recorded
    # once (the @tool it calls inside runs within it)
    assert [line.get("tool") for line in lines[1:-1]] == ["model", "search_kb", "model"]
    call = lines[2]
    assert call["args"] == {"query": "password"} and call["effect"] == "unsafe"
    assert json.loads(json.loads(call["body"])) == kb_search(query="password")
    models = _models(trace)
    assert [_raw(m) for m in models] == fake.bodies
    assert [m["request"] for m in models] == fake.requests
    tool = models[0]["request"]["tools"][0]
    assert (tool.get("function") or tool)["name"] == "search_kb"
    assert all(m["model"] == fake_openai.MODEL_ID and m["api"] == api for m in models)
    assert load_trace(trace).end is not None


class _Ingest:
    """A loopback stand-in for a tracing-ingest endpoint: counts what reaches it."""

    def __init__(self) -> None:
        self.hits = 0
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                ingest.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces/ingest"


def test_record_keeps_agents_tracing_on_the_machine(
    tmp_path: Path, agents_offline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor

    monkeypatch.delenv(TRACING_ENV, raising=False)

    agents = agents_offline
    ingest = _Ingest()
    exporter = BackendSpanExporter(api_key="sk-test", endpoint=ingest.url)
    processor = BatchTraceProcessor(exporter)
    agents.set_trace_processors([processor])
    trace = tmp_path / "traced.jsonl"
    seen_env: list[str | None] = []
    try:
        with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace) as rec:
            import os

            seen_env.append(os.environ.get(TRACING_ENV))
            agents.set_tracing_disabled(False)  # as if tracing had been on before recording
            agent = _support_agent(agents, openai.AsyncOpenAI(base_url=fake.url, api_key="sk-test"))
            assert agents.Runner.run_sync(agent, "reset?").final_output == "done"
            processor.force_flush()
            del rec
        processor.force_flush()  # and after the recording: still answered in this process
        ingest_after = exporter._client.post(ingest.url, json={"data": []})
    finally:
        agents.set_tracing_disabled(True)
        processor.shutdown()
        ingest.server.shutdown()
    assert seen_env == ["1"]
    assert ingest.hits == 0, "a tracing export reached the ingest endpoint"
    assert ingest_after.status_code == 204
    refused = [e for e in _lines(trace)[-1]["outbound"] if e["outcome"] == "refused"]
    assert refused and all(e["reason"] == "tracing_ingest" for e in refused)
    assert refused[0]["host"] == "127.0.0.1" and refused[0]["path"] == "/v1/traces/ingest"


def test_runner_sdk_and_record_work_without_any_http_library(tmp_path: Path) -> None:
    import subprocess
    import sys

    # -S: no site-packages, so no httpx, httpx2 or SDK at all; the checkout's runner only
    script = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from runner import sdk
import runner.sdk.recorder, runner.sdk.httpxrecord, runner.sdk.exchange
@sdk.tool("t.add", effect=sdk.Effect.PURE)
def add(a: int, b: int) -> int:
    return a + b
with sdk.record({str(tmp_path / "plain.jsonl")!r}) as rec:
    assert add(a=1, b=2) == 3
    try:
        rec.http_client()
    except ImportError as exc:
        print("no client:", exc)
assert not [m for m in sys.modules if m.split(".")[0] in ("httpx", "httpx2")]
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "no client: recording model calls needs httpx2 or httpx" in done.stdout
    assert done.stdout.strip().endswith("ok")
    assert _lines(tmp_path / "plain.jsonl")[1]["tool"] == "t.add"


@sdk.tool("summary.make", effect=sdk.Effect.READ, description="Summarise with a model.")
def summary_make(url: str) -> str:
    client = openai.OpenAI(base_url=url, api_key="sk-test")
    reply = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "sum up"}]
    )
    return str(reply.choices[0].message.content)


def test_a_tools_own_model_call_is_part_of_the_tool_and_capture_can_be_off(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "nested.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace) as rec:
        assert summary_make(url=fake.url) == "done"  # its HTTP belongs to the tool's call
        rec.set_output({"summary": "done"})
    lines = _lines(trace)
    assert [line.get("tool") for line in lines[1:-1]] == ["summary.make"]
    assert lines[-1]["output"] == {"summary": "done"}

    quiet = tmp_path / "quiet.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(quiet, capture_httpx=False) as rec:
        default = openai.OpenAI(base_url=fake.url, api_key="sk-test")
        explicit = openai.OpenAI(
            base_url=fake.url, api_key="sk-test", http_client=rec.http_client()
        )
        for client in (default, explicit):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        rec.set_output(object())  # no JSON form: its repr, never a TypeError (issue 27)
    (model,) = _models(quiet)
    end = json.loads(quiet.read_text(encoding="utf-8").splitlines()[-1])
    assert end["output"].startswith("<object object at")
    assert _raw(model) == fake.bodies[1]  # only the recorder's own client was recorded


def test_outside_a_recording_nothing_is_recorded_and_tracing_stays_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRACING_ENV, raising=False)
    trace = tmp_path / "before.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake:
        with sdk.record(trace) as rec:
            client = openai.OpenAI(base_url=fake.url, api_key="sk", http_client=rec.http_client())
        assert os.environ.get(TRACING_ENV) is None  # restored as it was before recording
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        import httpx2

        answered = httpx2.post(f"{fake.url}/traces/ingest", json={"data": []})
    assert _models(trace) == [] and len(fake.bodies) == 1
    assert answered.status_code == 204 and fake.requests == [fake.requests[0]]


def test_a_sync_stream_abandoned_mid_way_is_incomplete_not_an_error(tmp_path: Path) -> None:
    trace = tmp_path / "abandoned.jsonl"
    fake = FakeOpenAI()
    server = Streamer(fake_streaming.openai_handler(fake))
    server.hold = True
    with fake_streaming.serve(server, "/v1"), sdk.record(trace) as rec:
        client = rec.http_client()
        with client.stream(
            "POST",
            f"{server.url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        ) as response:
            chunks = response.iter_raw()
            first = next(chunks)
            chunks.close()  # the generator is dropped before the response is closed
        server.release.set()
    (model,) = _models(trace)
    assert "error" not in model and model["meta"]["incomplete"] is True
    assert _raw(model) == first


def test_embeddings_moderations_and_a_retrieval_are_recorded_like_model_calls(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "side.jsonl"
    with fake_openai.serve(FakeOpenAI()) as fake, sdk.record(trace) as rec:
        client = openai.OpenAI(
            base_url=fake.url, api_key="sk-test-not-a-key", http_client=rec.http_client()
        )
        vectors = client.embeddings.create(model="text-embedding-3-small", input="refund")
        client.moderations.create(input="refund")
        raw = rec.http_client().get(f"{fake.url}/responses/resp_1")  # the fake has no GET
    assert vectors.data[0].embedding == [0.25, -0.5, 0.0] and raw.status_code == 501
    models = _models(trace)
    assert [m["api"] for m in models] == ["embeddings", "moderations", "responses_retrieve"]
    assert [m["request"] for m in models[:2]] == fake.requests  # as the SDK sent them
    assert [_raw(m) for m in models[:2]] == fake.bodies  # byte for byte
    assert models[0]["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert models[2]["request"] == {"response_id": "resp_1"}
