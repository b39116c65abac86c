"""Where a workflow's tools come from: Python modules and tool manifests without code.

SPEC.md: a workflow's ``tools`` entries are dotted module names, resolved with the workflow
file's folder and the current directory on the import path, or paths (relative to the workflow
file) of ``.json`` tool manifests whose tools are recorded-only. A manifest path stays inside
the workflow's folder (`manifest_path`: no absolute path, no ``..``, no link leading out).

A module is imported with those two folders put first on ``sys.path`` for the duration of the
import only. When a module of the same name is already imported from another file (two
workflow folders each with their own ``tools.py``), it is imported afresh from the file this
workflow would see, so each workflow gets its own tools. Every failure is an `InputError`
naming the workflow file, the line of the entry and the entry.

Tool manifest format: ``{"tools": [{"id", "effect"?, "description"?, "schema"?,
"schema_hash"?, "metadata"?}, ...]}`` (a bare list of entries is accepted too; ``module``,
``qualname`` and ``disposition`` of a copied registry manifest are accepted and ignored: these
tools have no code). A missing or unknown effect counts as ``unsafe``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from runner.domain.ids import path_under
from runner.domain.mcpentry import McpEntry, McpSource
from runner.domain.registry import Registry, ToolSpec
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.inputfile import read_input
from runner.sdk import Effect, ToolDef, collect_tools, schema_hash
from runner.tools.mcp import listed_tools
from runner.tools.programs import program_roots
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

__all__ = [
    "URL_TOOLS_UNKNOWN",
    "load_manifest_tools",
    "load_mcp_tools_list",
    "load_module_tools",
    "load_tool_sources",
    "manifest_path",
    "mcp_tool_specs",
    "read_json_document",
    "registry_for_workflow",
]

log = get_logger(__name__)

_ENTRY_KEYS = {"id", "effect", "description", "schema", "schema_hash", "metadata"}
_IGNORED_KEYS = {"module", "qualname", "disposition"}
_TOP_KEYS = {"tools", "policy", "source", "metadata"}
_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")


def registry_for_workflow(workflow: WorkflowFile) -> Registry:
    """The unfiltered registry of a workflow's ``tools`` entries.

    This imports the tool modules on the host, so it is for ``record`` alone, the one
    command that runs the tools live on the host by design. Every other command keeps the
    code under evaluation off the host: ``check`` reads the modules from source
    (`runner.tools.static.static_registry`); ``run``, ``submit``, ``reproduce``
    and ``packet`` describe them inside a sandbox
    (`runner.admission.sandbox_registry`).

    Raises:
        InputError: a module that cannot be imported or defines an invalid tool, an
            unreadable or invalid tool manifest (workflow file, line and entry named), or
            a duplicate tool id (both definitions named).
    """
    tools, roots = load_tool_sources(workflow)
    return Registry(tools, roots)


def load_tool_sources(workflow: WorkflowFile) -> tuple[list[ToolSpec], list[Path]]:
    """Every tool of ``workflow``'s ``tools`` entries, and the folders its modules came from.

    Raises:
        InputError: an entry that cannot be loaded (workflow file, line, ``tools[i]``).
    """
    tools: list[ToolSpec] = []
    roots: list[Path] = []
    search = list(dict.fromkeys([workflow.folder, Path.cwd().resolve()]))
    for index, entry in enumerate(workflow.spec.tools):
        where: dict[str, Any] = {
            "file": str(workflow.path),
            "line": workflow.line_of(("tools", index)),
            "field": f"tools[{index}]",
        }
        if isinstance(entry, McpEntry):
            if entry.mcp.command is not None:  # the challenger's code: listed in a sandbox only
                raise InputError(
                    "an MCP server is listed inside a sandbox, not by a host import (use run,"
                    " submit or reproduce, or a saved tools_list)",
                    **where,
                )
            if entry.mcp.tools_list is None:  # a URL: nothing here contacts it to ask
                raise InputError(f"{entry.mcp.label()}: {URL_TOOLS_UNKNOWN}", **where)
            tools.extend(load_mcp_tools_list(workflow.folder, entry.mcp, where))
        elif entry.endswith(".json"):
            tools.extend(
                load_manifest_tools(manifest_path(workflow.folder, entry, where), entry, where)
            )
        else:
            found, root = load_module_tools(entry, search, where)
            tools.extend(found)
            roots.append(root)
    roots.extend(program_roots(workflow))  # located, never imported
    return tools, list(dict.fromkeys(roots))


URL_TOOLS_UNKNOWN = (
    "its tools are unknown (no command contacts a server's URL to ask): save its tools/list"
    " result as JSON and name it in the entry's tools_list"
)
"""Why an ``{mcp: {url}}`` entry without a ``tools_list`` has no tools (`runner.tools.locate.
unknown_url_tools` says why nothing asks)."""


def manifest_path(folder: Path, entry: str, where: dict[str, Any]) -> Path:
    """The file of a ``.json`` tools entry: ``entry`` relative to ``folder``, never outside it.

    Args:
        folder: the folder the entry is relative to (the workflow's, or the trace's own).
        entry: the workflow's ``tools`` entry.
        where: ``file``/``line``/``field`` of that entry, for the error.

    Raises:
        InputError: an absolute path, ``..``, a part breaking the id rules, or a link leading
            out of ``folder`` (`runner.domain.ids.path_under`): a workflow, which may be a
            trace's copy, never makes the host read a file of its choosing.
    """
    return path_under(folder, entry, kind="tool manifest path", **where)


def load_module_tools(
    name: str, search: list[Path], where: dict[str, Any]
) -> tuple[list[ToolSpec], Path]:
    """Import module ``name`` and collect its tools.

    Args:
        name: dotted module name.
        search: folders put first on ``sys.path`` while importing.
        where: ``file``/``line``/``field`` of the workflow entry, for errors.

    Returns:
        The tools and the ``sys.path`` folder the module's top-level package was found in.

    Raises:
        InputError: the module cannot be imported, fails while importing, or declares an
            invalid tool.
    """
    module = _import_fresh(name, search, where)
    root = _root_of(module, name)
    definitions = collect_tools(module)
    if not definitions:
        log.warning("tool_module_without_tools", module=name, file=getattr(module, "__file__", ""))
    return [_from_definition(d, name) for d in definitions], root


def _import_fresh(name: str, search: list[Path], where: dict[str, Any]) -> ModuleType:
    top = name.split(".")[0]
    paths = [str(p) for p in search]
    spec = importlib.machinery.PathFinder.find_spec(top, paths)
    loaded = sys.modules.get(top)
    if spec is not None and loaded is not None and not _same_source(loaded, spec):
        stale = [m for m in sys.modules if m == top or m.startswith(top + ".")]
        log.debug("tool_module_reimported", module=top, previous=getattr(loaded, "__file__", None))
        for module_name in stale:
            del sys.modules[module_name]
    # Always first, even when already on sys.path further down: the file `find_spec` saw in
    # these folders must be the one imported. Removed again right after the import.
    inserted = list(paths)
    sys.path[:0] = inserted
    importlib.invalidate_caches()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise InputError(
                f"cannot import tool module {name!r}: no such module (looked in "
                f"{', '.join(paths)} and the installed packages)",
                **where,
            ) from exc
        raise InputError(
            f"cannot import tool module {name!r}: it imports {exc.name!r}, which is not installed",
            **where,
        ) from exc
    except InputError as exc:  # runner.sdk.ToolDefinitionError and friends
        raise InputError(f"tool module {name!r}: {exc}", **where) from exc
    except SyntaxError as exc:
        raise InputError(
            f"cannot import tool module {name!r}: syntax error in {exc.filename}:{exc.lineno}: "
            f"{exc.msg}",
            **where,
        ) from exc
    except Exception as exc:
        raise InputError(
            f"cannot import tool module {name!r}: {type(exc).__name__}: {exc}", **where
        ) from exc
    finally:
        for entry in inserted:
            if entry in sys.path:
                sys.path.remove(entry)


def _same_source(module: ModuleType, spec: importlib.machinery.ModuleSpec) -> bool:
    if spec.origin is not None and getattr(module, "__file__", None):
        return Path(str(module.__file__)).resolve() == Path(spec.origin).resolve()
    wanted = {str(Path(p).resolve()) for p in (spec.submodule_search_locations or [])}
    have = {str(Path(p).resolve()) for p in getattr(module, "__path__", [])}
    return bool(wanted) and wanted == have


def _root_of(module: ModuleType, name: str) -> Path:
    top = sys.modules[name.split(".")[0]]
    package_paths = list(getattr(top, "__path__", []))
    if package_paths:
        return Path(package_paths[0]).resolve().parent
    return Path(str(top.__file__)).resolve().parent


def _from_definition(definition: ToolDef, origin: str) -> ToolSpec:
    return ToolSpec(
        id=definition.id,
        effect=definition.effect,
        declared_effect=definition.effect.value if definition.effect_declared else None,
        description=definition.description,
        schema=definition.schema,
        schema_hash=definition.schema_hash,
        module=definition.module,
        qualname=definition.qualname,
        file=definition.file,
        line=definition.line,
        origin=origin,
    )


def load_manifest_tools(path: Path, entry: str, where: dict[str, Any]) -> list[ToolSpec]:
    """The tools of a tool manifest without code (all recorded-only).

    Args:
        path: the manifest file.
        entry: the workflow's ``tools`` entry naming it.
        where: ``file``/``line``/``field`` of that entry, for a file that cannot be read.

    Raises:
        InputError: the file is missing, not JSON, or an entry is invalid (the manifest file,
            the entry's line and the key named).
    """
    text, data = read_json_document(path, entry, where)
    if isinstance(data, dict):
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown or "tools" not in data:
            problem = f"unknown key {unknown[0]!r}" if unknown else "no 'tools' list"
            raise InputError(f"tool manifest: {problem}", file=str(path), line=1)
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError("tool manifest: 'tools' must be a list", file=str(path), line=1)
    return [_manifest_tool(item, index, path, text, entry) for index, item in enumerate(data)]


def read_json_document(path: Path, entry: str, where: dict[str, Any]) -> tuple[str, Any]:
    """The text and strict JSON value of a tool manifest or a saved MCP ``tools/list``.

    Raises:
        InputError: unreadable or too large (named by ``entry`` at ``where``), not UTF-8, or
            not strict JSON (too deep, NaN, a duplicate key; the file, line and key named).
    """
    try:
        raw = read_input(path, "tool manifest")  # regular files only, size-limited
    except InputError as exc:
        reason = exc.fields.get("reason", exc.message)
        raise InputError(f"cannot read tool manifest {entry!r}: {reason}", **where) from None
    try:
        return raw.decode("utf-8"), strict_loads(raw)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except StrictJSONError as exc:  # too deep, NaN, a duplicate key, not JSON
        raise InputError(
            f"not JSON: {exc.detail}", file=str(path), line=exc.line, field=exc.field
        ) from None


def load_mcp_tools_list(folder: Path, source: McpSource, where: dict[str, Any]) -> list[ToolSpec]:
    """The tools of a saved MCP ``tools/list`` result (``{mcp: {tools_list: FILE}}``).

    Args:
        folder: the folder ``source.tools_list`` is relative to (`manifest_path`'s rules).
        source: the entry's ``mcp`` mapping.
        where: ``file``/``line``/``field`` of the entry.

    Raises:
        InputError: a path leaving the folder, an unreadable file, or not a tools/list result.
    """
    assert source.tools_list is not None
    path = manifest_path(folder, source.tools_list, where)
    _, data = read_json_document(path, source.tools_list, where)
    return mcp_tool_specs(data, file=str(path), source=source)


def mcp_tool_specs(data: Any, *, file: str, source: McpSource) -> list[ToolSpec]:
    """Recorded-only tool specs of a ``tools/list`` result (`runner.tools.mcp`).

    Args:
        data: the decoded ``tools/list`` result (hostile).
        file: where it came from (the saved file, or the server's label), for errors.
        source: the workflow entry's ``mcp`` mapping (its label is the tools' origin).

    Raises:
        InputError: see `runner.tools.mcp.listed_tools`.
    """
    return [
        ToolSpec(
            id=tool["id"],
            effect=tool["effect"],
            declared_effect=tool["effect"].value,
            description=tool["description"],
            schema=tool["schema"],
            schema_hash=schema_hash(tool["schema"]),
            module=None,
            qualname=None,
            file=file,
            line=None,
            origin=source.label(),
            decided_by=tool["decided_by"],
        )
        for tool in listed_tools(data, file=file, prefix=source.prefix)
    ]


def _manifest_tool(item: Any, index: int, path: Path, text: str, entry: str) -> ToolSpec:
    field = f"tools[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise InputError("each tool needs a string 'id'", file=str(path), field=field)
    tool_id = item["id"]
    line = _line_of_id(text, tool_id)
    here: dict[str, Any] = {"file": str(path), "line": line}
    unknown = sorted(set(item) - _ENTRY_KEYS - _IGNORED_KEYS)
    if unknown:
        raise InputError(f"tool {tool_id!r}: unknown key {unknown[0]!r}", field=field, **here)
    if not _TOOL_ID.match(tool_id):
        raise InputError(f"{tool_id!r} is not a tool id", field=f"{field}.id", **here)
    declared = item.get("effect")
    if declared is not None and not isinstance(declared, str):
        raise InputError("effect must be a string", field=f"{field}.effect", **here)
    try:
        effect = Effect(declared) if declared is not None else Effect.UNSAFE
    except ValueError:
        effect = Effect.UNSAFE  # fail closed: an unknown effect class counts as unsafe
    schema = item.get("schema", {"type": "object", "properties": {}})
    if not isinstance(schema, dict):
        raise InputError("schema must be a JSON object", field=f"{field}.schema", **here)
    digest = schema_hash(schema)
    given = item.get("schema_hash")
    if given is not None and given != digest:
        raise InputError(
            f"tool {tool_id!r}: schema_hash {given} does not match its schema ({digest})",
            field=f"{field}.schema_hash",
            **here,
        )
    description = item.get("description", "")
    if not isinstance(description, str):
        raise InputError("description must be a string", field=f"{field}.description", **here)
    return ToolSpec(
        id=tool_id,
        effect=effect,
        declared_effect=declared,
        description=description,
        schema=schema,
        schema_hash=digest,
        module=None,
        qualname=None,
        file=str(path),
        line=line,
        origin=entry,
    )


def _line_of_id(text: str, tool_id: str) -> int | None:
    """Line of ``"id": "<tool_id>"`` in a manifest's text (json keeps no positions)."""
    match = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(tool_id)), text)
    return text.count("\n", 0, match.start()) + 1 if match else None
