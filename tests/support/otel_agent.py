"""Tests only: a tool-calling agent loop under a published OpenAI instrumentation, exported.

Run as a script (one instrumentation per process: they patch the ``openai`` module and read
their settings from the environment once)::

    python -m tests.support.otel_agent INSTRUMENTATION OUT_DIR

``INSTRUMENTATION`` is ``openai-v2`` (``opentelemetry-instrumentation-openai-v2``, the OTel
GenAI conventions; content mode from ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``)
or ``openinference`` (``openinference-instrumentation-openai``). The official ``openai``
client talks to the loopback fake server of `tests.support.fake_openai` (never the network); the
loop is the usual one: ask, run each tool call locally, append the results, ask again, until an
answer without tool calls, then a second user message in the same session.

Written into ``OUT_DIR``: ``otlp.json`` (spans and log records as OTLP/JSON, encoded by the
SDK's own OTLP encoder and protobuf's JSON printer: base64 ids, enum names), ``spans.jsonl``
(the SDK's ``to_json`` of each span, one a line) and ``did.json`` (what the agent really
did: model calls, tool calls with arguments and results, token totals, the answers).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.fake_openai import FakeOpenAI, serve

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "kb_search",
            "description": "Search the knowledge base.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "ticket_get",
            "description": "Read a ticket.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    },
]
QUESTIONS = ["My password reset link for ticket T-7 fails.", "Thanks, and how do I log in?"]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Two parallel tool calls, then an answer; after a second user message one more call."""
    messages = request["messages"]
    users = sum(1 for m in messages if m["role"] == "user")
    tools_seen = sum(1 for m in messages if m["role"] == "tool")
    if users == 1 and tools_seen == 0:
        calls = [
            ("call_a", "kb_search", {"query": "password reset"}),
            ("call_b", "ticket_get", {"id": "T-7"}),
        ]
    elif users == 2 and tools_seen == 2:
        calls = [("call_c", "kb_search", {"query": "login"})]
    else:
        return {"role": "assistant", "content": f"Answer {users}.{tools_seen}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ],
    }


def run_tool(name: str, args: dict[str, Any]) -> str:
    if name == "kb_search":
        return json.dumps({"hits": [f"article about {args['query']}"]})
    return json.dumps({"id": args["id"], "status": "open"})


def agent(client: Any, did: dict[str, Any]) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are the helpdesk."}]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        for _ in range(5):
            reply = client.chat.completions.create(
                model="gpt-4.1-mini", messages=messages, tools=TOOLS, temperature=0
            )
            did["model_calls"] += 1
            did["tokens"][0] += reply.usage.prompt_tokens
            did["tokens"][1] += reply.usage.completion_tokens
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                did["answers"].append(message.content)
                break
            for call in message.tool_calls:
                args = json.loads(call.function.arguments)
                result = run_tool(call.function.name, args)
                did["tool_calls"].append(
                    {"name": call.function.name, "args": args, "result": result}
                )
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def main(kind: str, out: Path) -> None:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, logs = InMemorySpanExporter(), InMemoryLogExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    if kind == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(
            tracer_provider=tracer_provider, logger_provider=logger_provider
        )
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tracer_provider)
    import openai

    tracer = tracer_provider.get_tracer("helpdesk-app")
    did: dict[str, Any] = {"model_calls": 0, "tokens": [0, 0], "tool_calls": [], "answers": []}
    with serve(FakeOpenAI(answer=answer, prompt_tokens=50, completion_tokens=7)) as fake:
        client = openai.OpenAI(base_url=fake.url, api_key="placeholder", max_retries=0)
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helpdesk"}
        if kind == "openinference":
            from openinference.instrumentation import using_session

            with (
                using_session("helpdesk-session-1"),
                tracer.start_as_current_span(
                    "helpdesk", attributes={"openinference.span.kind": "AGENT"}
                ),
            ):
                agent(client, did)
        else:
            with trace.use_span(
                tracer.start_span("invoke_agent helpdesk", attributes=attrs), end_on_exit=True
            ):
                agent(client, did)
        did["requests"] = len(fake.requests)
    out.mkdir(parents=True, exist_ok=True)
    finished = spans.get_finished_spans()
    doc = MessageToDict(encode_spans(finished))
    records = logs.get_finished_logs()
    if records:
        doc.update(MessageToDict(encode_logs(records)))
    (out / "otlp.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    (out / "spans.jsonl").write_text(
        "".join(s.to_json(indent=None) + "\n" for s in finished), encoding="utf-8"
    )
    (out / "did.json").write_text(json.dumps(did, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
