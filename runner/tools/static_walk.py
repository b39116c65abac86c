"""The walk over one tool module's top-level statements (`runner.tools.static`).

Statements are taken in order, as the import would run them. Each binds names in the
`Namespace` (`runner.tools.static_values`); a ``@tool(...)`` function statement or a
``name = tool(...)(f)`` assignment makes a `StaticTool`. Inside a compound statement (``if``,
``try``, ``for``, ``while``, ``with``, ``match``) what is bound may or may not be: such names are
`Opaque` and such tools are kept with the condition as a reason (unsafe, fail closed), except
for tests that are literal (``if TYPE_CHECKING:``, ``if __name__ == "__main__":``, ``if True``),
whose taken branch is read as it runs. After the walk, ``global`` statements naming a tool, an
attribute set on a tool, and code rewriting the module's namespace (``globals()``, ``vars()``,
``exec``, ``eval``, ``setattr``, ``sys.modules``) make the tools concerned unread; ``tool`` used
in any form not listed (inside a function, in a list, through ``*args``) is a gap.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from runner import sdk
from runner.tools.static_decl import FunctionNode, StaticTool, declaration
from runner.tools.static_sdk import (
    SDK_DECORATORS,
    SDK_MODULES,
    SdkDecorator,
    SdkMark,
    SdkModule,
    sdk_mark,
)
from runner.tools.static_sdkcalls import add_handed_tools
from runner.tools.static_values import (
    FunctionBinding,
    Known,
    Namespace,
    NotLiteral,
    Opaque,
    ToolBinding,
    class_binding,
    dynamic_call,
    evaluate,
    import_binding,
    literal_test,
    value_binding,
)

__all__ = ["ModuleWalk", "StaticTool", "decorators_index"]

BARE = object()  # the tool id of a bare ``@tool``: runner.sdk.tool gets the function itself


class ModuleWalk:
    """Read one module's tree: its tools, its gaps.

    Args:
        module: the module's dotted name.
        shown: its file as diagnostics show it.
    """

    def __init__(self, module: str, shown: str) -> None:
        self.ns = Namespace(module=module)
        self.shown = shown
        self.tools: dict[int, StaticTool] = {}
        self.gaps: list[str] = []
        self.dynamic: list[str] = []
        self._sys_names: set[str] = set()
        self._understood: set[int] = set()  # ids of `tool` references read as a declaration

    def at(self, line: int) -> str:
        """``file:line`` of this module."""
        return f"{self.shown}:{line}"

    # --- the walk ---------------------------------------------------------------------------

    def run(self, tree: ast.Module) -> None:
        """Walk ``tree``'s statements, then apply what later code may change."""
        for statement in tree.body:
            self.statement(statement, None)
        add_handed_tools(tree, self.tools, self.ns.names, self.gaps, self.at)  # tool(f), ...
        self._finish(tree)

    def statement(self, node: ast.stmt, cond: str | None) -> None:
        """Read one statement; ``cond`` says under which condition it runs (None: always)."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._function(node, cond)
        elif isinstance(node, ast.ClassDef):
            self._scan(node.bases + [k.value for k in node.keywords] + node.decorator_list)
            self._bind(node.name, class_binding(node, self.ns), cond, node.lineno)
        elif isinstance(node, ast.Assign):
            self._assign(node.targets, node.value, node.lineno, cond)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._assign([node.target], node.value, node.lineno, cond)
        elif isinstance(node, ast.AugAssign):
            self._scan([node.value])
            self._targets([node.target], Opaque("changed in place", node.lineno), cond)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self._import(node, cond)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self._targets([target], None, cond)
        elif isinstance(node, ast.If):
            self._if(node, cond)
        elif isinstance(node, ast.Try | ast.TryStar):
            inner = cond or f"in the try statement at {self.at(node.lineno)}"
            for block in (node.body, *[h.body for h in node.handlers], node.orelse, node.finalbody):
                for child in block:
                    self.statement(child, inner)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
            self._compound(node, cond)
        elif isinstance(node, ast.Match):
            self._scan([node.subject])
            inner = cond or f"in the match statement at {self.at(node.lineno)}"
            for case in node.cases:
                for child in case.body:
                    self.statement(child, inner)
        else:  # expressions, assert, raise, pass, global at module level, ...
            self._scan(
                [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
            )

    def _compound(self, node: ast.stmt, cond: str | None) -> None:
        inner = cond or f"in the {type(node).__name__.lower()} statement at {self.at(node.lineno)}"
        targets: list[ast.expr] = []
        if isinstance(node, ast.For | ast.AsyncFor):
            self._scan([node.iter])
            targets.append(node.target)
        elif isinstance(node, ast.While):
            self._scan([node.test])
        elif isinstance(node, ast.With | ast.AsyncWith):
            self._scan([item.context_expr for item in node.items])
            targets.extend(item.optional_vars for item in node.items if item.optional_vars)
        self._targets(targets, Opaque(f"set {inner}", node.lineno), inner)
        for child in [*node.body, *getattr(node, "orelse", [])]:  # type: ignore[attr-defined]
            self.statement(child, inner)

    def _if(self, node: ast.If, cond: str | None) -> None:
        self._scan([node.test])
        known = literal_test(node.test, self.ns)
        if known is not None:
            for child in node.body if known else node.orelse:
                self.statement(child, cond)
            return
        inner = cond or f"under the condition at {self.at(node.lineno)}"
        for child in [*node.body, *node.orelse]:
            self.statement(child, inner)

    # --- bindings ---------------------------------------------------------------------------

    def _bind(self, name: str, binding: Any, cond: str | None, line: int) -> None:
        old = self.ns.names.get(name)
        if isinstance(old, ToolBinding) and old != binding:
            tool = self.tools[old.key]
            if cond is not None:
                tool.unread.append(f"its name {name} may be rebound {cond}")
                return
            tool.names = [n for n in tool.names if n != name]
        if binding is None:
            self.ns.names.pop(name, None)
        elif cond is not None and not isinstance(binding, ToolBinding):
            self.ns.names[name] = Opaque(f"set {cond}", line)
        else:
            self.ns.names[name] = binding
            if isinstance(binding, ToolBinding) and name not in self.tools[binding.key].names:
                self.tools[binding.key].names.append(name)

    def _targets(self, targets: list[ast.expr], binding: Any, cond: str | None) -> None:
        """Bind assignment targets: names to ``binding``, unpacked names to `Opaque`."""
        for target in targets:
            if isinstance(target, ast.Name):
                self._bind(target.id, binding, cond, target.lineno)
            elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
                inner = target.elts if not isinstance(target, ast.Starred) else [target.value]
                unpacked = None if binding is None else Opaque("unpacked", target.lineno)
                self._targets(list(inner), unpacked, cond)
            elif isinstance(target, ast.Attribute | ast.Subscript):
                self._scan([target])
                root: ast.expr = target
                while isinstance(root, ast.Attribute | ast.Subscript):
                    root = root.value
                if isinstance(root, ast.Name):
                    found = self.ns.names.get(root.id)
                    if isinstance(found, ToolBinding):
                        where = self.at(target.lineno)
                        self.tools[found.key].unread.append(
                            f"changed after its definition at {where}"
                        )

    def _import(self, node: ast.Import | ast.ImportFrom, cond: str | None) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in SDK_MODULES and (alias.asname or "." not in alias.name):
                    known = Known(SdkModule(alias.name))
                    self._bind(alias.asname or alias.name, known, cond, node.lineno)
                    continue
                if alias.name == "sys":
                    self._sys_names.add(alias.asname or "sys")
                if alias.asname is not None:
                    binding = import_binding(alias.name, None, node.lineno)
                    self._bind(alias.asname, binding, cond, node.lineno)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(top, import_binding(top, None, node.lineno), cond, node.lineno)
            return
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self._star(module, node.lineno, cond)
                continue
            decorator = SDK_DECORATORS.get((module, alias.name))
            binding = (
                Known(decorator)
                if decorator is not None
                else import_binding(module, alias.name, node.lineno)
                if node.level == 0
                else Opaque(f"imported from {module}", node.lineno)
            )
            self._bind(alias.asname or alias.name, binding, cond, node.lineno)

    def _star(self, module: str, line: int, cond: str | None) -> None:
        source = {"typing": "typing", "runner.sdk": "runner.sdk"}.get(module)
        if source is not None:
            names = sys.modules[source].__all__
            for name in names:
                self._bind(name, import_binding(source, name, line), cond, line)
            return
        rebound = Opaque(f"rebound by from {module} import *", line)
        for name in list(self.ns.names):
            self._bind(name, rebound, cond or f"by from {module} import *", line)
        self.ns.fallback = rebound

    # --- functions and tools ----------------------------------------------------------------

    def _is_tool(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Name | ast.Attribute):
            return False
        try:
            return evaluate(node, self.ns, as_type=False) is sdk.tool
        except NotLiteral:
            return False

    def _sdk_decorator(self, node: ast.expr) -> SdkDecorator | None:
        """The SDK tool decorator ``node`` names (called or not), or None."""
        target = node.func if isinstance(node, ast.Call) else node
        if isinstance(target, ast.Name):
            found = self.ns.names.get(target.id)
            value = found.value if isinstance(found, Known) else None
            return value if isinstance(value, SdkDecorator) else None
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            found = self.ns.names.get(target.value.id)
            value = found.value if isinstance(found, Known) else None
            if isinstance(value, SdkModule):
                return SDK_DECORATORS.get((value.module, target.attr))
        return None

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cond: str | None) -> None:
        decorators = node.decorator_list
        first = min([d.lineno for d in decorators] + [node.lineno])
        marks = [
            d
            for d in decorators
            if self._is_tool(d) or (isinstance(d, ast.Call) and self._is_tool(d.func))
        ]
        for mark in marks:
            self._understood.add(id(mark.func if isinstance(mark, ast.Call) else mark))
        self._scan([*decorators, *node.args.defaults, *(d for d in node.args.kw_defaults if d)])
        sdk_marks = [(d, self._sdk_decorator(d)) for d in decorators]
        sdks = [(d, sdk_mark(d, found)) for d, found in sdk_marks if found is not None]
        if sdks:
            self._sdk_function(node, cond, first, marks, sdks)
            return
        if not marks:
            if decorators:
                self.gaps.append(
                    f"function {node.name} at {self.at(first)} has a decorator that is not "
                    "runner.sdk.tool (a tool it may make is not seen)"
                )
                binding: Any = Opaque("a decorated function", node.lineno)
            else:
                binding = FunctionBinding(node, first)
            self._bind(node.name, binding, cond, node.lineno)
            return
        tool = self._tool(marks[-1], node, first, cond)
        if tool is None:
            self._bind(
                node.name, Opaque("a tool whose id is not literal", node.lineno), cond, node.lineno
            )
            return
        if len(decorators) > 1:
            tool.unread.append(
                f"it has decorators besides runner.sdk.tool ({self.at(first)}): a decorator"
                " the reading does not know may change what the module binds"
            )
        self._bind(node.name, ToolBinding(tool.key), cond, node.lineno)

    def _sdk_function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        cond: str | None,
        first: int,
        marks: list[ast.expr],
        sdks: list[tuple[ast.expr, SdkMark]],
    ) -> None:
        """A function an SDK's decorator makes a tool of, with a ``@tool`` declaration or not.

        The outermost SDK decorator names the tool the module binds; ``@tool`` stacked in
        either order declares its id and effect (`runner.tools.static_sdk`).
        """
        outer, mark = sdks[0]
        sdk_name = mark.name or node.name
        tool: StaticTool | None
        if marks:
            tool = self._tool(marks[-1], node, first, cond)
            if tool is not None and decorators_index(node, marks[-1]) < decorators_index(
                node, outer
            ):  # @tool over the SDK's: the schema is the SDK's, computed by the SDK only
                tool.schema_read = False
                tool.parameters = []
                tool.unread = [u for u in tool.unread if "parameter" not in u]
        else:
            doc = ast.get_docstring(node, clean=False)
            tool = StaticTool(len(self.tools), [sdk_name], {}, node.name, first, mark.line, doc=doc)
            tool.schema_read = False
            if cond is not None:
                tool.conditional = True
                tool.unread.append(f"it is defined {cond}")
            self.tools[tool.key] = tool
        if tool is None:
            self._bind(node.name, Opaque("a tool whose id is not literal", node.lineno), cond, 0)
            return
        tool.framework, tool.sdk_name = mark.framework, sdk_name
        if mark.unread is not None:
            tool.unread.append(f"{mark.unread} ({self.at(mark.line)})")
        if len(node.decorator_list) > len(marks) + len(sdks):
            tool.unread.append(
                f"it has decorators besides runner.sdk.tool and its SDK's ({self.at(first)})"
            )
        self._bind(node.name, ToolBinding(tool.key), cond, node.lineno)

    def _tool(
        self, mark: ast.expr, node: FunctionNode, first_line: int, cond: str | None
    ) -> StaticTool | None:
        """The tool a ``tool`` decorator (or ``tool(...)`` call) makes of ``node``."""
        found = declaration(
            self.ns, self.at, self.gaps, len(self.tools), mark, node, first_line, cond
        )
        if found is not None:
            self.tools[found.key] = found
        return found

    def _assign(
        self, targets: list[ast.expr], value: ast.expr, line: int, cond: str | None
    ) -> None:
        made = self._call_form(value, line, cond)
        binding: Any
        if isinstance(made, StaticTool):
            binding = ToolBinding(made.key)
        elif made is not None:
            binding = made
        elif isinstance(value, ast.Name) and isinstance(self.ns.names.get(value.id), ToolBinding):
            binding = self.ns.names[value.id]  # another name of the same tool
        else:
            self._scan([value])
            binding = value_binding(value, self.ns, line)
        self._targets(targets, binding, cond)

    def _call_form(
        self, value: ast.expr, line: int, cond: str | None
    ) -> StaticTool | Opaque | None:
        """``tool(...)(f)`` (f a function or lambda of the module); None for anything else."""
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Call)
            and self._is_tool(value.func.func)
        ):
            return None
        self._understood.add(id(value.func.func))
        self._scan([value.func])
        target = value.args[0] if len(value.args) == 1 and not value.keywords else None
        bound = self.ns.names.get(target.id) if isinstance(target, ast.Name) else None
        if isinstance(target, ast.Lambda):
            return self._tool(value.func, target, target.lineno, cond) or Opaque("a tool", line)
        if isinstance(bound, FunctionBinding):
            return self._tool(value.func, bound.node, bound.first_line, cond) or Opaque(
                "a tool", line
            )
        if isinstance(bound, Known):
            return Opaque("a tool of a function defined elsewhere", line)  # not collected
        self.gaps.append(
            f"runner.sdk.tool(...) applied to something not followed at {self.at(line)}"
        )
        return Opaque("a tool(...) application not followed", line)

    # --- what later code may change ---------------------------------------------------------

    def _tool_reference(self, node: ast.AST) -> bool:
        if id(node) in self._understood:
            return False
        if isinstance(node, ast.Name):
            found = self.ns.names.get(node.id)
            return isinstance(found, Known) and found.value is sdk.tool
        return isinstance(node, ast.Attribute) and node.attr == "tool" and self._is_tool(node)

    def _scan(self, nodes: list[Any]) -> None:
        """Module-level expressions: ``:=`` bindings, namespace rewriting, stray ``tool``."""
        for node in nodes:
            for sub in ast.walk(node):
                line = getattr(sub, "lineno", 0)
                if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                    self._bind(sub.target.id, Opaque("set by :=", line), None, line)
                elif self._dynamic_call(sub):
                    self.dynamic.append(f"{self._dynamic_call(sub)} at {self.at(line)}")
                elif self._tool_reference(sub):
                    self.gaps.append(
                        f"runner.sdk.tool used in a form not followed at {self.at(line)}"
                    )

    def _dynamic_call(self, node: ast.AST) -> str:
        return dynamic_call(node, self.ns, self._sys_names)

    def _finish(self, tree: ast.Module) -> None:
        seen: set[int] = set()
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            name = getattr(func, "name", "<lambda>")
            body = func.body if isinstance(func.body, list) else [func.body]
            for sub in (n for part in body for n in ast.walk(part)):
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                line = getattr(sub, "lineno", 0)
                if isinstance(sub, ast.Global):
                    for target in sub.names:
                        bound = self.ns.names.get(target)
                        if isinstance(bound, ToolBinding):
                            self.tools[bound.key].unread.append(
                                f"function {name} may rebind it (global at {self.at(line)})"
                            )
                elif self._dynamic_call(sub) in ("globals()", "sys.modules"):
                    self.dynamic.append(f"{self._dynamic_call(sub)} in {name} at {self.at(line)}")
                elif self._tool_reference(sub):
                    self.gaps.append(
                        f"runner.sdk.tool used inside function {name} at {self.at(line)} "
                        "(a tool it makes is not seen)"
                    )
        if self.dynamic:
            why = "the module may rewrite its own namespace (" + "; ".join(self.dynamic[:3]) + ")"
            self.gaps.append(why)
            for tool in self.tools.values():
                tool.unread.append(why)
        self.gaps = list(dict.fromkeys(self.gaps))

    def collected(self) -> list[StaticTool]:
        """The tools `runner.sdk.collect_tools` would collect, in its order."""
        found = []
        for tool in self.tools.values():
            if not tool.names:
                continue  # rebound or deleted: no module name holds it any more
            tool.qualname = (
                tool.func_name if tool.func_name in tool.names else sorted(tool.names)[0]
            )
            found.append(tool)
        return sorted(found, key=lambda t: (t.first_line, t.qualname))


def decorators_index(node: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr) -> int:
    """Where ``decorator`` is in ``node``'s list (0: the outermost, applied last)."""
    return next(i for i, d in enumerate(node.decorator_list) if d is decorator)
