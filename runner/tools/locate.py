"""Where a workflow's tools and programs come from, found without importing anything.

`locate_tools` resolves each ``tools:`` entry of a workflow to a tool manifest (read) or a
module's host folder (located by a directory scan, never imported), and each program step's
module likewise (`runner.tools.programs`). A trace's or a packet's entries resolve only in its
own folder (``confined_to``), through the id rules (`runner.domain.ids.path_under`). Used by
``check``'s static reading (`runner.tools.static`), by the tool snapshot and by the
sandbox description (`runner.admission`).

May import: the rest of `runner.domain`, `runner.errors`, the standard library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.domain.ids import path_under
from runner.domain.mcpentry import McpEntry, McpSource
from runner.domain.registry import ToolSpec
from runner.errors import InputError
from runner.tools.mcp import server_files
from runner.tools.programs import module_root, program_modules, top_spec
from runner.tools.source import (
    URL_TOOLS_UNKNOWN,
    load_manifest_tools,
    load_mcp_tools_list,
    manifest_path,
)

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

__all__ = ["ToolLocations", "locate_tools", "tool_entry_where", "unknown_url_tools"]


@dataclass
class ToolLocations:
    """Where a workflow's tools come from, found without importing anything.

    Attributes:
        manifest_tools: tools of ``.json`` entries, by entry index.
        modules: ``(entry index, module name, host root folder)`` in entry order.
        search: the folders looked in first (workflow folder, current directory).
        programs: ``(step index, module name, host root folder)`` of the program steps'
            modules (`runner.tools.programs.program_modules`): located like tool modules,
            copied into the snapshot and mounted with them, imported only in the sandbox.
        mcp_servers: ``(entry index, source, folder)`` of the ``{mcp: {command}}`` entries:
            stdio servers whose ``tools/list`` only a sandbox asks (the folder, the
            workflow's or the confining one, is their working folder and mounted; None when
            the command names no file there: it then runs in the sandbox's ``/tmp``).
        mcp_urls: ``(entry index, source)`` of the ``{mcp: {url}}`` entries without a
            ``tools_list``: Streamable HTTP servers whose tools nothing here may ask (no
            command contacts a URL to learn them; `unknown_url_tools` says so); ``reproduce``
            takes them from the trace (`runner.reproduce.mcprecorded`).
    """

    manifest_tools: dict[int, list[ToolSpec]]
    modules: list[tuple[int, str, Path]]
    search: list[Path]
    programs: list[tuple[int, str, Path]] = field(default_factory=list)
    mcp_servers: list[tuple[int, McpSource, Path | None]] = field(default_factory=list)
    mcp_urls: list[tuple[int, McpSource]] = field(default_factory=list)

    def roots(self) -> list[Path]:
        """The distinct host folders to mount: tool modules', programs', MCP servers'."""
        found = [root for _, _, root in self.modules] + [root for _, _, root in self.programs]
        found += [folder for _, _, folder in self.mcp_servers if folder is not None]
        return list(dict.fromkeys(found))


def unknown_url_tools(source: McpSource, where: dict[str, Any]) -> str:
    """Why the tools of an ``{mcp: {url}}`` entry without a ``tools_list`` are unknown.

    No command contacts a remote server to learn its tools (``check`` runs in CI, offline, and
    an answer that changes between two checks would make the gate flaky): the saved
    ``tools/list`` is what ``check``, ``run`` and ``record`` know, and ``reproduce`` reads the
    one the trace recorded.
    """
    return f"{source.label()} at {where['file']}:{where['line']}: {URL_TOOLS_UNKNOWN}"


def tool_entry_where(workflow: WorkflowFile, index: int) -> dict[str, Any]:
    """``file``/``line``/``field`` of the workflow's ``tools[index]`` entry, for errors."""
    return {
        "file": str(workflow.path),
        "line": workflow.line_of(("tools", index)),
        "field": f"tools[{index}]",
    }


def _root(name: str, search: list[Path], installed: bool) -> Path | None:
    """The ``sys.path`` folder holding ``name``'s top-level package, found by a directory scan."""
    return module_root(name, search, installed)


def _confined_root(name: str, folder: Path, where: dict[str, Any]) -> Path | None:
    """The mount root of module ``name`` found in ``folder`` alone, which it must not leave.

    Raises:
        InputError: ``name``'s top-level package is a plain folder (no ``__init__.py``: a
            namespace package, e.g. ``Documents``) or a link leading out of ``folder``.
    """
    spec = top_spec(name, [folder], installed=False)
    if spec is None:
        return None
    top = name.split(".")[0]
    if spec.origin is None or not os.path.isabs(spec.origin):
        raise InputError(
            f"tool module {name!r}: {top!r} is a folder without __init__.py, not a tool module "
            f"(a trace's tools resolve only to modules in {folder})",
            **where,
        )
    # the module's file (or its package folder), named relative to the folder: links resolved,
    # it must stay inside (`path_under`), or a trace could mount what a planted link points to
    located = Path(spec.origin)
    if spec.submodule_search_locations:
        located = located.parent
    path_under(folder, os.path.relpath(located, folder), kind=f"tool module {name!r}", **where)
    return folder


def locate_tools(workflow: WorkflowFile, *, confined_to: Path | None = None) -> ToolLocations:
    """Locate every ``tools`` entry of ``workflow``; import nothing.

    Args:
        workflow: the loaded workflow.
        confined_to: the one folder a trace's (or a packet's) tool entries resolve in: modules
            only from it (never the current directory or the installed packages, never a
            plain folder, never through a link leading out), ``.json`` manifests relative to
            it. None (the user's own ``--workflow``): modules from the workflow's folder, the
            current directory, then the installed packages; manifests relative to the
            workflow's folder, inside it.

    Raises:
        InputError: a module that is not found, refused as above, or a tool manifest that
            cannot be read or lies outside its folder (workflow file, line and ``tools[i]``).
    """
    if confined_to is None:
        folders = [workflow.folder, Path.cwd().resolve()]
        manifests = workflow.folder
    else:
        folders = [Path(os.path.realpath(confined_to))]
        manifests = folders[0]
    search = list(dict.fromkeys(folders))
    found = ToolLocations({}, [], search)
    for index, entry in enumerate(workflow.spec.tools):
        where = tool_entry_where(workflow, index)
        if isinstance(entry, McpEntry):
            if entry.mcp.url is not None and entry.mcp.tools_list is None:
                found.mcp_urls.append((index, entry.mcp))
            elif entry.mcp.command is None:
                found.manifest_tools[index] = load_mcp_tools_list(manifests, entry.mcp, where)
            else:  # its folder is mounted (its working folder) when it names a file there
                named = server_files(manifests, entry.mcp.command, where)
                found.mcp_servers.append((index, entry.mcp, manifests if named else None))
            continue
        if entry.endswith(".json"):
            path = manifest_path(manifests, entry, where)
            found.manifest_tools[index] = load_manifest_tools(path, entry, where)
            continue
        if confined_to is None:
            root = _root(entry, search, installed=True)
        else:
            root = _confined_root(entry, search[0], where)
        if root is None:
            looked = ", ".join(str(p) for p in search)
            raise InputError(
                f"cannot import tool module {entry!r}: no such module (looked in {looked}"
                + (" and the installed packages)" if confined_to is None else ")"),
                **where,
            )
        found.modules.append((index, entry, root))
    found.programs = program_modules(workflow, confined_to=confined_to)
    return found
