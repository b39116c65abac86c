"""What a tool module's names stand for, read from its source without running it.

`runner.tools.static` walks a module's top-level statements in order and keeps a
`Namespace`: each module-level name is bound to a `Known` host object (a `typing` object, a
builtin, a literal constant, `runner.sdk.tool`, `runner.sdk.Effect` or one of its members, a
`TypedDict` class rebuilt from the module's own class statement), a function statement, a tool,
or an `Opaque` value the reading does not follow (an import from elsewhere, a call, a value set
under a condition), with the reason and the line.

`evaluate` turns an expression into a host object with nothing but these bindings: constants,
names, attribute access on `typing`, ``runner``/``runner.sdk`` and `Effect`, subscripts of
`typing` forms and builtin generics, ``X | Y``, ``Effect("read")`` and the functional
``TypedDict("T", {...})``. A string in a type position is a forward reference, parsed and
evaluated the same way (as `typing.get_type_hints` does at run time); ``Annotated[T, ...]`` is
``T`` (``get_type_hints`` strips it). Anything else raises `NotLiteral` with what it was and
where: the caller makes the tool ``unsafe`` (fail closed) and says why.

Invariant: nothing of the module is imported, executed or ``eval``'d; the only code that runs is
`typing`'s own (subscripting its forms, building a ``TypedDict`` class from read annotations)
and `runner.sdk`'s.
"""

from __future__ import annotations

import ast
import builtins
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import runner
from runner import sdk
from runner.sdk import pyparse

__all__ = [
    "FunctionBinding",
    "Known",
    "Namespace",
    "NotLiteral",
    "Opaque",
    "ToolBinding",
    "class_binding",
    "dynamic_call",
    "evaluate",
    "import_binding",
    "literal_test",
    "typeddict_class",
    "value_binding",
]

MAX_DEPTH = 50  # nested forward references and subscripts; deeper is not literal
_MODULE_NAMES: dict[str, frozenset[str] | None] = {
    "typing": None,  # any public attribute
    "runner": frozenset({"sdk"}),
    "runner.sdk": frozenset(sdk.__all__),
}


class NotLiteral(Exception):
    """An expression the static reading does not follow.

    Args:
        what: what it is, e.g. ``a call`` or ``name Ticket imported from models``.
        line: its line in the module.
    """

    def __init__(self, what: str, line: int) -> None:
        super().__init__(what)
        self.what = what
        self.line = line


@dataclass(frozen=True)
class Known:
    """A name bound to a host object known exactly (see the module docstring)."""

    value: Any


@dataclass(frozen=True)
class Opaque:
    """A name bound to something the reading does not follow, and why."""

    why: str
    line: int


@dataclass(frozen=True)
class FunctionBinding:
    """A name bound to a plain function (or lambda) defined in the module."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    first_line: int


@dataclass(frozen=True)
class ToolBinding:
    """A name bound to the tool numbered ``key`` (the same tool may have several names)."""

    key: int


Binding = Known | Opaque | FunctionBinding | ToolBinding


@dataclass
class Namespace:
    """The module's names at one point of the reading.

    Attributes:
        names: module-level name -> binding.
        module: the module's dotted name (``__module__`` of the classes rebuilt).
        fallback: what an unbound name may be after a star import from a module not followed.
    """

    names: dict[str, Binding] = field(default_factory=dict)
    module: str = ""
    fallback: Opaque | None = None  # after ``from elsewhere import *``: any unbound name

    def lookup(self, name: str, line: int) -> Any:
        """The host object ``name`` stands for at ``line``.

        Raises:
            NotLiteral: the name is bound to something not followed, or not bound at all.
        """
        binding = self.names.get(name)
        if isinstance(binding, Known):
            return binding.value
        if isinstance(binding, Opaque):
            raise NotLiteral(f"{name} is {binding.why} (line {binding.line})", line)
        if binding is not None:
            raise NotLiteral(f"{name} is a function of the module", line)
        if self.fallback is not None:
            raise NotLiteral(f"{name} may be {self.fallback.why} (line {self.fallback.line})", line)
        if hasattr(builtins, name) and not name.startswith("_"):
            return getattr(builtins, name)
        raise NotLiteral(f"name {name} is not defined before this line", line)


def import_binding(module: str, attribute: str | None, line: int) -> Binding:
    """The binding of ``import module`` (attribute None) or ``from module import attribute``.

    Only `typing`, ``runner`` and ``runner.sdk`` are followed (they are standard library or
    this package, the same inside the sandbox); anything else is `Opaque`.
    """
    if module not in _MODULE_NAMES:
        return Opaque(f"imported from {module}", line)
    target: Any = {"typing": typing, "runner": runner, "runner.sdk": sdk}[module]
    if attribute is None:
        return Known(target)
    allowed = _MODULE_NAMES[module]
    if (allowed is not None and attribute not in allowed) or not hasattr(target, attribute):
        return Opaque(f"imported from {module}", line)
    return Known(getattr(target, attribute))


def _attribute(value: Any, name: str, line: int) -> Any:
    if isinstance(value, types.ModuleType) and value.__name__ in _MODULE_NAMES:
        allowed = _MODULE_NAMES[value.__name__]
        public = allowed is None and not name.startswith("_")
        if (public or (allowed and name in allowed)) and hasattr(value, name):
            return getattr(value, name)
    if value is sdk.Effect and name in sdk.Effect.__members__:
        return sdk.Effect[name]
    raise NotLiteral(f"attribute .{name} of something not followed", line)


def _forward(text: str, ns: Namespace, line: int, depth: int) -> Any:
    try:
        tree = pyparse.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotLiteral(f"forward reference {text[:60]!r} is not an expression", line) from None
    return evaluate(tree.body, ns, as_type=True, depth=depth + 1, line=line)


def _literal_argument(node: ast.expr, ns: Namespace, depth: int) -> Any:
    """A value inside ``Literal[...]``: a constant, ``-1``, a known name, a nested Literal."""
    if isinstance(node, ast.Constant):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float | complex)
    ):
        number = node.operand.value
        return -number if isinstance(node.op, ast.USub) else number
    return evaluate(node, ns, as_type=False, depth=depth + 1)


def _subscript(node: ast.Subscript, ns: Namespace, depth: int) -> Any:
    base = evaluate(node.value, ns, as_type=False, depth=depth + 1)
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base is typing.Annotated:
        return evaluate(items[0], ns, as_type=True, depth=depth + 1)  # get_type_hints strips it
    if base is typing.Literal:
        args = [_literal_argument(item, ns, depth) for item in items]
    else:
        args = [evaluate(item, ns, as_type=True, depth=depth + 1) for item in items]
    try:
        return base[tuple(args) if len(args) > 1 else args[0]]
    except Exception as exc:
        raise NotLiteral(f"typing refused it ({type(exc).__name__}: {exc})", node.lineno) from None


def _call(node: ast.Call, ns: Namespace, depth: int) -> Any:
    func = evaluate(node.func, ns, as_type=False, depth=depth + 1)
    starred = any(isinstance(a, ast.Starred) for a in node.args)
    if starred or any(k.arg is None for k in node.keywords):
        raise NotLiteral("a call with *args or **kwargs", node.lineno)
    if func is sdk.Effect and len(node.args) == 1 and not node.keywords:
        value = evaluate(node.args[0], ns, as_type=False, depth=depth + 1)
        try:
            return sdk.Effect(value)
        except ValueError:
            raise NotLiteral(f"Effect({value!r}) is not an effect class", node.lineno) from None
    if func is typing.TypedDict and len(node.args) == 2 and isinstance(node.args[1], ast.Dict):
        name = evaluate(node.args[0], ns, as_type=False, depth=depth + 1)
        keys = [
            evaluate(k, ns, as_type=False, depth=depth + 1) if k else None
            for k in node.args[1].keys
        ]
        if not isinstance(name, str) or not all(isinstance(k, str) for k in keys):
            raise NotLiteral("a TypedDict call without literal names", node.lineno)
        fields = {
            str(k): evaluate(v, ns, as_type=True, depth=depth + 1)
            for k, v in zip(keys, node.args[1].values, strict=True)
        }
        options = {k.arg: _literal_argument(k.value, ns, depth) for k in node.keywords}
        if set(options) - {"total"} or not isinstance(options.get("total", True), bool):
            raise NotLiteral("a TypedDict call with options other than total=", node.lineno)
        return typeddict_class(name, (), fields, bool(options.get("total", True)), ns.module)
    raise NotLiteral("a call", node.lineno)


def evaluate(
    node: ast.expr, ns: Namespace, *, as_type: bool, depth: int = 0, line: int | None = None
) -> Any:
    """The host object ``node`` stands for, read with ``ns`` alone.

    Args:
        node: the expression.
        ns: the module's names at this point.
        as_type: the expression is a type (a string in it is a forward reference).
        depth: nesting so far (at most `MAX_DEPTH`).
        line: the line to name for a forward reference's parts (default the node's).

    Raises:
        NotLiteral: anything the module docstring does not list.
    """
    where = line if line is not None else getattr(node, "lineno", 0)
    if depth > MAX_DEPTH:
        raise NotLiteral("an expression nested too deeply", where)
    value: Any
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.Name):
        value = ns.lookup(node.id, where)
    elif isinstance(node, ast.Attribute):
        value = _attribute(
            evaluate(node.value, ns, as_type=False, depth=depth + 1), node.attr, where
        )
    elif isinstance(node, ast.Subscript):
        value = _subscript(node, ns, depth)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and as_type:
        left = evaluate(node.left, ns, as_type=True, depth=depth + 1)
        right = evaluate(node.right, ns, as_type=True, depth=depth + 1)
        try:
            value = left | right
        except Exception as exc:
            raise NotLiteral(f"X | Y refused ({type(exc).__name__}: {exc})", where) from None
    elif isinstance(node, ast.Call):
        value = _call(node, ns, depth)
    else:
        raise NotLiteral(f"a {type(node).__name__} expression", where)
    if as_type and isinstance(value, str):
        return _forward(value, ns, where, depth)
    return value


def typeddict_class(
    name: str, bases: tuple[type, ...], fields: dict[str, Any], total: bool, module: str
) -> type:
    """A ``TypedDict`` class with these read field types, as the class statement makes it.

    Args:
        name: the class name.
        bases: TypedDict classes rebuilt before (empty: ``TypedDict`` itself).
        fields: field name -> type (already evaluated: no forward references left).
        total: the class's ``total=``.
        module: its ``__module__``.
    """

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(__annotations__=dict(fields), __module__=module, __qualname__=name)

    parents: tuple[Any, ...] = bases or (typing.TypedDict,)
    made: type = types.new_class(name, parents, {"total": total}, body)
    return made


def is_typeddict(value: Any) -> bool:
    """True for ``typing.TypedDict`` itself or a TypedDict class rebuilt here."""
    return value is typing.TypedDict or typing.is_typeddict(value)


def class_binding(node: ast.ClassDef, ns: Namespace) -> Known | Opaque:
    """A rebuilt TypedDict class for a plain TypedDict statement, else `Opaque`."""
    try:
        bases = [evaluate(b, ns, as_type=False) for b in node.bases]
        options = {k.arg: evaluate(k.value, ns, as_type=False) for k in node.keywords}
    except NotLiteral as exc:
        return Opaque(f"a class ({exc.what})", node.lineno)
    if not bases or not all(is_typeddict(b) for b in bases) or node.decorator_list:
        return Opaque("a class", node.lineno)
    if set(options) - {"total"} or not isinstance(options.get("total", True), bool):
        return Opaque("a TypedDict with options other than total=", node.lineno)
    fields: dict[str, Any] = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not item.value:
            try:
                fields[item.target.id] = evaluate(item.annotation, ns, as_type=True)
            except NotLiteral as exc:
                return Opaque(f"a TypedDict with field {item.target.id} ({exc.what})", item.lineno)
        elif not (
            isinstance(item, ast.Pass)
            or (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant))
        ):
            return Opaque("a TypedDict with a statement that is not a field", item.lineno)
    parents = tuple(b for b in bases if isinstance(b, type))  # TypedDict itself is not
    total = bool(options.get("total", True))
    try:
        return Known(typeddict_class(node.name, parents, fields, total, ns.module))
    except Exception as exc:  # typing refused the class (the import would fail too)
        return Opaque(f"a TypedDict typing refused ({type(exc).__name__})", node.lineno)


def literal_test(test: ast.expr, ns: Namespace) -> bool | None:
    """True/False for an ``if`` test known at import time (``TYPE_CHECKING``, ``__main__``).

    Args:
        test: the test expression.
        ns: the module's names so far.

    Returns:
        The test's value when it is a literal bool (a module is never ``__main__`` on
        import), else None.
    """
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq | ast.NotEq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    ):
        return isinstance(test.ops[0], ast.NotEq)  # a module is never __main__ on import
    try:
        value = evaluate(test, ns, as_type=False)
    except NotLiteral:
        return None
    return value if isinstance(value, bool) else None


def value_binding(value: ast.expr, ns: Namespace, line: int) -> Known | Opaque:
    """What an assigned expression binds: `Known` when literal, else `Opaque` with the reason."""
    try:
        return Known(evaluate(value, ns, as_type=False))
    except NotLiteral as exc:
        try:
            return Known(ast.literal_eval(value))
        except Exception:
            return Opaque(f"assigned something not followed ({exc.what})", line)


_DYNAMIC = frozenset({"globals", "vars", "exec", "eval", "setattr", "delattr", "__import__"})


def dynamic_call(node: ast.AST, ns: Namespace, sys_names: set[str]) -> str:
    """``globals()``, ``exec()``, ``sys.modules``...: how ``node`` may rewrite a namespace, or "".

    Args:
        node: any node of the module.
        ns: the module's names (a builtin rebound by the module is not the builtin).
        sys_names: the names ``sys`` is imported as.
    """
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in _DYNAMIC and name not in ns.names:
            return f"{name}()"
    if (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and isinstance(node.value, ast.Name)
        and node.value.id in sys_names
    ):
        return "sys.modules"
    return ""
