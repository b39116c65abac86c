"""Plain functions an agent hands to an SDK's tool-making call, found in its module's source.

Standard library only, Python 3.9+; nothing is imported or run (`ast` only). The one reading
of these hand-overs, used by the host's static reading (``check``:
`runner.tools.static_sdkcalls`) and by the sandbox's description (`runner.sdk.handed`), so
that the two agree. What it recognises and what it leaves out: `runner.sdk.handed`'s
docstring; the calls: `MAKERS`.
"""

import ast
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

__all__ = ["MAKERS", "Handed", "Maker", "Scan", "scan"]


class Maker(NamedTuple):
    """An SDK call that makes tools of the functions it is given.

    Attributes:
        framework: `runner.sdk.sdktools.FRAMEWORKS` key.
        position: the positional index of its tools (or of the function).
        keyword: the keyword of its tools (or of the function).
        single: the argument is one function (``tool(f)``), not a list of tools.
        name_keyword: the keyword naming the tool ("" when none does).
        name_position: the positional index of a name (-1 when none).
    """

    framework: str
    position: int
    keyword: str
    single: bool = False
    name_keyword: str = ""
    name_position: int = -1


_GRAPH_AGENT = Maker("langchain", 1, "tools")
_TOOL_NODE = Maker("langchain", 0, "tools")
_FROM_FUNCTION = Maker("langchain", 0, "func", True, "name", 1)
_LC_TOOL = Maker("langchain", 0, "name_or_callable", True)
_AGENTS = Maker("openai-agents", 0, "func", True, "name_override")
_ANTHROPIC = Maker("anthropic", 0, "func", True, "name")
_BIND_TOOLS = Maker("langchain", 0, "tools")

MAKERS: Dict[str, Maker] = {
    "langgraph.prebuilt.create_react_agent": _GRAPH_AGENT,
    "langgraph.prebuilt.chat_agent_executor.create_react_agent": _GRAPH_AGENT,
    "langchain.agents.create_agent": _GRAPH_AGENT,
    "langgraph.prebuilt.ToolNode": _TOOL_NODE,
    "langgraph.prebuilt.tool_node.ToolNode": _TOOL_NODE,
    "langchain_core.tools.StructuredTool.from_function": _FROM_FUNCTION,
    "langchain_core.tools.structured.StructuredTool.from_function": _FROM_FUNCTION,
    "langchain.tools.StructuredTool.from_function": _FROM_FUNCTION,
    "langchain_core.tools.tool": _LC_TOOL,
    "langchain.tools.tool": _LC_TOOL,
    "langchain.agents.tool": _LC_TOOL,
    "agents.function_tool": _AGENTS,
    "agents.tool.function_tool": _AGENTS,
    "anthropic.beta_tool": _ANTHROPIC,
    "anthropic.beta_async_tool": _ANTHROPIC,
    "anthropic.lib.tools.beta_tool": _ANTHROPIC,
    "anthropic.lib.tools.beta_async_tool": _ANTHROPIC,
}
"""The dotted path a call resolves to (through the module's imports) -> the maker."""


_SDK_ROOTS = {m.split(".")[0] for m in MAKERS}


class Handed(NamedTuple):
    """A module-level function handed to an SDK's tool-making call.

    Attributes:
        function: its name in the module.
        def_line: its ``def`` line.
        framework: the SDK.
        name: the tool name the call gives literally, or None (the function's ``__name__``).
        line: the call's line.
        bound: the module-level names the made tool is assigned to (``x = function_tool(f)``
            as a module statement): that object is collected as it is; empty otherwise.
        unread: why the call's tool name cannot be read (no tool is made), or None.
    """

    function: str
    def_line: int
    framework: str
    name: Optional[str]
    line: int
    bound: Tuple[str, ...] = ()
    unread: Optional[str] = None


class Scan(NamedTuple):
    """What `scan` found: the functions handed over, and what was handed but not taken."""

    handed: List[Handed]
    unseen: List[Tuple[int, str]]


def _origins(tree: ast.Module) -> Dict[str, str]:
    """Name -> the dotted path its import binds (every import of the module, at any depth)."""
    found: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    found[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = node.module + "." + alias.name
    return found


def _dotted(node: ast.expr, origins: Dict[str, str]) -> Optional[str]:
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in origins:
        return None
    return ".".join([origins[node.id], *reversed(parts)])


def _own(body: List[ast.stmt]) -> List[ast.AST]:
    """The nodes of ``body`` outside nested functions, lambdas and classes."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    found: List[ast.AST] = []
    todo: List[ast.AST] = [node for node in body if not isinstance(node, nested)]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))
    return found


def _scopes(tree: ast.Module) -> List[Tuple[Optional[ast.AST], List[ast.AST]]]:
    """(function or None for the module, its own nodes) of the module and every function."""
    scopes: List[Tuple[Optional[ast.AST], List[ast.AST]]] = [(None, _own(tree.body))]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append((node, _own(node.body)))
    return scopes


def _assigned(nodes: List[ast.AST]) -> Dict[str, List[ast.expr]]:
    """Name -> the values assigned to it among ``nodes`` (for a list of tools given by name)."""
    found: Dict[str, List[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(value)
    return found


def _local_names(scope: Optional[ast.AST], nodes: List[ast.AST]) -> Set[str]:
    if scope is None:
        return set()
    args = scope.args  # type: ignore[attr-defined]
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _argument(call: ast.Call, position: int, keyword: str) -> Optional[ast.expr]:
    for given in call.keywords:
        if given.arg == keyword:
            return given.value
    if position >= 0 and len(call.args) > position:
        found = call.args[position]
        return None if isinstance(found, ast.Starred) else found
    return None


def _maker(call: ast.Call, origins: Dict[str, str], langchain: bool) -> Optional[Maker]:
    if langchain and isinstance(call.func, ast.Attribute) and call.func.attr == "bind_tools":
        return _BIND_TOOLS
    dotted = _dotted(call.func, origins)
    return MAKERS.get(dotted) if dotted is not None else None


def _name(call: ast.Call, maker: Maker) -> Tuple[Optional[str], Optional[str]]:
    """(the literal name or None, why it is not read or None)."""
    if not maker.name_keyword:
        return None, None
    given = _argument(call, maker.name_position, maker.name_keyword)
    if given is None or (isinstance(given, ast.Constant) and given.value is None):
        return None, None
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value, None
    return None, "its tool name is not a literal"


def scan(tree: ast.Module) -> Scan:
    """The module-level functions ``tree`` hands to an SDK's tool-making call (module doc).

    Returns:
        The functions handed over (one each, in the order of their calls' lines), and the
        ``(line, what)`` of what was handed over but is not taken.
    """
    origins = _origins(tree)
    roots = {o.split(".")[0] for o in origins.values()}
    if not roots & _SDK_ROOTS and not any(r.startswith("langchain") for r in roots):
        return Scan([], [])  # no SDK imported: nothing can be handed to one (most modules)
    langchain = any(o.startswith(("langchain", "langgraph")) for o in origins.values())
    defs = {
        n.name: n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.decorator_list
    }
    decorated = {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.decorator_list
    }
    module_lists = _assigned(_own(tree.body))
    bound: Dict[int, Tuple[str, ...]] = {}
    for statement in tree.body:
        value = getattr(statement, "value", None)
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names = tuple(t.id for t in targets if isinstance(t, ast.Name))
            bound[id(value)] = names
    found: List[Handed] = []
    unseen: List[Tuple[int, str]] = []
    for scope, nodes in _scopes(tree):
        local = _local_names(scope, nodes)
        lists = _assigned(nodes) if scope is not None else module_lists
        calls = sorted(
            (n for n in nodes if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset)
        )
        for call in calls:
            maker = _maker(call, origins, langchain)
            if maker is None:
                continue
            given = _argument(call, maker.position, maker.keyword)
            if given is None:
                continue
            elements: List[ast.expr] = [given]
            if not maker.single:
                values = lists.get(given.id, []) if isinstance(given, ast.Name) else [given]
                if isinstance(given, ast.Name) and not values and scope is not None:
                    values = module_lists.get(given.id, [])
                elements = [
                    e for v in values if isinstance(v, (ast.List, ast.Tuple)) for e in v.elts
                ]
            name, unread = _name(call, maker)
            for element in elements:
                if isinstance(element, ast.Lambda):
                    unseen.append((call.lineno, "a lambda (a tool needs a named function)"))
                elif not isinstance(element, ast.Name) or element.id in decorated:
                    continue  # a tool object, a call made elsewhere, a declared tool
                elif element.id in local and scope is not None:
                    continue  # a local name: not the module's function
                elif element.id in defs:
                    node = defs[element.id]
                    first = node.lineno
                    made = bound.get(id(call), ()) if maker.single else ()
                    found.append(
                        Handed(element.id, first, maker.framework, name, call.lineno, made, unread)
                    )
                elif element.id in origins:
                    unseen.append(
                        (
                            call.lineno,
                            "function {} is imported from {} (the module defining it is"
                            " read for its own hand-overs)".format(
                                element.id, origins[element.id].rpartition(".")[0]
                            ),
                        )
                    )
    return Scan(_once(found), unseen)


def _once(found: List[Handed]) -> List[Handed]:
    """One `Handed` per function: a module-level assignment's first, else the first call's."""
    order = sorted(found, key=lambda h: (not h.bound, h.line))
    kept: Dict[str, Handed] = {}
    for handed in order:
        kept.setdefault(handed.function, handed)
    return sorted(kept.values(), key=lambda h: h.line)
