"""`sandbox-replay import otel`: shapes, conventions, sessions, and bad input.

The same agent session (two traces of one conversation: a tool loop, then a second user turn)
is written in every file shape (`tests.support.otel_shapes`) and under each convention; every
variant must import to the same calls. Bad input gets an error or a warning naming span id
and file, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from runner.domain.tasks import load_tasks
from runner.importers.otel import read_otel
from runner.importers.output import write_import
from runner.tracetools.lint import lint_trace
from runner.tracetools.reader import read_trace
from tests.support.otel_shapes import SHAPES, render
from tests.support.paths import REPO
from tests.support.tracelines import resolved_lines

ROOT = REPO
SCHEMA = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
T1, T2 = "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736"

S = 1_790_000_000_000_000_000  # ns
MS = 1_000_000  # span() takes times in ms after S
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(autouse=True)
def _fresh_logging() -> Any:
    yield
    structlog.reset_defaults()


def span(
    trace: str, sid: str, parent: str | None, name: str, start: int, end: int, **attrs: Any
) -> dict[str, Any]:
    return {
        "trace": trace,
        "span": sid,
        "parent": parent,
        "name": name,
        "start": S + start * MS,
        "end": S + end * MS,
        "attrs": attrs,
    }


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def genai_session(wrapper: bool = False) -> list[dict[str, Any]]:
    """Current GenAI conventions: messages as attributes, a tool span, two traces, one id."""
    call = {
        "type": "tool_call",
        "id": "call_1",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    asked = [text("user", "Weather in Paris?")]
    first_out = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Checking."}, call],
            "finish_reason": "tool_call",
        }
    ]
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": {"temp_c": 21}}],
    }
    second_in = [*asked, first_out[0], result]
    second_out = [{"role": "assistant", "parts": [{"type": "text", "content": "It is 21C."}]}]
    third_in = [*second_in, second_out[0], text("user", "Thanks!")]
    common = {
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4.1",
        "gen_ai.response.model": "gpt-4.1-2025-04-14",
    }
    system = [{"type": "text", "content": "You answer weather questions."}]

    def chat(
        trace: str, sid: str, parent: str, start: int, inp: Any, out: Any, tin: int, tout: int
    ) -> dict[str, Any]:
        return span(
            trace,
            sid,
            parent,
            "chat gpt-4.1",
            start,
            start + 10,
            **{
                "gen_ai.operation.name": "chat",
                **common,
                "gen_ai.system_instructions": system,
                "gen_ai.input.messages": inp,
                "gen_ai.output.messages": out,
                "gen_ai.tool.definitions": [WEATHER],
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.usage.input_tokens": tin,
                "gen_ai.usage.output_tokens": tout,
            },
        )

    spans = [
        span(
            T1,
            "a000000000000001",
            None,
            "invoke_agent weather",
            0,
            100,
            **{
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather",
                "gen_ai.conversation.id": "conv-1",
            },
        ),
        chat(T1, "a000000000000002", "a000000000000001", 10, asked, first_out, 10, 5),
        span(
            T1,
            "a000000000000003",
            "a000000000000001",
            "execute_tool get_weather",
            30,
            40,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": {"city": "Paris"},
                "gen_ai.tool.call.result": {"temp_c": 21},
            },
        ),
        chat(T1, "a000000000000004", "a000000000000001", 50, second_in, second_out, 20, 6),
        span(
            T2,
            "b000000000000001",
            None,
            "invoke_agent weather",
            1000,
            1100,
            **{"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-1"},
        ),
        chat(
            T2,
            "b000000000000002",
            "b000000000000001",
            1010,
            third_in,
            [{"role": "assistant", "parts": [{"type": "text", "content": "Bye."}]}],
            30,
            2,
        ),
    ]
    if wrapper:  # a framework span around the provider span, with the same usage
        inner = dict(
            spans[1],
            span="a000000000000009",
            parent="a000000000000002",
            start=spans[1]["start"] + 1,
        )
        spans[1] = span(
            T1,
            "a000000000000002",
            "a000000000000001",
            "call_llm",
            9,
            21,
            **{
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5,
            },
        )
        spans.insert(2, inner)
    return spans


def imported(tmp_path: Path, files: list[Path], **kw: Any) -> dict[str, Any]:
    out = tmp_path / "out"
    report = write_import(read_otel(files, kw.get("tools")), out, kw.get("map", {}))
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    traces = {}
    for path in sorted((out / "traces").glob("*.jsonl")):
        assert read_trace(path).problems == ()
        lines = resolved_lines(path)
        for line in lines:
            assert not list(validator.iter_errors(line)), line
        traces[path.stem] = lines
    assert load_tasks(out / "tasks.jsonl").errors == []
    return {"report": report, "traces": traces, "out": out}


def summary(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for line in lines[1:-1]:
        if line["tool"] in ("model", "user"):
            body = json.loads(line["body"])["message"] if line.get("body") else None
            out.append(
                (line["tool"], body and body.get("content"), line.get("model"), line.get("usage"))
            )
        else:
            out.append(
                (
                    line["tool"],
                    line["args"],
                    line.get("body"),
                    (line.get("error") or {}).get("class"),
                )
            )
    return out


EXPECTED = [
    ("model", "Checking.", "gpt-4.1-2025-04-14", {"prompt_tokens": 10, "completion_tokens": 5}),
    ("get_weather", {"city": "Paris"}, '{"temp_c": 21}', None),
    ("model", "It is 21C.", "gpt-4.1-2025-04-14", {"prompt_tokens": 20, "completion_tokens": 6}),
    ("user", "Thanks!", "gpt-4.1", None),
    ("model", "Bye.", "gpt-4.1-2025-04-14", {"prompt_tokens": 30, "completion_tokens": 2}),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_gives_the_same_session(tmp_path: Path, shape: str) -> None:
    source = render(genai_session(), shape, tmp_path / f"in.{shape}.json")
    got = imported(tmp_path, [source])
    assert list(got["traces"]) == ["conv-1"]  # two traces, one conversation id: one session
    lines = got["traces"]["conv-1"]
    assert summary(lines) == EXPECTED
    head, end = lines[0], lines[-1]
    assert head["task_input"] == {"message": "Weather in Paris?"}
    assert head["meta"]["session_key"] == {"kind": "conversation", "value": "conv-1"}
    assert head["meta"]["traces"] == [T1, T2]
    assert end["meter"] == {"tokens_in": 60, "tokens_out": 13}
    assert end["status"] == "succeeded" and end["output"] == "Bye."
    model = lines[1]
    assert model["model_source"] == "response" and model["clock"] == pytest.approx(
        (S + 10 * MS) / 1e9
    )
    assert model["duration_s"] == pytest.approx(0.01)
    assert model["request"]["messages"][0] == {
        "role": "system",
        "content": "You answer weather questions.",
    }
    tool = lines[2]
    assert "schema_hash" not in tool and tool["meta"]["call_id"] == "call_1"
    assert got["report"]["missing"]["tool.schema_hash"] == 1
    assert got["report"]["notes"] == []


def test_wrapper_and_provider_span_are_one_model_call(tmp_path: Path) -> None:
    source = render(genai_session(wrapper=True), "otlp", tmp_path / "in.json")
    lines = imported(tmp_path, [source])["traces"]["conv-1"]
    assert summary(lines) == EXPECTED
    assert lines[0]["meta"]["logical_model_calls"] == 3
    assert lines[1]["meta"]["span_ids"] == ["a000000000000002", "a000000000000009"]
    assert lines[-1]["meter"] == {"tokens_in": 60, "tokens_out": 13}


def test_lint_names_exactly_what_otel_lacks(tmp_path: Path) -> None:
    source = render(genai_session(), "otlp", tmp_path / "in.json")
    out = imported(tmp_path, [source])["out"]
    result = lint_trace(out / "traces" / "conv-1.jsonl")
    fields = result.to_json()["summary"]["fields"]
    assert fields["body"]["missing"] == 4  # model and user turns: no HTTP body
    assert fields["schema_hash"]["missing"] == 1  # the tool call
    assert fields["model_id"]["missing"] == 1  # the user turn: only the requested model
    assert fields["clock"]["missing"] == 0


def openinference_session() -> list[dict[str, Any]]:
    """OpenInference: flattened llm.* messages, TOOL spans with input/output.value, session.id."""

    def llm(
        sid: str,
        parent: str,
        start: int,
        inputs: list[dict[str, Any]],
        out: dict[str, Any],
        tin: int,
        tout: int,
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": tin,
            "llm.token_count.completion": tout,
            "session.id": "s-9",
            "llm.tools.0.tool.json_schema": json.dumps({"type": "function", "function": WEATHER}),
        }
        for i, m in enumerate(inputs):
            for k, v in m.items():
                attrs[f"llm.input_messages.{i}.message.{k}"] = v
        for k, v in out.items():
            attrs[f"llm.output_messages.0.message.{k}"] = v
        return span(T1, sid, parent, "ChatCompletion", start, start + 10, **attrs)

    calls = {
        "tool_calls.0.tool_call.id": "c1",
        "tool_calls.0.tool_call.function.name": "get_weather",
        "tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
        "tool_calls.1.tool_call.id": "c2",
        "tool_calls.1.tool_call.function.name": "get_weather",
        "tool_calls.1.tool_call.function.arguments": '{"city": "Rome"}',
    }
    user = {"role": "user", "content": "Paris and Rome?"}
    return [
        span(
            T1,
            "c000000000000001",
            None,
            "agent",
            0,
            100,
            **{"openinference.span.kind": "AGENT", "session.id": "s-9"},
        ),
        llm(
            "c000000000000002", "c000000000000001", 10, [user], {"role": "assistant", **calls}, 7, 3
        ),
        span(
            T1,
            "c000000000000003",
            "c000000000000001",
            "get_weather",
            30,
            31,
            **{
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "input.value": '{"city": "Paris"}',
                "output.value": "sunny",
            },
        ),
        span(
            T1,
            "c000000000000004",
            "c000000000000001",
            "get_weather",
            32,
            33,
            **{
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "input.value": '{"city": "Rome"}',
                "output.value": "rain",
            },
        ),
        llm(
            "c000000000000005",
            "c000000000000001",
            50,
            [
                user,
                {"role": "assistant", **calls},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "c2", "content": "rain"},
            ],
            {
                "role": "assistant",
                "contents.0.message_content.type": "text",
                "contents.0.message_content.text": "Sunny; rain.",
            },
            11,
            4,
        ),
    ]


def test_openinference_session(tmp_path: Path) -> None:
    source = render(openinference_session(), "otlp", tmp_path / "oi.json")
    got = imported(tmp_path, [source])
    lines = got["traces"]["s-9"]
    assert lines[0]["meta"]["session_key"] == {"kind": "session", "value": "s-9"}
    assert summary(lines) == [
        ("model", None, "gpt-4o-mini", {"prompt_tokens": 7, "completion_tokens": 3}),
        ("get_weather", {"city": "Paris"}, "sunny", None),
        ("get_weather", {"city": "Rome"}, "rain", None),
        ("model", "Sunny; rain.", "gpt-4o-mini", {"prompt_tokens": 11, "completion_tokens": 4}),
    ]
    assert lines[1]["model"] == "gpt-4o-mini" and lines[1]["model_source"] == "config"
    manifest = json.loads((got["out"] / "tools.manifest.json").read_text("utf-8"))
    assert manifest["tools"][0]["schema"] == WEATHER["parameters"]


def flattened_session() -> list[dict[str, Any]]:
    """Older GenAI flattened attributes; tool calls and tool spans without ids."""
    out_calls = {
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.name": "lookup",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "a"}',
        "gen_ai.completion.0.tool_calls.1.name": "fetch",
        "gen_ai.completion.0.tool_calls.1.arguments": '{"u": 1}',
        "gen_ai.completion.0.tool_calls.2.name": "lookup",
        "gen_ai.completion.0.tool_calls.2.arguments": '{"q": "b"}',
    }
    tool = {"gen_ai.operation.name": "execute_tool"}
    return [
        span(
            T2,
            "d000000000000001",
            None,
            "chat",
            0,
            10,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4",
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "go",
                "gen_ai.usage.prompt_tokens": "5",
                "gen_ai.usage.completion_tokens": "2",
                **out_calls,
            },
        ),
        span(
            T2,
            "d000000000000002",
            None,
            "execute_tool lookup",
            20,
            21,
            **tool,
            **{"gen_ai.tool.name": "lookup"},
            **{"gen_ai.tool.call.result": "A"},
        ),
        span(
            T2,
            "d000000000000003",
            None,
            "execute_tool lookup",
            22,
            23,
            **tool,
            **{"gen_ai.tool.name": "lookup"},
            **{"gen_ai.tool.call.result": "B"},
        ),
        span(
            T2,
            "d000000000000004",
            None,
            "execute_tool fetch",
            24,
            25,
            **tool,
            **{"gen_ai.tool.name": "fetch"},
            **{"gen_ai.tool.call.result": "F"},
        ),
        span(
            T2,
            "d000000000000005",
            None,
            "chat",
            30,
            40,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "done",
                "gen_ai.usage.prompt_tokens": 9,
                "gen_ai.usage.completion_tokens": 1,
            },
        ),
    ]


def test_tool_calls_without_ids_match_by_name_and_order(tmp_path: Path) -> None:
    source = render(flattened_session(), "span-jsonl", tmp_path / "flat.jsonl")
    lines = imported(tmp_path, [source])["traces"][T2]
    assert [c[:3] for c in summary(lines)] == [
        ("model", None, "gpt-4"),
        ("lookup", {"q": "a"}, "A"),
        ("fetch", {"u": 1}, "F"),
        ("lookup", {"q": "b"}, "B"),
        ("model", "done", "gpt-4"),
    ]
    assert lines[-1]["meter"] == {"tokens_in": 14, "tokens_out": 3}
    assert lines[0]["meta"]["session_key"] == {"kind": "trace", "value": T2}


def events_session() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Older per-message events as log records (the openai-v2 instrumentation), no tool spans."""
    spans = [
        span(
            T1,
            "e000000000000001",
            None,
            "chat gpt-4o",
            0,
            10,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 3,
                "gen_ai.usage.output_tokens": 4,
            },
        ),
        span(
            T1,
            "e000000000000002",
            None,
            "chat gpt-4o",
            20,
            30,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 8,
                "gen_ai.usage.output_tokens": 1,
            },
        ),
    ]
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "kb_search", "arguments": '{"query": "x"}'},
    }
    logs = [
        {
            "trace": T1,
            "span": "e000000000000001",
            "time": S + 1 * MS,
            "name": "gen_ai.user.message",
            "body": {"content": "find x"},
        },
        {
            "trace": T1,
            "span": "e000000000000001",
            "time": S + 9 * MS,
            "name": "gen_ai.choice",
            "body": {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "tool_calls": [call]},
            },
        },
        {
            "trace": T1,
            "span": "e000000000000002",
            "time": S + 21 * MS,
            "name": "gen_ai.user.message",
            "body": {"content": "find x"},
        },
        {
            "trace": T1,
            "span": "e000000000000002",
            "time": S + 22 * MS,
            "name": "gen_ai.assistant.message",
            "body": {"tool_calls": [call]},
        },
        {
            "trace": T1,
            "span": "e000000000000002",
            "time": S + 23 * MS,
            "name": "gen_ai.tool.message",
            "body": {"content": "x is 1", "id": "call_9"},
        },
        {
            "trace": T1,
            "span": "e000000000000002",
            "time": S + 29 * MS,
            "name": "gen_ai.choice",
            "body": {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "x is 1."},
            },
        },
    ]
    return spans, logs


def test_log_record_events_and_results_from_the_next_request(tmp_path: Path) -> None:
    spans, logs = events_session()
    source = render(spans, "otlp-base64", tmp_path / "ev.json", logs)
    lines = imported(tmp_path, [source])["traces"][T1]
    assert [c[:3] for c in summary(lines)] == [
        ("model", None, "gpt-4o-2024-08-06"),
        ("kb_search", {"query": "x"}, "x is 1"),
        ("model", "x is 1.", "gpt-4o-2024-08-06"),
    ]
    assert lines[2]["meta"]["result_from"] == "next_model_input"
    assert lines[0]["task_input"] == {"message": "find x"}


def test_content_not_captured_is_missing_not_invented(tmp_path: Path) -> None:
    spans, logs = events_session()
    for record in logs:
        record["body"] = {k: v for k, v in record["body"].items() if k not in ("content",)}
    logs[1]["body"]["message"] = {"role": "assistant"}
    logs[5]["body"]["message"] = {"role": "assistant"}
    source = render(spans, "otlp", tmp_path / "off.json", logs)
    got = imported(tmp_path, [source])
    lines = got["traces"][T1]
    assert [line.get("body") for line in lines[1:-1]] == [None, None]
    assert got["report"]["missing"]["model.body"] == 2


def test_older_per_message_span_events(tmp_path: Path) -> None:
    """Span events (not log records): bodies in ``gen_ai.event.content`` or flat attributes."""
    call = {"id": "t1", "type": "function", "function": {"name": "kb_search", "arguments": "{}"}}
    events_one = [
        {
            "name": "gen_ai.system.message",
            "time": S,
            "attrs": {"gen_ai.event.content": json.dumps({"content": "Sys."})},
        },
        {
            "name": "gen_ai.user.message",
            "time": S + 1,
            "attrs": {"content": json.dumps([{"text": "hi"}])},
        },
        {
            "name": "gen_ai.choice",
            "time": S + 2,
            "attrs": {
                "gen_ai.event.content": json.dumps({"index": 0, "message": {"tool_calls": [call]}})
            },
        },
    ]
    events_two = [
        {"name": "gen_ai.user.message", "time": S + 11, "attrs": {"content": "hi"}},
        {"name": "gen_ai.tool.message", "time": S + 12, "attrs": {"content": "found", "id": "t1"}},
        {
            "name": "gen_ai.choice",
            "time": S + 13,
            "attrs": {"message": json.dumps({"content": "ok"})},
        },
    ]
    base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    spans = [
        dict(span(T1, "e100000000000001", None, "chat m", 0, 1, **base), events=events_one),
        dict(span(T1, "e100000000000002", None, "chat m", 10, 11, **base), events=events_two),
    ]
    for shape in ("otlp", "jaeger"):
        got = imported(tmp_path / shape, [render(spans, shape, tmp_path / f"ev.{shape}.json")])
        lines = got["traces"][T1]
        assert [c[:3] for c in summary(lines)] == [
            ("model", None, "m"),
            ("kb_search", {}, "found"),
            ("model", "ok", "m"),
        ], shape
        assert lines[0]["task_input"] == {"message": "hi"}
        assert lines[1]["request"]["messages"][0] == {"role": "system", "content": "Sys."}


def test_tools_file_supplies_schemas_the_telemetry_lacks(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    lookup = {"name": "lookup", "description": "Look up.", "parameters": {"type": "object"}}
    spare = {"name": "spare", "description": "Never called.", "parameters": {"type": "object"}}
    tools.write_text(
        json.dumps([{"type": "function", "function": f} for f in (lookup, spare)]),
        encoding="utf-8",
    )
    source = render(flattened_session(), "otlp", tmp_path / "flat.json")
    got = imported(tmp_path, [source], tools=tools)
    manifest = json.loads((got["out"] / "tools.manifest.json").read_text("utf-8"))
    by_id = {t["id"]: t for t in manifest["tools"]}
    assert by_id["lookup"]["schema"] == {"type": "object"}
    assert by_id["lookup"]["description"] == "Look up."
    assert by_id["fetch"]["schema"] == {}  # only seen in calls: counted missing
    assert got["report"]["missing"]["tool.schema"] == 1
    request_tools = got["traces"][T2][1]["request"]["tools"]
    # no definitions in the telemetry: the session was offered the --tools ones; fetch has no
    # definition anywhere, so it is known by name only (the workflow's unlisted_tools, never
    # offered to the model: tools known by name only)
    assert [t["function"]["name"] for t in request_tools] == ["lookup", "spare"]
