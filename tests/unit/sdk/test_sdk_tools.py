"""The agent SDKs' own tools as first-class calls (issue 27, runner/sdk/sdktools.py).

With the real SDKs of the host's ``sdks`` extra (openai-agents, anthropic, langchain-core):
each SDK's tool invocation is routed where a ``@tool`` call goes (a program step's dispatcher
in a sandbox, ``runner.sdk.record``'s recorder), its body does not run when the call is
served, the SDK's own code runs unchanged when nothing watches, a ``@tool`` declaration
composes with the SDK's decorator in either order, and a recorded SDK tool call is what the
rubric's ``expected.tool_calls`` and ``tasks extract`` read.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.errors import CapabilityDenied
from runner.grading.model import Result
from runner.grading.rubric import score
from runner.sdk import dispatch, sdktools
from runner.tracetools.reader import load_trace
from runner.tracetools.tasks_extract import extract_tasks

agents = pytest.importorskip("agents")
anthropic = pytest.importorskip("anthropic")
lc_tools = pytest.importorskip("langchain_core.tools")

RAN: list[tuple[str, str]] = []


def _tools() -> dict[str, Any]:
    """One tool of each SDK, made fresh (each test adopts its own)."""

    @agents.function_tool
    def search_kb(query: str) -> str:
        """Search the knowledge base."""
        RAN.append(("agents", query))
        return json.dumps({"hits": [query]})

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        RAN.append(("anthropic", city))
        return f"sunny in {city}"

    @lc_tools.tool
    def lookup(term: str) -> str:
        """Look a term up."""
        RAN.append(("langchain", term))
        return term.upper()

    return {"search_kb": search_kb, "get_weather": get_weather, "lookup": lookup}


def _invoke(name: str, obj: Any, value: str) -> Any:
    """Invoke ``obj`` the way its SDK's runner does."""
    if name == "search_kb":
        context = agents.tool_context.ToolContext(
            context=None,
            tool_name=name,
            tool_call_id="call_1",
            tool_arguments=json.dumps({"query": value}),
        )
        return asyncio.run(obj.on_invoke_tool(context, json.dumps({"query": value})))
    if name == "get_weather":
        return obj.call({"city": value})  # the beta tool runner's call
    return obj.invoke({"term": value})  # LangChain's BaseTool.invoke


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    agents.set_tracing_disabled(True)


def test_each_sdk_tool_goes_to_the_dispatcher_and_its_body_does_not_run() -> None:
    tools = _tools()
    sdktools.install()
    seen: list[tuple[str, dict[str, Any]]] = []

    def dispatcher(definition: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.append((definition.id, dict(kwargs)))
        return f"served {definition.id}"

    with dispatch.dispatching(dispatcher):
        answers = {name: _invoke(name, obj, "x") for name, obj in tools.items()}
    assert seen == [
        ("search_kb", {"query": "x"}),
        ("get_weather", {"city": "x"}),
        ("lookup", {"term": "x"}),
    ]
    assert answers["get_weather"] == "served get_weather" and RAN == []  # nothing ran
    assert "served lookup" in str(answers["lookup"])


def test_with_nothing_watching_the_sdk_code_runs_unchanged() -> None:
    tools = _tools()
    sdktools.install()  # adopted when made, or by install's walk, or on their first call
    answers = {name: _invoke(name, obj, "oslo") for name, obj in tools.items()}
    assert all(sdktools.adopted(obj) is not None for obj in tools.values())
    assert answers == {
        "search_kb": json.dumps({"hits": ["oslo"]}),
        "get_weather": "sunny in oslo",
        "lookup": "OSLO",
    }
    assert [fw for fw, _ in RAN] == ["agents", "anthropic", "langchain"]


def test_a_denied_replay_context_refuses_the_sdk_tool_before_its_body() -> None:
    tools = _tools()
    sdktools.install()
    with sdk.replay_context({"other.tool"}), pytest.raises(CapabilityDenied):
        _invoke("get_weather", tools["get_weather"], "x")
    assert RAN == []


def test_a_declaration_composes_with_the_sdk_decorator_in_either_order() -> None:
    @agents.function_tool
    @sdk.tool("kb.search", effect=sdk.Effect.READ)
    def search_kb(query: str) -> str:
        """Search."""
        return query

    @sdk.tool("kb.other", effect=sdk.Effect.PURE, description="Other.")
    @agents.function_tool(name_override="other")
    def other_kb(query: str) -> str:
        return query

    inner, outer = sdk.tool_def(search_kb), sdk.tool_def(other_kb)
    assert inner is not None and outer is not None
    assert (inner.id, inner.effect, inner.framework, inner.name) == (
        "kb.search",
        sdk.Effect.READ,
        "openai-agents",
        "search_kb",
    )
    assert (outer.id, outer.effect, outer.name, outer.description) == (
        "kb.other",
        sdk.Effect.PURE,
        "other",
        "Other.",
    )
    assert outer.schema == other_kb.params_json_schema  # the schema the SDK offers its model
    calls: list[str] = []
    with dispatch.dispatching(lambda d, a, k: calls.append(d.id) or "served"):
        for tool in (search_kb, other_kb):
            context = agents.tool_context.ToolContext(
                context=None, tool_name=tool.name, tool_call_id="c", tool_arguments="{}"
            )
            asyncio.run(tool.on_invoke_tool(context, json.dumps({"query": "q"})))
    assert calls == ["kb.search", "kb.other"]


def _record(tmp_path: Path) -> Path:
    tools = _tools()
    trace = tmp_path / "sdk-tools.jsonl"
    with sdk.record(trace, task_id="t1", task_input={"q": "x"}) as rec:
        for name, obj in tools.items():
            _invoke(name, obj, "oslo")
        rec.set_output({"answer": "done"})
    return trace


def test_record_keeps_each_sdk_tool_call_with_its_arguments_and_raw_result(
    tmp_path: Path,
) -> None:
    lines = [json.loads(line) for line in _record(tmp_path).read_text().splitlines()]
    calls = [line for line in lines if line.get("type") == "call"]
    assert [(c["tool"], c["args"]) for c in calls] == [
        ("search_kb", {"query": "oslo"}),
        ("get_weather", {"city": "oslo"}),
        ("lookup", {"term": "oslo"}),
    ]
    assert json.loads(calls[0]["body"]) == json.dumps({"hits": ["oslo"]})  # raw: the str
    assert json.loads(calls[1]["body"]) == "sunny in oslo"
    frameworks = [c["meta"]["sdk"]["framework"] for c in calls]
    assert frameworks == ["openai-agents", "anthropic", "langchain"]
    assert all(c["effect"] == "unsafe" and not c["meta"]["sdk"]["effect_declared"] for c in calls)
    assert len(RAN) == 3 and lines[-1]["status"] == "succeeded"


def test_the_rubric_and_tasks_extract_see_the_recorded_sdk_tool_calls(tmp_path: Path) -> None:
    trace = _record(tmp_path)
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    result = Result.from_trace("v1", records)
    expected = {
        "tool_calls": [{"tool": "search_kb", "args": {"query": "oslo"}}, {"tool": "lookup"}]
    }
    assert score(result, expected) == 1.0  # was 0: the calls were never recorded
    tasks = tmp_path / "tasks.jsonl"
    extract_tasks([trace], tasks)
    task = json.loads(tasks.read_text().splitlines()[0])
    assert [o["tool"] for o in task["observations"]] == ["search_kb", "get_weather", "lookup"]
    assert load_trace(trace).end is not None


def test_the_anthropic_beta_tool_runner_is_recorded_through_its_tools(tmp_path: Path) -> None:
    """The SDK's own loop (``client.beta.messages.tool_runner``) against a loopback fake."""
    from tests.support import fake_anthropic

    @anthropic.beta_tool
    def search_kb(query: str) -> str:
        """Search the knowledge base."""
        RAN.append(("anthropic", query))
        return f"hits for {query}"

    trace = tmp_path / "runner.jsonl"
    with (
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as fake,
        sdk.record(trace, task_id="t1") as rec,
    ):
        client = anthropic.Anthropic(
            base_url=fake.url, api_key="sk-ant-test", http_client=rec.http_client()
        )
        runner = client.beta.messages.tool_runner(
            model=fake_anthropic.MODEL_ID,
            max_tokens=256,
            tools=[search_kb],
            messages=[{"role": "user", "content": "How do I reset my password?"}],
        )
        final = runner.until_done()
    assert final.content[0].text == "done from claude"
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [line["tool"] for line in lines if line.get("type") == "call"]
    assert calls == ["model", "search_kb", "model"]  # was: the tool call missing
    [tool_line] = [line for line in lines if line.get("tool") == "search_kb"]
    assert tool_line["args"] == {"query": "password"}
    assert json.loads(tool_line["body"]) == "hits for password" and RAN == [
        ("anthropic", "password")
    ]


def test_an_mcp_servers_tool_is_left_to_the_mcp_stand_in() -> None:
    """The Agents SDK makes a FunctionTool of each MCP tool; routed as an SDK tool it was an
    undeclared ``search_notes`` and denied (the stand-in serves it as ``notes.search_notes``)."""
    from agents import function_tool
    from agents.mcp import MCPServerStdio
    from agents.mcp.util import MCPUtil
    from mcp.types import Tool

    from runner.sdk import sdkwrap

    sdktools.install(scan=False)  # tools made from now on are adopted when made
    server = MCPServerStdio(name="notes", params={"command": "true"})
    made = MCPUtil.to_function_tool(Tool(name="search_notes", inputSchema={}), server, False)
    assert sdkwrap.made_by_the_sdk(made, "openai-agents")
    assert sdktools.adopted(made) is None

    @function_tool
    def lookup(key: str) -> str:
        """A user's tool."""
        return key

    assert not sdkwrap.made_by_the_sdk(lookup, "openai-agents")
    assert sdktools.adopted(lookup) is not None
