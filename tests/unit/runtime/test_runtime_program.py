"""Program steps and the model gateway inside the runtime, in process (no container).

The gateway is a real HTTP server on 127.0.0.1 that the test starts; its channel to the host is
replaced by a function, so each test sees exactly what the host would be sent and answers it.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from runner import sdk
from runner.errors import CapabilityDenied
from runner.runtime.egress import audit
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.gateway import PLACEHOLDER_KEY, Gateway, error_body
from runner.runtime.steps.program import ProgramStep
from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "program"))
import program_tools


class Host:
    """What the runtime sends; answers ``gateway_request`` with ``answer``."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.answer = answer or {"status": 200, "body": '{"ok": true}', "model": "m-1"}
        self.lock = threading.Lock()

    def send(self, type_: str, **fields: Any) -> None:
        with self.lock:
            self.messages.append((type_, fields))

    def request_api(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(fields)
        return dict(self.answer)

    def calls(self) -> list[dict[str, Any]]:
        return [f["record"] for k, f in self.messages if k == "call"]


def caller_for(host: Host, observations: list[dict[str, Any]] | None = None) -> Caller:
    return Caller(
        host.send,
        lambda fields: {},
        "shadow",
        ObservationStore(observations),
        TraceStore(None),
        Clock(1767225600.0, 1.0),
        request_api=host.request_api,
    )


@pytest.fixture
def gateway_of() -> Iterator[Any]:
    made: list[Gateway] = []

    def make(host: Host, step: str | None = "agent") -> Gateway:
        notes = lambda kind, **f: host.send("gateway_note", kind=kind, **f)  # noqa: E731
        gateway = Gateway(caller_for(host), notes)
        gateway.start()
        if step:
            gateway.activate(step)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.close()


def post(gateway: Gateway, path: str, body: bytes, method: str = "POST") -> tuple[int, Any, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{gateway.port}{path}", data=body, method=method
    )
    request.add_header("Content-Type", "application/json")
    request.add_header("anthropic-version", "2023-06-01")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def test_a_request_goes_to_the_host_and_its_answer_back_as_it_came(gateway_of: Any) -> None:
    stream = 'data: {"choices": []}\n\ndata: [DONE]\n\n'
    host = Host({"status": 200, "body": stream, "content_type": "text/event-stream"})
    gateway = gateway_of(host)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    status, headers, text = post(gateway, "/v1/chat/completions", json.dumps(body).encode())
    assert (status, text) == (200, stream)
    assert headers["Content-Type"] == "text/event-stream"
    sent = host.requests[0]
    assert sent["api"] == "chat_completions" and sent["request"] == body
    assert sent["step_id"] == "agent" and sent["index"] == 0
    record = host.calls()[0]
    assert record["tool"] == "model" and record["api"] == "chat_completions"
    assert record["request"] == body and record["body"] == stream
    status, _, _ = post(gateway, "/v1/messages?beta=true", b'{"model": "c"}')
    assert host.requests[1]["api"] == "messages"
    assert host.requests[1]["path"] == "/v1/messages?beta=true"
    assert host.requests[1]["headers"] == {"anthropic-version": "2023-06-01"}


@pytest.mark.parametrize(
    ("path", "api", "shape"),
    [("/v1/chat/completions", "chat", "openai"), ("/v1/messages", "messages", "anthropic")],
)
def test_a_refusal_reaches_the_program_as_the_apis_own_error(
    gateway_of: Any, path: str, api: str, shape: str
) -> None:
    refusal = {"status": None, "body": None, "error": {"class": "CeilingReached", "message": "x"}}
    host = Host(refusal)
    status, headers, text = post(gateway_of(host), path, b'{"model": "m"}')
    assert status == 429 and headers["x-should-retry"] == "false"
    error = json.loads(text)
    if shape == "openai":
        assert error["error"]["type"] == "insufficient_quota"
    else:
        assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert host.calls()[0]["error"]["class"] == "CeilingReached"


def test_what_the_gateway_answers_itself_is_noted_and_never_sent(gateway_of: Any) -> None:
    host = Host()
    gateway = gateway_of(host)
    assert post(gateway, "/v1/traces/ingest", b'{"data": []}')[0] == 204
    assert post(gateway, "/v1/files", b"{}")[0] == 404
    status, _, text = post(gateway, "/v1/chat/completions", b'{"a": NaN}')
    assert status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"
    assert post(gateway, "/v1/responses", b'{"a": 1, "a": 2}')[0] == 400
    assert post(gateway, "/v1/responses", b"[]")[0] == 400
    assert post(gateway, "/v1/chat/completions", b"", method="GET")[0] == 405
    assert host.requests == []
    kinds = [f["kind"] for k, f in host.messages if k == "gateway_note"]
    assert kinds == [
        "tracing_ingest",
        "unsupported",
        "invalid_request",
        "invalid_request",
        "invalid_request",
        "unsupported",
    ]


def test_the_requests_next_to_model_calls_go_to_the_host_as_their_apis(gateway_of: Any) -> None:
    host = Host()
    gateway = gateway_of(host)
    for path in ("/v1/embeddings", "/v1/moderations", "/v1/messages/count_tokens"):
        assert post(gateway, path, b'{"model": "m", "input": "x"}')[0] == 200
    assert post(gateway, "/v1/responses/resp_1", b"", method="GET")[0] == 200
    assert [(r["api"], r["path"]) for r in host.requests] == [
        ("embeddings", "/v1/embeddings"),
        ("moderations", "/v1/moderations"),
        ("count_tokens", "/v1/messages/count_tokens"),
        ("responses_retrieve", "/v1/responses/resp_1"),
    ]
    assert host.requests[-1]["request"] == {"response_id": "resp_1"}
    assert post(gateway, "/v1/responses/resp_1", b"{}")[0] == 405  # retrieval is a GET
    assert post(gateway, "/v1/responses/resp_1/input_items", b"", method="GET")[0] == 404
    assert post(gateway, "/v1/responses/resp_1?stream=true", b"", method="GET")[0] == 400
    assert post(gateway, "/v1/responses/a%2F..", b"", method="GET")[0] == 404
    assert len(host.requests) == 4


def test_requests_outside_a_program_step_are_refused(gateway_of: Any) -> None:
    host = Host()
    assert post(gateway_of(host, step=None), "/v1/messages", b"{}")[0] == 503
    assert host.requests == []


def test_the_environment_points_the_sdks_at_the_gateway_with_placeholder_keys(
    gateway_of: Any,
) -> None:
    env = gateway_of(Host()).environment()
    assert env["OPENAI_BASE_URL"].startswith("http://127.0.0.1:") and env[
        "OPENAI_BASE_URL"
    ].endswith("/v1")
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY
    assert not PLACEHOLDER_KEY.startswith("sk-")
    assert env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"


def test_error_body_shapes() -> None:
    assert json.loads(error_body("messages", 404, "x"))["error"]["type"] == "not_found_error"
    assert json.loads(error_body("responses", 502, "x"))["error"]["type"] == "server_error"


def test_the_gateway_is_not_egress_other_loopback_ports_are(monkeypatch: Any) -> None:
    monkeypatch.setitem(audit._state, "gateway", ("127.0.0.1", 4242))
    assert audit._is_gateway("127.0.0.1", "127.0.0.1", 4242)
    assert audit._is_gateway("localhost", None, 4242)
    assert not audit._is_gateway("127.0.0.1", "127.0.0.1", 4243)
    assert not audit._is_gateway("10.0.0.1", "10.0.0.1", 4242)
    assert not audit._is_gateway("localhost", "10.0.0.1", 4242)


def test_call_records_are_sent_in_index_order_whatever_the_finishing_order() -> None:
    host = Host()
    caller = caller_for(host)
    first, second = caller._next(), caller._next()
    caller._finish({"index": second[0], "tool": "b"}, 0.0, None)
    assert host.calls() == []  # waits for call 0
    caller._finish({"index": first[0], "tool": "a"}, 0.0, None)
    assert [r["index"] for r in host.calls()] == [0, 1]
    caller._next()
    caller._next()
    caller._finish({"index": 3, "tool": "d"}, 0.0, None)
    caller.flush()  # call 2 never ended: what waits is sent at the end
    assert [r["index"] for r in host.calls()] == [0, 1, 3]


def _registry(*tools: tuple[Any, str]) -> RuntimeRegistry:
    entries = []
    for func, disposition in tools:
        definition = sdk.tool_def(func)
        assert definition is not None
        entry = definition.manifest_entry()
        entries.append(RuntimeTool(entry, disposition, func if disposition == "execute" else None))
    return RuntimeRegistry(entries, {"name": "shadow"})


def test_a_programs_direct_tool_calls_obey_their_effect_class() -> None:
    host = Host()
    registry = _registry((program_tools.kb_search, "recorded"), (program_tools.upper, "execute"))
    observation = {
        "tool": "kb.search",
        "args": {"query": "q"},
        "body": '{"hits": [1]}',
        "body_encoding": "text",
    }
    caller = caller_for(host, [observation])
    step = {
        "id": "agent",
        "program": "stdlib_agent:tools_only",
        "tools": ["kb.search", "text.upper"],
    }
    with sdk.replay_context(registry.execute_ids):
        output = ProgramStep(step, registry, caller, {"question": "q"}).run()
    assert output == {"hits": {"hits": [1]}, "shout": "Q"}
    calls = host.calls()
    assert [(c["tool"], c["source"]) for c in calls] == [
        ("kb.search", "observation"),
        ("text.upper", "executed"),
    ]
    assert calls[1]["args"] == {"text": "q"}  # a positional argument recorded by name


def test_an_undeclared_tool_is_denied_and_named_even_when_the_program_catches_it() -> None:
    host = Host()
    registry = _registry((program_tools.upper, "execute"), (program_tools.count, "execute"))
    step = {"id": "agent", "program": "stdlib_agent:undeclared", "tools": ["text.upper"]}
    with sdk.replay_context(registry.execute_ids), pytest.raises(CapabilityDenied) as caught:
        ProgramStep(step, registry, caller_for(host), {}).run()
    assert caught.value.fields["tool_id"] == "text.count"
    record = host.calls()[0]
    assert record["tool"] == "text.count" and record["error"]["class"].endswith("CapabilityDenied")
    # outside a program step the tool is called directly again
    assert program_tools.count("abcd") == 4


def test_a_deep_request_is_a_400_and_a_failing_handler_a_500_never_a_silent_thread(
    gateway_of: Any, monkeypatch: Any
) -> None:
    """Nesting bounded for the record; no request goes unanswered."""
    host = Host()
    gateway = gateway_of(host)
    for depth in (65, 1_000, 200_000):
        body = b'{"model": "m", "x": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
        status, _headers, text = post(gateway, "/v1/chat/completions", body)
        assert status == 400 and "nested too deeply" in text, (depth, text[:200])
    ok = b'{"model": "m", "x": ' + b"[" * 63 + b"]" * 63 + b"}"
    assert post(gateway, "/v1/chat/completions", ok)[0] == 200
    assert len(host.requests) == 1

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the gateway")

    monkeypatch.setattr(gateway, "answer", broken)
    status, _headers, text = post(gateway, "/v1/chat/completions", ok)
    assert status == 500 and "RuntimeError" in text
    assert ("gateway_note", {"kind": "gateway_error", "method": "POST"}) in [
        (k, {x: f[x] for x in ("kind", "method")}) for k, f in host.messages if k == "gateway_note"
    ]


PYDANTIC_AGENT = """
import pydantic
from runner.sdk import Effect, tool


class Weather(pydantic.BaseModel):
    city: str
    temperature_c: float


@tool("w.get", effect=Effect.READ, description="The weather of a city.")
def weather(city: str) -> Weather:
    raise RuntimeError("a read tool is served from the recordings, it never runs here")


@tool("w.make", effect=Effect.PURE, description="A weather value.")
def make(city: str) -> "Weather":
    return Weather(city=city, temperature_c=3.0)


def run(task_input):
    served, made = weather(city="Oslo"), make(city="Rome")
    return {"served": type(served).__name__, "made": type(made).__name__, "city": served.city}
"""


def test_a_tool_declared_to_return_a_model_gives_the_program_a_model_served_or_executed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyd_agent.py").write_text(PYDANTIC_AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import pyd_agent

    host = Host()
    registry = _registry((pyd_agent.weather, "recorded"), (pyd_agent.make, "execute"))
    observation = {
        "tool": "w.get",
        "args": {"city": "Oslo"},
        "body": '{"city":"Oslo","temperature_c":21.5}',
        "body_encoding": "text",
    }
    step = {"id": "agent", "program": "pyd_agent:run", "tools": ["w.get", "w.make"]}
    with sdk.replay_context(registry.execute_ids):
        output = ProgramStep(step, registry, caller_for(host, [observation]), {}).run()
    assert output == {"served": "Weather", "made": "Weather", "city": "Oslo"}
    made = host.calls()[1]
    assert made["encoding"] == "json_form"
    assert json.loads(made["body"]) == {"city": "Rome", "temperature_c": 3.0}
    sys.modules.pop("pyd_agent", None)
