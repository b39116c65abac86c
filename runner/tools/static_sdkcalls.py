"""Plain functions handed to an SDK's tool-making call, as the static reading sees them.

``create_react_agent(model, tools=[get_weather])``, ``ToolNode([f])``, ``tool(f)``,
``function_tool(f)``, ... (the list: `runner.sdk.handedscan.MAKERS`): the module's source is
scanned by `runner.sdk.handedscan.scan`, the same scan the sandbox's description makes
(`runner.sdk.collect_tools`), so the two agree. Each function found that the walk
(`runner.tools.static_walk.ModuleWalk`) still holds as a plain module-level function at the
end becomes a tool of that SDK, as a function the SDK's decorator made one does
(`runner.tools.static_sdk`): id the SDK's name (the function's name, or a literal ``name=``),
effect ``unsafe`` undeclared (the policy's ``map:`` may class it), its schema the SDK's (not
read here). A function declared with ``@tool(...)`` is that declaration's tool already (its id
and effect). What the scan saw handed over but could not take (a lambda, an imported
function, a non-literal name) is a gap of the module.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from runner.sdk import handedscan
from runner.tools.static_decl import StaticTool
from runner.tools.static_values import FunctionBinding, ToolBinding

__all__ = ["add_handed_tools"]


def add_handed_tools(
    tree: ast.Module,
    tools: dict[int, StaticTool],
    names: dict[str, Any],
    gaps: list[str],
    at: Callable[[int], str],
) -> None:
    """Add the tools of the functions ``tree`` hands to an SDK (module doc).

    Args:
        tree: the module's tree.
        tools: the walk's tools by key (added to).
        names: the walk's module-level bindings at the end of the module (rebound to the
            tools made).
        gaps: the module's gaps (added to).
        at: ``file:line`` of a line of the module.
    """
    found = handedscan.scan(tree)
    for line, what in found.unseen:
        gaps.append(f"{what}: handed to an SDK's tool-making call at {at(line)}")
    taken = {t.sdk_name or (t.args[0] if t.args else None) for t in tools.values()}
    for item in found.handed:
        sdk_name = item.name or item.function
        if item.unread is not None:
            gaps.append(f"function {item.function}: {item.unread} at {at(item.line)}")
            continue
        binding = names.get(item.function)
        if not isinstance(binding, FunctionBinding) or isinstance(binding.node, ast.Lambda):
            continue  # rebound, conditional, or a declared tool: not the plain function
        bound = [n for n in item.bound if not isinstance(names.get(n), ToolBinding)]
        if item.bound and not bound:
            continue
        if not item.bound and sdk_name in taken:
            continue  # a tool of that name is collected already (as in the sandbox)
        node = binding.node
        tool = StaticTool(
            len(tools),
            [sdk_name],
            {},
            node.name,
            binding.first_line,
            item.line,
            doc=ast.get_docstring(node, clean=False),
        )
        tool.schema_read = False
        tool.framework, tool.sdk_name = item.framework, sdk_name
        tools[tool.key] = tool
        for name in bound or [item.function]:
            names[name] = ToolBinding(tool.key)
            tool.names.append(name)
