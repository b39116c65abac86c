"""The agent SDKs' tool decorators as the static reading sees them (`runner.tools.static_walk`).

``check`` imports nothing of a workflow, so an SDK's decorator is recognised by the import
that binds it (`SDK_DECORATORS`: ``from agents import function_tool``, ``import agents`` then
``agents.function_tool``, ...) and its tool name read from the decorator's literal arguments
(`sdk_mark`). The sandbox's view of the same tools is `runner.sdk.sdktools`; the names here
are those its `runner.sdk.sdktools.FRAMEWORKS` classes are made by.

A function decorated by one of them is a tool (`runner.sdk.collect_tools` adopts it): its id
is its ``@tool(...)`` declaration's when one is stacked with the SDK's decorator (either
order), else the SDK's name; its effect is the declaration's, else ``unsafe`` (undeclared:
the policy's ``map:`` may give it a class). Its schema is the SDK's own, which only the SDK
computes: read statically only when ``@tool`` is the inner decorator (the SDK then wraps the
declared function and offers its schema).

A plain function handed to an SDK's tool-making call, at module level or inside a function
(``search = function_tool(f)``, ``tool(f)``, ``StructuredTool.from_function(f, name=...)``,
LangGraph's ``create_react_agent(model, tools=[f])``, ``ToolNode([f])``, ``bind_tools([f])``,
...) is read by `runner.tools.static_sdkcalls` (with the scan the sandbox makes too,
`runner.sdk.handed`): a tool of that SDK, its id the SDK's name.

Not followed (the sandbox's description still lists such tools, so ``submit`` and ``run``
see them; ``check`` does not): a tool object made otherwise (``FunctionTool(...)``,
``StructuredTool(...)``), a subclass of ``BaseTool``, and tools made of functions defined
inside functions or imported from another module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["SDK_DECORATORS", "SDK_MODULES", "SdkDecorator", "SdkMark", "SdkModule", "sdk_mark"]


@dataclass(frozen=True)
class SdkDecorator:
    """An SDK's tool decorator, bound to a module name.

    Attributes:
        framework: `runner.sdk.sdktools.FRAMEWORKS` key.
        name_keyword: the keyword argument that names the tool (``name_override``, ``name``).
        name_positional: whether a first positional string names the tool (LangChain's
            ``@tool("search")``).
    """

    framework: str
    name_keyword: str
    name_positional: bool = False


@dataclass(frozen=True)
class SdkModule:
    """An SDK module bound to a module name (``import agents``): its decorators by attribute."""

    module: str


_AGENTS = SdkDecorator("openai-agents", "name_override")
_ANTHROPIC = SdkDecorator("anthropic", "name")
_LANGCHAIN = SdkDecorator("langchain", "name_or_callable", name_positional=True)

SDK_DECORATORS: dict[tuple[str, str], SdkDecorator] = {
    ("agents", "function_tool"): _AGENTS,
    ("agents.tool", "function_tool"): _AGENTS,
    ("anthropic", "beta_tool"): _ANTHROPIC,
    ("anthropic", "beta_async_tool"): _ANTHROPIC,
    ("anthropic.lib.tools", "beta_tool"): _ANTHROPIC,
    ("anthropic.lib.tools", "beta_async_tool"): _ANTHROPIC,
    ("langchain_core.tools", "tool"): _LANGCHAIN,
    ("langchain.tools", "tool"): _LANGCHAIN,
    ("langchain.agents", "tool"): _LANGCHAIN,
}
"""(module, attribute) -> the decorator: every spelling the SDKs document."""

SDK_MODULES = frozenset(module for module, _ in SDK_DECORATORS)


@dataclass(frozen=True)
class SdkMark:
    """One SDK decorator on a function, as read.

    Attributes:
        framework: the SDK.
        name: the tool name given literally, or None (the function's name).
        line: the decorator's line.
        unread: why the name could not be read (a non-literal name), or None.
    """

    framework: str
    name: str | None
    line: int
    unread: str | None = None


def sdk_mark(node: ast.expr, decorator: SdkDecorator) -> SdkMark:
    """Read the SDK decorator ``node`` (``@function_tool`` or ``@function_tool(...)``)."""
    line = node.lineno
    if not isinstance(node, ast.Call):
        return SdkMark(decorator.framework, None, line)
    given: ast.expr | None = next(
        (k.value for k in node.keywords if k.arg == decorator.name_keyword), None
    )
    if given is None and decorator.name_positional and node.args:
        given = node.args[0]
    if given is None:
        return SdkMark(decorator.framework, None, line)
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return SdkMark(decorator.framework, given.value, line)
    if isinstance(given, ast.Constant) and given.value is None:
        return SdkMark(decorator.framework, None, line)
    return SdkMark(decorator.framework, None, line, unread="its SDK name is not a literal")
