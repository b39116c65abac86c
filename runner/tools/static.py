"""A workflow's registry read from the tool modules' source: ``check`` imports and runs nothing.

``check`` is the CI gate: it must work without a Docker engine and must not run the code under
evaluation (a module's top-level code would run on the host, with the network). So it reads each
``tools`` module with `ast` (`static_registry`), where ``submit`` and ``run`` describe the
modules inside a sandbox (`runner.admission.sandbox_registry`):

- modules are located as the sandbox finds them (`runner.tools.locate.
  locate_tools`: workflow folder, current directory, installed packages; no import), ``.json``
  tool manifests read as data, as everywhere;
- the module's top-level statements are walked in order (`runner.tools.static_values`
  keeps what each name stands for); a tool is what `runner.sdk.collect_tools` would collect: a
  function defined in the module, decorated ``@tool(...)`` or bound as ``name = tool(...)(f)``,
  still bound to a module name at the end (``qualname``: its own name when still bound, else the
  first of its names in sorted order), in the order of (first line, qualname);
- what the decorator accepts literally is understood: ``tool``/``Effect`` imported from
  ``runner.sdk`` under any name (or ``sdk.tool``, ``runner.sdk.tool``), the id, effect and
  description given by position or keyword as literals, module constants, ``Effect.READ`` or
  ``Effect("read")``; the declaration is then made by `runner.sdk.tool` itself on a stand-in
  function carrying the parameters read (names, kinds, literal defaults, annotations evaluated
  to the same `typing` objects), so ids are checked, effects default and schemas derive (and
  hash) exactly as at run time: a declaration the sandbox would refuse is the same
  `InputError` here;
- an agent SDK's tool decorator (``@function_tool``, ``@beta_tool``, LangChain's ``@tool``:
  `runner.tools.static_sdk`) makes a tool too, alone (its SDK name the id, ``unsafe`` until
  the policy's ``map:`` classes it) or stacked with ``@tool(...)`` in either order (the
  declaration's id and effect); so does a plain module-level function handed to an SDK's
  tool-making call (``create_react_agent(model, tools=[f])``, ``ToolNode([f])``, ``tool(f)``,
  ...: `runner.tools.static_sdkcalls`); `program_sdk_tools` reads a program step's own module
  for the SDK tools it offers its model;
- what cannot be read literally is **fail closed**: a tool whose effect, parameter annotation or
  default is not literal, that is defined under a condition, has other decorators, or may be
  rebound (a ``global`` statement, an attribute set on it, the module rewriting its own
  namespace) is kept with effect ``unsafe`` and the reason (`ToolSpec.unread`, e.g. ``effect
  given by a non-literal expression (a call) at tools.py:12``); a tool whose id is not literal,
  a decorator that is not ``runner.sdk.tool``, or a module that is not Python source, is a gap
  of the registry (`Registry.unread`), named when a step's tool does not resolve.

Invariant: no file of the workflow is imported, executed or ``eval``'d (``compile`` only parses);
the reading is bounded (`MAX_SOURCE_BYTES`). The static view is a promise about ordinary code, not
a measurement: code written to hide from it can, and ``submit``/``run`` then refuse what the
sandbox sees (docs/threat-model.md). `tests/unit/tools/test_static_agreement.py` holds it equal
to
the sandbox's view on every example and fixture.
"""

from __future__ import annotations

import ast
import importlib.machinery
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner import sdk
from runner.domain.registry import Registry, ToolSpec
from runner.errors import InputError
from runner.sdk import pyparse
from runner.tools.locate import locate_tools, tool_entry_where, unknown_url_tools
from runner.tools.static_decl import BARE, StaticTool
from runner.tools.static_walk import ModuleWalk

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

__all__ = [
    "MAX_SOURCE_BYTES",
    "HostSyntaxError",
    "program_sdk_tools",
    "read_module",
    "static_registry",
]

MAX_SOURCE_BYTES = 8 * 1024 * 1024


class HostSyntaxError(InputError):
    """A tool module the host's Python cannot parse (exit 2 in ``check``).

    The sandbox image may run a newer Python, so ``submit`` and ``run`` leave the verdict to the
    sandbox's description.
    """


def shown(path: Path) -> str:
    """``path`` relative to the current directory when inside it (as `ToolSpec.location`)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass
class StaticModule:
    """What the reading found in one module.

    Attributes:
        tools: its tools, in collection order.
        gaps: what may define tools the reading did not see, each with its place.
        file: the module's source file (None for a namespace package).
    """

    tools: list[ToolSpec] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    file: Path | None = None


def _module_spec(name: str, root: Path, where: dict[str, Any]) -> importlib.machinery.ModuleSpec:
    """The spec of dotted ``name`` below ``root``, found by directory scans (no import)."""
    parts = name.split(".")
    spec: importlib.machinery.ModuleSpec | None
    spec = importlib.machinery.PathFinder.find_spec(parts[0], [str(root)])
    for depth in range(1, len(parts)):
        if spec is None or not spec.submodule_search_locations:
            spec = None
            break
        locations = [str(p) for p in spec.submodule_search_locations]
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
    if spec is None:
        raise InputError(f"cannot import tool module {name!r}: no such module (in {root})", **where)
    return spec


def read_module(name: str, root: Path, where: dict[str, Any]) -> StaticModule:
    """Read module ``name`` (found below ``root``) without importing it.

    Args:
        name: the dotted module name of the workflow's ``tools`` entry.
        root: the ``sys.path`` folder its top-level package is in (`locate_tools`).
        where: ``file``/``line``/``field`` of the workflow entry, for errors.

    Raises:
        InputError: the module (or a submodule) is not found, or a declaration the runtime
            would refuse (an invalid id or effect, a parameter without a type hint or of an
            unsupported type): the sandbox's message, the entry named.
        HostSyntaxError: the host's Python cannot parse the module.
    """
    spec = _module_spec(name, root, where)
    origin = spec.origin
    if origin is None or not Path(origin).is_file():
        return StaticModule()  # a namespace package: collect_tools finds nothing in it
    path = Path(origin)
    if path.suffix != ".py":
        return StaticModule(gaps=[f"tool module {name} is not Python source ({shown(path)})"])
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read tool module {name!r}: {exc}", **where) from exc
    if len(data) > MAX_SOURCE_BYTES:
        gap = f"tool module {name} is larger than {MAX_SOURCE_BYTES} bytes ({shown(path)})"
        return StaticModule(gaps=[gap], file=path)
    try:
        tree = pyparse.parse(data, filename=str(path))
    except SyntaxError as exc:
        raise HostSyntaxError(
            f"cannot import tool module {name!r}: syntax error in {shown(path)}:{exc.lineno}: "
            f"{exc.msg} (read with the host's Python)",
            **where,
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        gap = f"tool module {name} could not be parsed ({type(exc).__name__}) ({shown(path)})"
        return StaticModule(gaps=[gap], file=path)
    walk = ModuleWalk(name, shown(path))
    walk.run(tree)
    module = StaticModule(gaps=list(walk.gaps), file=path)
    for found in walk.collected():
        module.tools.append(_declare(found, name, path, where))
    return module


def _holder(found: StaticTool, module: str, with_parameters: bool) -> types.FunctionType:
    """A stand-in function with the parameters, annotations and docstring read from source."""

    def stand_in() -> None:  # its code never runs: only its metadata is read
        raise AssertionError("a static stand-in is never called")

    parameters = found.parameters if with_parameters else []
    holder = types.FunctionType(stand_in.__code__, {}, found.func_name)
    holder.__qualname__ = found.func_name
    holder.__module__ = module
    holder.__doc__ = found.doc
    holder.__annotations__ = {
        p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty
    }
    setattr(holder, "__signature__", inspect.Signature(parameters))  # noqa: B010
    return holder


def _declare(found: StaticTool, module: str, path: Path, where: dict[str, Any]) -> ToolSpec:
    """Make the declaration with `runner.sdk.tool` on a stand-in; errors as the sandbox's.

    When a parameter was not read, the stand-in has none (the id, effect and description are
    still checked by `runner.sdk.tool`) and the tool claims no schema.
    """
    unread = list(found.unread)
    definition: sdk.ToolDef | None = None
    try:
        holder = _holder(found, module, found.schema_read)
        args: list[Any] = [holder if a is BARE else a for a in found.args]
        declare: Any = sdk.tool  # given what the source gave, literally: it checks the types
        wrapper = declare(*args, **found.kwargs)(holder)
        definition = sdk.tool_def(wrapper)
    except (InputError, TypeError) as exc:
        # runner.sdk.ToolDefinitionError (an InputError), or a TypeError of tool(...) itself
        # (an unknown keyword): the import fails there, the sandbox reports the same
        text = exc.message if isinstance(exc, InputError) else f"TypeError: {exc}"
        if not found.conditional:
            prefix = "tool module" if isinstance(exc, InputError) else "cannot import tool module"
            raise InputError(f"{prefix} {module!r}: {text}", **where) from None
        unread.append(f"its declaration fails ({text}) at {shown(path)}:{found.line}")
    assert definition is not None or unread
    read_schema = definition is not None and found.schema_read
    return ToolSpec(
        id=str(found.tool_id),
        # fail closed: what was not read cannot be vouched for
        effect=definition.effect if definition is not None and not unread else sdk.Effect.UNSAFE,
        declared_effect=(
            definition.effect.value
            if definition is not None and definition.effect_declared
            else None
        ),
        description=definition.description if definition is not None else "",
        schema=definition.schema if read_schema and definition is not None else {},
        schema_hash=definition.schema_hash if read_schema and definition is not None else "",
        module=module,
        qualname=found.qualname,
        file=str(path),
        line=found.first_line,
        origin=module,
        unread="; ".join(unread) if unread else None,
        framework=found.framework,
        sdk_name=found.sdk_name,
    )


def static_registry(workflow: WorkflowFile) -> Registry:
    """The unfiltered registry of ``workflow``, read from source: nothing imported or run.

    Raises:
        InputError: a module not found, a tool manifest that cannot be read, a declaration the
            runtime would refuse, or a duplicate tool id (see `read_module`).
        HostSyntaxError: a module the host's Python cannot parse.
    """
    located = locate_tools(workflow)
    tools: dict[int, list[ToolSpec]] = dict(located.manifest_tools)
    gaps: list[str] = []
    for index, name, root in located.modules:
        module = read_module(name, root, tool_entry_where(workflow, index))
        tools[index] = module.tools
        gaps.extend(module.gaps)
    for index, source, _ in located.mcp_servers:  # the challenger's code: never run here
        where = tool_entry_where(workflow, index)
        gaps.append(
            f"{source.label()} at {where['file']}:{where['line']}: an MCP server's tools are"
            " listed only inside a sandbox"
        )
    for index, source in located.mcp_urls:
        gaps.append(unknown_url_tools(source, tool_entry_where(workflow, index)))
    ordered = [tool for index in sorted(tools) for tool in tools[index]]
    return Registry(ordered, located.roots(), unread=gaps)


def program_sdk_tools(workflow: WorkflowFile) -> list[tuple[int, list[ToolSpec]]]:
    """The agent-SDK tools each program step's own module defines, read from source.

    What a program offers its model is statically visible where its module defines the SDK
    tools (``@function_tool``, ``@beta_tool``, LangChain's ``@tool``): ``check`` refuses
    those its step does not declare (`runner.admission.eligibility`). Modules the program
    imports are not followed (the gateway's run-time check sees what they offer).

    Returns:
        ``(step index, SDK tools)`` per program step whose module was read; a module that is
        not found, not Python source or refused by the reading is skipped (``submit``/``run``
        and the sandbox name it).
    """
    from runner.tools.programs import program_modules

    try:
        modules = program_modules(workflow)
    except InputError:
        return []  # the program check names it
    found = []
    for index, name, root in modules:
        try:
            module = read_module(name, root, {"file": str(workflow.path)})
        except InputError:
            continue
        found.append((index, [t for t in module.tools if t.framework is not None]))
    return found


def _binds(tree: ast.Module, name: str) -> bool:
    """Whether module-level code of ``tree`` may bind ``name`` (any binding, any branch)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in (name, "__getattr__"):
                return True
            continue  # their bodies bind local names
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.alias) and (
            node.name == "*" or (node.asname or node.name.split(".")[0]) == name
        ):
            return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "vars", "exec", "setattr")
        ):
            return True  # it may bind anything
        stack.extend(ast.iter_child_nodes(node))
    return False


def read_function(ref: str, search_paths: list[Path]) -> None:
    """Check a ``module:function`` reference without importing: the module is found and binds it.

    ``check`` uses this for a scripted model function (``submit`` and ``run`` import it: it runs
    on the host by design). The module is looked up as `runner.domain.userfunction.
    load_function` imports it (``search_paths``, then the installed packages); a built-in or
    compiled module is taken as is.

    Raises:
        InputError: a malformed reference, a module not found or the host's Python cannot
            parse, or no module-level binding of the function's (first) name (field
            ``model.function``).
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"{ref!r} is not 'module:function'", field="model.function")
    parts = module_name.split(".")
    if parts[0] in sys.builtin_module_names:
        return
    spec = importlib.machinery.PathFinder.find_spec(parts[0], [str(p) for p in search_paths])
    spec = spec or importlib.machinery.PathFinder.find_spec(parts[0])
    for depth in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec is not None else None
        found = ".".join(parts[: depth + 1])
        spec = (
            importlib.machinery.PathFinder.find_spec(found, list(locations or []))
            if locations
            else None
        )
    if spec is None and module_name in sys.modules:
        return  # e.g. os.path: an alias the host's own imports made
    if spec is None:
        raise InputError(
            f"cannot import {module_name!r}: ModuleNotFoundError: No module named {module_name!r}",
            field="model.function",
        )
    if spec.origin is None or not spec.origin.endswith(".py"):
        return  # a namespace package or compiled code: nothing to read
    path = Path(spec.origin)
    try:
        data = path.read_bytes()[: MAX_SOURCE_BYTES + 1]
        tree = pyparse.parse(data, filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise InputError(
            f"cannot import {module_name!r}: {type(exc).__name__}: {exc}", field="model.function"
        ) from None
    first = attr.split(".")[0]
    if not _binds(tree, first):
        raise InputError(f"{ref!r}: no attribute {first!r}", field="model.function")
