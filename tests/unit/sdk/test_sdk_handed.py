"""A plain function handed to an SDK's tool-making call is a first-class call (sdk/handed.py).

The LangGraph quickstart's shape (tests/fixtures/frameworks/langgraph_react.py): the module
binds only the plain ``get_weather``; `runner.sdk.collect_tools` lists it as the tool
LangChain makes of it (the SDK's schema), and the object LangGraph itself makes of it at run
time (``ToolNode``) is routed under the same id and schema hash (what the sandbox's registry
was built from); the worker's registry loads its code by module and qualname.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import sdk
from runner.runtime.registry import RuntimeRegistry
from runner.sdk import dispatch, handed, sdktools

prebuilt = pytest.importorskip("langgraph.prebuilt")

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.syspath_prepend(str(FIX))
    sys.modules.pop("langgraph_react", None)
    yield importlib.import_module("langgraph_react")
    sys.modules.pop("langgraph_react", None)


def test_the_module_lists_the_function_as_the_tool_langgraph_makes_of_it(module: Any) -> None:
    [definition] = sdk.collect_tools(module)
    assert (definition.id, definition.framework, definition.name) == (
        "get_weather",
        "langchain",
        "get_weather",
    )
    assert (definition.module, definition.qualname) == ("langgraph_react", "get_weather")
    assert not definition.effect_declared and definition.effect is sdk.Effect.UNSAFE
    assert handed.definition_of(module.get_weather) is definition
    assert sdk.collect_tools(module) == [definition]  # made once per function

    sdktools.install()
    node = prebuilt.ToolNode([module.get_weather])  # what create_react_agent makes inside run
    seen: list[tuple[str, str, dict[str, Any]]] = []

    def dispatcher(made: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.append((made.id, made.schema_hash, dict(kwargs)))
        return "served"

    made = node.tools_by_name["get_weather"]  # the StructuredTool LangGraph made, not ours
    with dispatch.dispatching(dispatcher):
        out = made.invoke({"city": "Tokyo"})
    assert seen == [("get_weather", definition.schema_hash, {"city": "Tokyo"})]
    assert out == "served"  # the body did not run


def test_the_workers_registry_loads_its_code_by_module_and_qualname(module: Any) -> None:
    [definition] = sdk.collect_tools(module)
    entry = {**definition.manifest_entry(), "effect": "pure", "disposition": "execute"}
    registry = RuntimeRegistry.from_manifest({"tools": [entry]}, "shadow")
    func = registry.resolve("get_weather").func
    assert func is definition.guarded
    with dispatch.direct(), sdk.replay_context({"get_weather"}):
        assert "sunny in Tokyo" in str(func(city="Tokyo"))
    with dispatch.direct(), sdk.replay_context(set()), pytest.raises(sdk.CapabilityDenied):
        func(city="Tokyo")  # denied before the body: the guard of a @tool
