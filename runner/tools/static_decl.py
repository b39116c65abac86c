"""One ``tool(...)`` declaration as read from source (`runner.tools.static_walk`).

The arguments of the ``tool`` call are evaluated as literals
(`runner.tools.static_values.evaluate`); an id that is not literal leaves no tool (a gap of the
module), an effect that is not literal leaves the tool ``unsafe`` with the reason. The function's
parameters become `inspect.Parameter` objects with their kinds, annotations evaluated to the
same `typing` objects the runtime sees, and literal defaults (only ``None`` or not matters to
the schema); one that is not read leaves the tool without a schema, ``unsafe``, with the reason.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.tools.static_values import (
    FunctionBinding,
    Namespace,
    NotLiteral,
    ToolBinding,
    evaluate,
)

__all__ = [
    "BARE",
    "NO_VALUE",
    "StaticTool",
    "declaration",
    "default_value",
    "parameters",
    "snippet",
]

BARE = object()  # the tool id of a bare ``@tool``: runner.sdk.tool is given the function
NO_VALUE = object()  # a default that is not read
_TOOL_ARGS = ("tool_id", "effect", "description")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@dataclass
class StaticTool:
    """One tool as read: what `runner.sdk.tool` will be given, and what was not read.

    Attributes:
        key: its number in the walk.
        args: the positional arguments of ``tool(...)`` as literals (`BARE` for a bare
            ``@tool``; an effect not read is None, a description not read is empty).
        kwargs: its keyword arguments, likewise (one not read is left out).
        func_name: the function's ``__name__`` (``<lambda>`` for a lambda).
        first_line: the function's first line (its first decorator's, as ``co_firstlineno``).
        line: the line of the ``tool`` call, for messages.
        parameters: the parameters read (annotations evaluated, literal defaults).
        schema_read: False when an annotation or a default was not read.
        doc: the function's docstring, raw.
        unread: why the tool cannot be vouched for (empty: fully read).
        conditional: it is defined under a condition.
        names: module names bound to it, in order.
        qualname: set by `ModuleWalk.collected`.
        framework: the agent SDK whose decorator made it a tool (`runner.tools.static_sdk`),
            or None.
        sdk_name: the name that SDK offers it under, or None.
    """

    key: int
    args: list[Any]
    kwargs: dict[str, Any]
    func_name: str
    first_line: int
    line: int
    parameters: list[inspect.Parameter] = field(default_factory=list)
    schema_read: bool = True
    doc: str | None = None
    unread: list[str] = field(default_factory=list)
    conditional: bool = False
    names: list[str] = field(default_factory=list)
    qualname: str = ""
    framework: str | None = None
    sdk_name: str | None = None

    @property
    def tool_id(self) -> Any:
        """The id given (any literal: `runner.sdk.tool` checks it), or None."""
        return self.args[0] if self.args else self.kwargs.get("tool_id")


def snippet(node: ast.expr) -> str:
    """The expression's source, short (what the diagnostic shows)."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        return type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def declaration(
    ns: Namespace,
    at: Callable[[int], str],
    gaps: list[str],
    key: int,
    mark: ast.expr,
    node: FunctionNode,
    first_line: int,
    cond: str | None,
) -> StaticTool | None:
    """The tool a ``tool`` decorator (or ``tool(...)`` call) ``mark`` makes of ``node``.

    Args:
        ns: the module's names at this point.
        at: ``file:line`` of a line of the module.
        gaps: where a tool that cannot be made (its id not literal) is noted.
        key: the new tool's number.
        mark: the decorator, or the ``tool(...)`` call of ``name = tool(...)(f)``.
        node: the function (or lambda).
        first_line: its first line (``co_firstlineno``).
        cond: the condition it is defined under, or None.

    Returns:
        The tool, or None when its id is not literal (then a gap).
    """
    line = mark.lineno
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    unread: list[str] = []
    if not isinstance(mark, ast.Call):
        args.append(BARE)  # a bare @tool: runner.sdk.tool is given the function
    elif any(isinstance(a, ast.Starred) for a in mark.args) or any(
        k.arg is None for k in mark.keywords
    ):
        gaps.append(f"runner.sdk.tool called with *args or **kwargs at {at(line)}")
        return None
    else:
        given: list[tuple[int | None, str | None, ast.expr]] = [
            (i, None, a) for i, a in enumerate(mark.args)
        ]
        given += [(None, k.arg, k.value) for k in mark.keywords]
        for position, keyword, expr in given:
            role = keyword or (
                _TOOL_ARGS[position] if position is not None and position < 3 else ""
            )
            try:
                value = evaluate(expr, ns, as_type=False)
            except NotLiteral:
                what = f"({snippet(expr)}) at {at(expr.lineno)}"
                if role == "tool_id":
                    gaps.append(f"a tool id given by a non-literal expression {what}")
                    return None
                if role == "effect":
                    unread.append(f"effect given by a non-literal expression {what}")
                value = None if role == "effect" else ""  # a description is not vouched for
                if keyword is not None:
                    continue
            if keyword is None:
                args.append(value)
            else:
                kwargs[keyword] = value
    func_name = node.name if not isinstance(node, ast.Lambda) else "<lambda>"
    doc = ast.get_docstring(node, clean=False) if not isinstance(node, ast.Lambda) else None
    tool = StaticTool(key, args, kwargs, func_name, first_line, line, doc=doc)
    if cond is not None:
        tool.conditional = True
        tool.unread.append(f"it is defined {cond}")
    tool.unread.extend(unread)
    tool.parameters = parameters(tool, node.args, ns, at)
    return tool


def parameters(
    tool: StaticTool, spec: ast.arguments, ns: Namespace, at: Callable[[int], str]
) -> list[inspect.Parameter]:
    """The parameters as `inspect.signature` gives them; what is not read is noted."""
    P = inspect.Parameter
    positional = [*spec.posonlyargs, *spec.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(spec.defaults))
    defaults += spec.defaults
    rows: list[tuple[ast.arg, Any, ast.expr | None]] = [
        (arg, P.POSITIONAL_ONLY if i < len(spec.posonlyargs) else P.POSITIONAL_OR_KEYWORD, d)
        for i, (arg, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if spec.vararg is not None:
        rows.append((spec.vararg, P.VAR_POSITIONAL, None))
    rows += [(a, P.KEYWORD_ONLY, d) for a, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True)]
    if spec.kwarg is not None:
        rows.append((spec.kwarg, P.VAR_KEYWORD, None))
    parameters = []
    for arg, kind, default in rows:
        annotation: Any = P.empty
        if arg.annotation is not None:
            try:
                annotation = evaluate(arg.annotation, ns, as_type=True)
            except NotLiteral as exc:
                tool.schema_read = False
                tool.unread.append(
                    f"parameter {arg.arg!r} has a type the reading does not follow "
                    f"({exc.what}) at {at(arg.lineno)}"
                )
                continue
        value: Any = P.empty if default is None else default_value(default, ns)
        if value is NO_VALUE:
            tool.schema_read = False
            line = default.lineno if default is not None else arg.lineno
            shown = f" ({snippet(default)})" if default is not None else ""
            tool.unread.append(
                f"the default of parameter {arg.arg!r} is not a literal{shown} at {at(line)}"
            )
            continue
        parameters.append(P(arg.arg, kind, default=value, annotation=annotation))
    return parameters


def default_value(node: ast.expr, ns: Namespace) -> Any:
    """A default's value, or something that is certainly not None, or `NO_VALUE`."""
    if isinstance(node, ast.Name) and isinstance(
        ns.names.get(node.id), FunctionBinding | ToolBinding
    ):
        return object()  # a function: certainly not None
    try:
        return evaluate(node, ns, as_type=False)
    except NotLiteral:
        pass
    try:
        return ast.literal_eval(node)
    except Exception:
        return NO_VALUE
