"""Plain functions an agent hands to an SDK's tool-making call: found in source, made tools.

Standard library only, Python 3.9+. LangGraph's quickstart defines a plain function and hands
it to ``create_react_agent(model, tools=[get_weather])``; the SDK wraps it into its own tool
object only when the agent runs (inside the program function). Nothing at module level is an
SDK tool then, so neither `runner.sdk.collect_tools` nor the static reading would see one.
`runner.sdk.handedscan.scan` finds such hand-overs in the module's source with `ast` (nothing
imported or run) and is used by both sides, so that they agree:

- the host's static reading (``check``: `runner.tools.static_sdkcalls`) makes each function
  found a tool of that SDK, as it does for a function the SDK's decorator made one;
- in the sandbox (and in any process that collects a module's tools), `collect` makes the
  SDK's own tool object of each function found (``StructuredTool.from_function``,
  ``function_tool``, ``beta_tool``: what the SDK makes of it at run time, so its schema is
  the SDK's) and adopts it (`runner.sdk.sdktools.adopt`): its id is the SDK's name, its
  effect ``unsafe`` undeclared (the policy's ``map:`` classes it). The object the SDK makes
  at run time is adopted when invoked (`runner.sdk.sdktools.install`) under the same id, so
  its calls are recorded, served and denied as a decorated SDK tool's are.

The calls recognised (`runner.sdk.handedscan.MAKERS`, by the import that binds them, any
alias, at module level or inside a function of the module): LangGraph
``create_react_agent(model, tools=[...])`` and ``ToolNode([...])``, LangChain
``create_agent(model, tools=[...])``, ``StructuredTool.from_function(f, name=...)``,
``tool(f)``, ``<model>.bind_tools([...])`` (in a module importing LangChain or LangGraph), the
Agents SDK's ``function_tool(f)`` and Anthropic's ``beta_tool(f)`` / ``beta_async_tool(f)``.
A list of tools may be given literally or by a name assigned a literal list in the same
function (or at module level).

A function is taken when it is defined at module level without decorators (one declared with
``@tool(...)`` is a tool already: its declaration gives its id and effect). Not taken, and
named in `runner.sdk.handedscan.Scan.unseen`: a lambda, a function imported from another
module (the module defining it may hand it over itself), a name given by a non-literal
expression. A function handed over twice counts once (a module-level ``x =
function_tool(f)`` first: that object is collected as it is, under ``x``). A function only
``bind_tools`` sees is described, but its call is routed only when an SDK's tool object
invokes it: a program that calls it itself runs it directly.
"""

import ast
import importlib
import inspect
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Set, Tuple

from runner.sdk import pyparse, sdktools
from runner.sdk.handedscan import scan

__all__ = ["collect", "definition_of"]

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Bytes of a module's source read to scan it (the static reading's bound too)."""

_HANDED: Dict[int, Tuple[Any, Any]] = {}  # id(function) -> (the function, its ToolDef)
_LOCK = threading.Lock()


_MAKE = {
    "langchain": ("langchain_core.tools", "StructuredTool"),
    "openai-agents": ("agents", "function_tool"),
    "anthropic": ("anthropic", "beta_tool"),
}
"""framework -> (module, name) of what makes its tool of a function (imported by name, as
`runner.sdk.httpxrecord` imports httpx: only when the user's module handed it one, so the
module imported the SDK already)."""


def _make(framework: str, func: Any, name: str) -> Any:
    """The tool object ``framework`` makes of ``func`` (its SDK imported by the user's code)."""
    module_name, attr = _MAKE[framework]
    maker = getattr(importlib.import_module(module_name), attr)
    coroutine = inspect.iscoroutinefunction(func)
    if framework == "langchain":  # StructuredTool.from_function: what tool(f) and ToolNode do
        if coroutine:
            return maker.from_function(coroutine=func, name=name)
        return maker.from_function(func=func, name=name)
    if framework == "openai-agents":
        return maker(func, name_override=name)
    if coroutine:
        maker = getattr(sys.modules[module_name], "beta_async_tool")  # noqa: B009
    return maker(func, name=name)


def _read(module: Any) -> Optional[ast.Module]:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            return None
        tree: ast.Module = pyparse.parse(data, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree


def collect(module: Any, taken: Set[str]) -> List[Any]:
    """The tools of the functions ``module``'s source hands to an SDK, made and adopted.

    Args:
        module: an imported module object.
        taken: ids of the tools collected from it already (a function whose tool has one of
            them is skipped: the tool is there).

    Returns:
        `runner.sdk.ToolDef` objects (``qualname`` the function's name), in source order.

    Raises:
        ToolDefinitionError: a tool name that is no valid tool id (as for a decorated one).
        Exception: what the SDK raises making the tool (the module's failure, as at import).
    """
    tree = _read(module)
    if tree is None:
        return []
    made = []
    for handed in scan(tree).handed:
        if handed.bound or handed.unread is not None:
            continue
        func = vars(module).get(handed.function)
        if (
            not isinstance(func, types.FunctionType)
            or func.__module__ != module.__name__
            or func.__code__.co_firstlineno != handed.def_line
        ):
            continue  # rebound since: not the function the source hands over
        name = handed.name or func.__name__
        if name in taken:
            continue
        definition = definition_of(func)
        if definition is None:
            definition = sdktools.adopt(_make(handed.framework, func, name))
            definition.qualname = handed.function
            with _LOCK:
                _HANDED[id(func)] = (func, definition)
        made.append(definition)
    return made


def definition_of(func: Any) -> Any:
    """The `runner.sdk.ToolDef` `collect` made of the plain function ``func``, or None.

    None too when its module's tools were not collected in this process yet
    (`runner.sdk.collect_tools` makes them).
    """
    with _LOCK:
        found = _HANDED.get(id(func))
    return found[1] if found is not None and found[0] is func else None
