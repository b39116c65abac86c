"""`import otel` across span families: the conventions table and its rules.

Public recordings (tests/fixtures/import/otel/*/SOURCE.md): any-agent's dumps of seven
frameworks (none imported before: ``call_llm`` was not a model call), kagent's Jaeger and Tempo
exports (4 of 5 kagent samples were marked failed by a routine HTTP 404). The Claude Platform
export is fabricated from its published span reference (no public recording exists). The
families without public recordings (OpenLLMetry's ``traceloop.*``, LangSmith, OpenLIT's
plain-text events, smolagents through OpenInference, Claude Code, pydantic-ai's ``events``,
semantic-conventions-genai v0.1.0) are minimal spans written in this file, in the shape each
convention's documentation or source describes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.importers.otel import read_otel
from runner.importers.otel.conventions import FAMILIES, SpanView, classify
from runner.importers.output import write_import
from tests.support.cli import run_cli
from tests.support.otel_shapes import otlp_span
from tests.support.tracelines import resolved_lines

OTEL = Path(__file__).parents[2] / "fixtures" / "import" / "otel"
T0 = 1_790_000_000_000_000_000
TRACE = "0af7651916cd43dd8448eb211c80319c"


def _span(
    sid: int,
    parent: int | None,
    name: str,
    attrs: dict[str, Any],
    start: int,
    end: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "trace": TRACE,
        "span": f"{sid:016x}",
        "parent": f"{parent:016x}" if parent else None,
        "name": name,
        "start": T0 + start,
        "end": T0 + (end if end is not None else start + 10),
        "attrs": attrs,
        **extra,
    }


def _doc(path: Path, spans: list[dict[str, Any]], scope: str = "test") -> Path:
    path.write_text(
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "resource": {"attributes": []},
                        "scopeSpans": [
                            {"scope": {"name": scope}, "spans": [otlp_span(s) for s in spans]}
                        ],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    return path


def _import(tmp_path: Path, *files: Path) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    out = tmp_path / "out"
    report = write_import(read_otel(list(files)), out, {})
    traces = [resolved_lines(p) for p in sorted((out / "traces").glob("*.jsonl"))]
    return report, traces


def _calls(lines: list[dict[str, Any]], tool: str | None = None) -> list[dict[str, Any]]:
    calls = [x for x in lines if x["type"] == "call"]
    if tool == "tools":
        return [c for c in calls if c["tool"] not in ("model", "user")]
    return [c for c in calls if tool is None or c["tool"] == tool]


def _tool_spans(doc: dict[str, Any]) -> list[str]:
    return [
        s["attributes"]["gen_ai.tool.name"]
        for s in doc["spans"]
        if s["attributes"].get("gen_ai.operation.name") == "execute_tool"
    ]


@pytest.mark.parametrize(
    "name",
    sorted(p.stem for p in (OTEL / "any-agent").glob("*.json")),
)
def test_any_agent_dumps_import_every_executed_tool_span(name: str, tmp_path: Path) -> None:
    source = OTEL / "any-agent" / f"{name}.json"
    doc = json.loads(source.read_text(encoding="utf-8"))
    report, (lines,) = _import(tmp_path, source)
    tools = [c["tool"] for c in _calls(lines, "tools")]
    assert tools == _tool_spans(doc)  # every executed tool span is a call, in order
    models = [s for s in doc["spans"] if s["attributes"].get("gen_ai.operation.name") == "call_llm"]
    assert len(_calls(lines, "model")) == len(models)
    assert lines[-1]["status"] == "succeeded"
    assert report["explain"][str(source)]["read"]["any-agent model"] == len(models)
    wanted_in = sum(int(s["attributes"].get("gen_ai.usage.input_tokens", 0)) for s in models)
    assert lines[-1]["meter"]["tokens_in"] == wanted_in


def test_kagent_http_404_is_not_the_agent_failing(tmp_path: Path) -> None:
    source = OTEL / "kagent" / "k8s.json"
    report, (lines,) = _import(tmp_path, source)
    assert lines[-1]["status"] == "succeeded"  # was failed: a GET .../api/tasks/<id> 404 span
    ignored = report["explain"][str(source)]["ignored"]
    assert ignored["http"]["count"] > 0 and "transport" in ignored["http"]["why"]
    assert ignored["a2a"]["count"] > 0


def test_tempo_export_with_a_tool_call(tmp_path: Path) -> None:
    _, (lines,) = _import(tmp_path, OTEL / "kagent" / "tempo_export_with_batches.json")
    assert [c["tool"] for c in _calls(lines, "tools")] == ["helm_list_releases"]
    assert lines[-1]["status"] == "succeeded"


def test_claude_platform_sdk_and_api_spans_are_one_call_per_request(tmp_path: Path) -> None:
    source = OTEL / "claude-platform" / "sdk-and-api.json"
    report, (lines,) = _import(tmp_path, source)
    models = _calls(lines, "model")
    assert len(models) == 2  # 4 spans: the SDK's and the API's of each of 2 requests
    assert {m["model"] for m in models} == {"claude-sonnet-4-5-20250929"}
    assert {m["model_source"] for m in models} == {"response"}
    assert [c["tool"] for c in _calls(lines, "tools")] == ["get_weather"]
    assert lines[-1]["meter"]["tokens_in"] == 915 and lines[-1]["meter"]["tokens_out"] == 79
    assert lines[0]["meta"]["logical_model_calls"] == 2
    explain = report["explain"][str(source)]
    assert explain["read"] == {"claude-platform model": 4, "claude-platform tool": 1}
    assert "unknown:weather-bot" in explain["ignored"]  # the app's own span: named, not hidden


def test_a_tool_span_the_model_output_does_not_show_is_still_a_call(tmp_path: Path) -> None:
    # smolagents' CodeAgent through OpenInference: the model writes code, tools run from it
    spans = [
        _span(1, None, "CodeAgent.run", {"openinference.span.kind": "AGENT"}, 0, 1000),
        _span(
            2,
            1,
            "OpenAIServerModel.generate",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4.1-2025-04-14",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Weather in Paris?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Code:\n```py\nweather('Paris')\n```",
            },
            10,
        ),
        _span(
            3,
            1,
            "WeatherTool",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "weather",
                "input.value": json.dumps(
                    {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}
                ),
                "output.value": "18 C",
            },
            30,
        ),
        _span(
            4,
            1,
            "OpenAIServerModel.generate",
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "It is 18 C.",
            },
            50,
        ),
    ]
    report, (lines,) = _import(tmp_path, _doc(tmp_path / "s.json", spans, "smolagents"))
    (tool,) = _calls(lines, "tools")
    assert tool["tool"] == "weather" and tool["args"] == {"city": "Paris"}  # kwargs unwrapped
    assert tool["body"] == "18 C" and tool["meta"]["tool_call_from_span"] is True
    first = json.loads(_calls(lines, "model")[0]["body"])["message"]
    assert first["tool_calls"][0]["function"]["name"] == "weather"
    assert "smolagents tool" in report["explain"][str(tmp_path / "s.json")]["read"]


def _genai_model(sid: int, start: int, output: list[dict[str, Any]], **attrs: Any) -> Any:
    return _span(
        sid,
        1,
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.output.messages": json.dumps(output),
            **attrs,
        },
        start,
    )


def _tool(sid: int, start: int, name: str, call_id: str | None, result: str, **attrs: Any) -> Any:
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id is not None:
        base["gen_ai.tool.call.id"] = call_id
    return _span(
        sid, 1, f"execute_tool {name}", {**base, "gen_ai.tool.call.result": result, **attrs}, start
    )


def _asks(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    parts = [{"type": "tool_call", "id": i, "name": n, "arguments": {}} for n, i in calls]
    return [{"role": "assistant", "parts": parts}]


FINAL = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
ROOT = _span(1, None, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, 0, 1000)


def test_a_langchain_tool_message_result_is_its_content(tmp_path: Path) -> None:
    message = {"content": "18 C", "type": "tool", "name": "weather", "tool_call_id": "call_W"}
    tool = _span(
        3,
        1,
        "weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "weather",
            "output.value": json.dumps(message),
        },
        20,
    )
    spans = [
        ROOT,
        _genai_model(2, 10, _asks(("weather", "call_W"))),
        tool,
        _genai_model(4, 30, FINAL),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "lc.json", spans))
    (call,) = _calls(lines, "tools")
    assert call["body"] == "18 C" and call["meta"]["call_id"] == "call_W"


def test_tool_spans_pair_by_id_then_by_name_and_order(tmp_path: Path) -> None:
    spans = [
        ROOT,
        _genai_model(2, 10, _asks(("lookup", "call_A"), ("lookup", "call_B"), ("other", "call_C"))),
        # ids another layer gave them (an OpenAI Agents mapper): paired by name and order
        _tool(3, 20, "lookup", "fc_1", "a"),
        _tool(4, 30, "other", "call_C", "c"),
        _tool(5, 40, "lookup", "fc_2", "b"),
        _genai_model(6, 50, FINAL),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "p.json", spans))
    tools = _calls(lines, "tools")
    assert [(c["tool"], c["body"]) for c in tools] == [
        ("lookup", "a"),
        ("lookup", "b"),
        ("other", "c"),
    ]
    assert [c["meta"]["call_id"] for c in tools] == ["call_A", "call_B", "call_C"]


def test_a_tool_span_before_any_model_call_is_an_unpaired_call(tmp_path: Path) -> None:
    spans = [
        ROOT,
        _tool(2, 5, "prefetch", None, "{}"),
        _genai_model(
            3,
            10,
            FINAL,
            **{
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
                )
            },
        ),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "u.json", spans))
    calls = _calls(lines)
    assert [c["tool"] for c in calls] == ["prefetch", "model"]
    assert calls[0]["meta"]["unpaired"] is True


def test_only_the_agents_own_failure_fails_the_run(tmp_path: Path) -> None:
    http = _span(
        7,
        1,
        "GET",
        {"http.method": "GET", "http.status_code": 404, "url.full": "http://x/api/tasks/1"},
        20,
        error=True,
    )
    spans = [ROOT, _genai_model(2, 10, FINAL), http]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "ok.json", spans))
    assert lines[-1]["status"] == "succeeded"
    failing = dict(ROOT, error=True, message="boom")
    _, (lines,) = _import(tmp_path / "2", _doc(tmp_path / "bad.json", [failing, spans[1]]))
    assert lines[-1]["status"] == "failed" and lines[-1]["error"]["message"] == "boom"


def test_the_provider_spans_usage_wins_over_a_wrappers(tmp_path: Path) -> None:
    wrapper = _span(
        2,
        1,
        "call_llm",
        {
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 5000,
            "gen_ai.usage.output_tokens": 900,
        },
        10,
        100,
    )
    inner = _span(
        3,
        2,
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.output.messages": json.dumps(FINAL),
            "gen_ai.usage.input_tokens": 500,
            "gen_ai.usage.output_tokens": 90,
        },
        20,
    )
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "w.json", [ROOT, wrapper, inner]))
    assert (lines[-1]["meter"]["tokens_in"], lines[-1]["meter"]["tokens_out"]) == (500, 90)
    assert len(_calls(lines, "model")) == 1


def test_openllmetry_traceloop_spans(tmp_path: Path) -> None:
    spans = [
        _span(1, None, "agent.workflow", {"traceloop.span.kind": "workflow"}, 0, 1000),
        _span(
            2,
            1,
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "Price of AAPL?",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.tool_calls.0.id": "call_1",
                "gen_ai.completion.0.tool_calls.0.name": "quote",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"symbol": "AAPL"}',
            },
            10,
        ),
        _span(
            3,
            1,
            "quote.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "quote",
                "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"symbol": "AAPL"}}),
                "traceloop.entity.output": '"187.2"',
            },
            20,
        ),
        _span(
            4,
            1,
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "AAPL is at 187.2.",
            },
            30,
        ),
    ]
    report, (lines,) = _import(
        tmp_path, _doc(tmp_path / "t.json", spans, "opentelemetry.instrumentation.openai")
    )
    (tool,) = _calls(lines, "tools")
    assert (tool["tool"], tool["args"], tool["body"]) == ("quote", {"symbol": "AAPL"}, '"187.2"')
    assert lines[0]["task_input"] == {"message": "Price of AAPL?"}
    assert lines[-1]["output"] == "AAPL is at 187.2."
    read = report["explain"][str(tmp_path / "t.json")]["read"]
    assert read == {"openllmetry model": 2, "openllmetry tool": 1}


def test_langsmith_spans_with_langchain_messages(tmp_path: Path) -> None:
    human = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "HumanMessage"],
        "kwargs": {"content": "Capital of France?"},
    }
    ai = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {
            "content": "",
            "tool_calls": [{"name": "search", "args": {"q": "capital of France"}, "id": "call_9"}],
        },
    }
    spans = [
        _span(1, None, "LangGraph", {"langsmith.span.kind": "chain"}, 0, 1000),
        _span(
            2,
            1,
            "ChatOpenAI",
            {
                "langsmith.span.kind": "llm",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.prompt": json.dumps({"messages": [[human]]}),
                "gen_ai.completion": json.dumps({"generations": [[{"message": ai}]]}),
            },
            10,
        ),
        _span(
            3,
            1,
            "search",
            {
                "langsmith.span.kind": "tool",
                # a run's inputs and outputs in LangSmith's wrappers
                "gen_ai.prompt": json.dumps({"input": {"q": "capital of France"}}),
                "gen_ai.completion": json.dumps({"output": "Paris"}),
            },
            20,
        ),
        _span(
            4,
            1,
            "ChatOpenAI",
            {
                "langsmith.span.kind": "llm",
                "gen_ai.completion": json.dumps(
                    {
                        "generations": [
                            [
                                {
                                    "text": "Paris.",
                                    "message": {"role": "assistant", "content": "Paris."},
                                }
                            ]
                        ]
                    }
                ),
            },
            30,
        ),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "l.json", spans))
    (tool,) = _calls(lines, "tools")
    assert (tool["tool"], tool["args"], tool["body"]) == (
        "search",
        {"q": "capital of France"},
        "Paris",
    )
    assert tool["meta"]["call_id"] == "call_9"
    assert lines[0]["task_input"] == {"message": "Capital of France?"}
    assert lines[-1]["output"] == "Paris."


def test_openlit_plain_text_events_and_gemini_content(tmp_path: Path) -> None:
    spans = [
        _span(
            1,
            None,
            "chat gemini-2.0-flash",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gemini-2.0-flash"},
            0,
            events=[
                {
                    "time": T0 + 1,
                    "name": "gen_ai.content.prompt",
                    "attrs": {"gen_ai.prompt": "user: What is 2+2?"},
                },
                {
                    "time": T0 + 2,
                    "name": "gen_ai.content.completion",
                    "attrs": {"gen_ai.completion": "4"},
                },
            ],
        ),
        _span(
            2,
            None,
            "generate_content",
            {
                "gen_ai.operation.name": "generate_content",
                "gen_ai.request.model": "gemini-2.0-flash",
                # a Gemini Content object in the place of the content
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "content": {"role": "user", "parts": [{"text": "And 3+3?"}]}}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "model", "content": {"parts": [{"text": "6"}]}}]
                ),
            },
            100,
        ),
    ]
    spans[1]["trace"] = "1" * 32  # another conversation
    _, traces = _import(tmp_path, _doc(tmp_path / "o.json", spans, "openlit.otel.tracing"))
    inputs = sorted(t[0]["task_input"]["message"] for t in traces)
    outputs = sorted(t[-1]["output"] for t in traces)
    assert inputs == ["And 3+3?", "What is 2+2?"] and outputs == ["4", "6"]


def test_claude_code_spans(tmp_path: Path) -> None:
    spans = [
        _span(
            1,
            None,
            "claude_code.interaction",
            {"user_prompt": "List files", "session.id": "s1"},
            0,
            1000,
        ),
        _span(
            2,
            1,
            "claude_code.llm_request",
            {"model": "claude-haiku-4-5", "input_tokens": 1200, "output_tokens": 40},
            10,
        ),
        _span(
            3,
            1,
            "claude_code.tool",
            {"tool_name": "Bash", "tool_input": json.dumps({"command": "ls"})},
            20,
        ),
        _span(4, 3, "claude_code.tool.execution", {}, 21),
        _span(
            5,
            1,
            "claude_code.llm_request",
            {"model": "claude-haiku-4-5", "input_tokens": 1300, "output_tokens": 20},
            30,
        ),
    ]
    report, (lines,) = _import(
        tmp_path, _doc(tmp_path / "c.json", spans, "com.anthropic.claude_code")
    )
    (tool,) = _calls(lines, "tools")
    assert (tool["tool"], tool["args"]) == ("Bash", {"command": "ls"})
    assert tool["meta"]["tool_call_from_span"] is True
    assert lines[0]["task_input"] == {"message": "List files"}  # the interaction's prompt
    assert (lines[-1]["meter"]["tokens_in"], lines[-1]["meter"]["tokens_out"]) == (2500, 60)
    explain = report["explain"][str(tmp_path / "c.json")]
    assert (
        explain["read"]["claude-code model"] == 2
        and explain["ignored"]["claude-code"]["count"] == 1
    )


def test_a_system_prompt_alone_does_not_hide_the_users_text(tmp_path: Path) -> None:
    # a wrapper records the user's text; the provider span inside it only the instructions
    wrapper = _span(
        2,
        1,
        "call_llm",
        {
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                    {"role": "user", "parts": [{"type": "text", "content": "Hi there"}]},
                ]
            ),
        },
        10,
        100,
    )
    inner = _span(
        3,
        2,
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}]
            ),
            "gen_ai.output.messages": json.dumps(FINAL),
        },
        20,
    )
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "s.json", [ROOT, wrapper, inner]))
    assert lines[0]["task_input"] == {"message": "Hi there"}


def test_semconv_genai_v010_workflow_is_an_agent_span(tmp_path: Path) -> None:
    root = _span(
        1,
        None,
        "invoke_workflow triage",
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": "triage"},
        0,
        1000,
    )
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "v.json", [root, _genai_model(2, 10, FINAL)]))
    assert lines[0]["meta"]["agents"] == ["triage"]
    assert classify(SpanView("x", {"gen_ai.operation.name": "invoke_workflow"})).role == "agent"


def test_pydantic_ai_events_attribute(tmp_path: Path) -> None:
    events = [
        {"event.name": "gen_ai.user.message", "content": "Hello?", "role": "user"},
        {
            "event.name": "gen_ai.choice",
            "index": 0,
            "message": {"role": "assistant", "content": "Hi!"},
        },
    ]
    span = _span(
        1,
        None,
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "events": json.dumps(events),
        },
        0,
    )
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "e.json", [span], "pydantic-ai"))
    assert lines[0]["task_input"] == {"message": "Hello?"} and lines[-1]["output"] == "Hi!"


def test_a_file_of_unknown_families_is_refused_naming_them(tmp_path: Path) -> None:
    spans = [
        _span(1, None, "handle", {"custom.thing": 1}, 0),
        _span(2, 1, "GET", {"http.method": "GET"}, 5),
    ]
    with pytest.raises(InputError) as caught:
        read_otel([_doc(tmp_path / "x.json", spans, "my.app")])
    assert "unknown:my.app 1" in str(caught.value) and "http 1" in str(caught.value)


def test_a_capture_wrapper_is_unwrapped(tmp_path: Path) -> None:
    inner = json.loads(_doc(tmp_path / "i.json", [ROOT, _genai_model(2, 10, FINAL)]).read_text())
    wrapped = tmp_path / "oteltest.json"
    wrapped.write_text(
        json.dumps({"filename": "run.py", "trace_requests": [{"pbreq": inner, "headers": {}}]})
    )
    _, (lines,) = _import(tmp_path, wrapped)
    assert len(_calls(lines, "model")) == 1


def test_every_family_of_the_table_cites_a_source() -> None:
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    assert all(f.source.strip() for f in FAMILIES)
    for name in (
        "claude-platform",
        "claude-code",
        "adk",
        "any-agent",
        "genai",
        "openinference",
        "openllmetry",
        "langsmith",
    ):
        assert name in names


def _agent_span(sid: int, name: str, start: int, end: int) -> dict[str, Any]:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    return _span(sid, 1, f"invoke_agent {name}", attrs, start, end)


def _under(span: dict[str, Any], parent: int) -> dict[str, Any]:
    return {**span, "parent": f"{parent:016x}"}


def test_sibling_agents_running_at_once_keep_their_own_conversations(tmp_path: Path) -> None:
    # a fan-out: two agents under one root, their model and tool calls interleaved in time
    spans = [
        ROOT,
        _agent_span(10, "flights", 5, 200),
        _agent_span(20, "hotels", 6, 210),
        _under(_genai_model(11, 10, _asks(("find_flight", "f1"))), 10),
        _under(_genai_model(21, 12, _asks(("find_hotel", "h1"))), 20),
        _under(_tool(12, 20, "find_flight", "f1", "AF12"), 10),
        _under(_tool(22, 22, "find_hotel", "h1", "Ritz"), 20),
        _under(_genai_model(13, 30, FINAL), 10),
        _under(_genai_model(23, 32, FINAL), 20),
    ]
    _, traces = _import(tmp_path, _doc(tmp_path / "fan.json", spans))
    assert len(traces) == 2  # flattened, the turns interleaved and the calls lost results
    by_agent = {t[0]["meta"]["agents"][0]: t for t in traces}
    for agent, tool, body in (("flights", "find_flight", "AF12"), ("hotels", "find_hotel", "Ritz")):
        calls = _calls(by_agent[agent])
        assert [c["tool"] for c in calls] == ["model", tool, "model"]
        assert calls[1]["body"] == body
    # one after the other (a transfer), agents stay one conversation, which replays as one
    sequential = [
        ROOT,
        _agent_span(10, "triage", 5, 40),
        _agent_span(20, "billing", 50, 100),
        _under(_genai_model(11, 10, _asks(("transfer", "t1"))), 10),
        _under(_tool(12, 20, "transfer", "t1", "ok"), 10),
        _under(_genai_model(21, 60, FINAL), 20),
    ]
    _, traces = _import(tmp_path / "2", _doc(tmp_path / "seq.json", sequential))
    assert len(traces) == 1


def test_adks_error_response_without_an_error_status_is_a_failed_call(tmp_path: Path) -> None:
    tool = _span(
        3,
        1,
        "execute_tool get_stock_price",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_stock_price",
            "gen_ai.tool.call.id": "c1",
            "gcp.vertex.agent.tool_call_args": json.dumps({"ticker": "XYZ"}),
            "gcp.vertex.agent.tool_response": json.dumps({"error": "ValueError: no XYZ"}),
        },
        20,
    )
    spans = [
        ROOT,
        _genai_model(2, 10, _asks(("get_stock_price", "c1"))),
        tool,
        _genai_model(4, 30, FINAL),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "adk.json", spans, "gcp.vertex.agent"))
    (call,) = _calls(lines, "tools")
    assert call["error"] == {"class": "ValueError", "message": "no XYZ"}
    assert lines[-1]["status"] == "succeeded"  # handed back to the model, which answered


def test_import_explain_prints_what_was_read_and_ignored(tmp_path: Path) -> None:
    source = OTEL / "kagent" / "k8s.json"
    done = run_cli(
        ["import", "otel", str(source), "--out", str(tmp_path / "out"), "--explain"],
        tmp_path,
        "unused",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"explain {source}:" in out
    assert "read: adk agent 2, adk model 1, openllmetry model 1" in out
    assert "ignored: http 29: an HTTP request (transport, not an agent step)" in out
    assert "ignored: a2a 40:" in out
    assert "decided: model spans merged into the call around them" in out


def test_tool_names_that_are_not_tool_ids_pair_under_one_id(tmp_path: Path) -> None:
    spans = [
        ROOT,
        _genai_model(2, 10, _asks(("Read File", "c1"))),
        _tool(3, 20, "Read File", None, "hello"),
        _genai_model(4, 30, FINAL),
    ]
    _, (lines,) = _import(tmp_path, _doc(tmp_path / "n.json", spans))
    (call,) = _calls(lines, "tools")
    assert (call["tool"], call["body"], call["meta"]["call_id"]) == ("Read_File", "hello", "c1")
    first = json.loads(_calls(lines, "model")[0]["body"])["message"]
    assert first["tool_calls"][0]["function"]["name"] == "Read_File"
