"""A workflow's registry built inside a sandbox: the host never imports the tool code.

`Registry.for_workflow` imports the tool modules on the host (as pytest imports a project's
tests). That is right for ``check``, ``submit``, ``run`` and ``record``: they run the user's
own project, whose code the user runs anyway (``record`` even runs it unsandboxed, on
purpose). It is wrong for ``reproduce``: a reviewer packet, or a trace from elsewhere whose
workflow copy and tool modules sit beside it, is someone else's code, and importing a module
runs it. So `sandbox_registry` (used by `runner.reproduce.reproducer`, always) does this:

1. on the host, *locate* every ``tools`` entry without running anything: a ``.json`` tool
   manifest is read as data (`runner.domain.toolsource.load_manifest_tools`); a module's
   top-level package is found with ``importlib.machinery.PathFinder.find_spec`` over the
   workflow's folder and the current directory, then the installed packages (a directory
   scan: no module code, no ``.pth`` file runs). Not found: the same `InputError` as before;
2. start a sandbox of the run's image under the policy's hardening (network none, read-only
   root, no capabilities, non-root, limits; mounts from `runner.episode.driver.
   prepare_run`: the modules come from the command's tool snapshot, `runner.episode.
   snapshot`, never from the live folders) with ``run.json`` ``mode: "manifest"``, the modules
   and their ``tool_paths``; at most `MANIFEST_TIMEOUT_S` seconds (or the policy's timeout,
   when shorter);
3. the runtime (`runner.runtime.manifest`) imports the modules in there and answers with their
   tools; the host reads the answer as untrusted data (types checked, schema hashes computed
   again here, sandbox paths mapped back to host files, text cut and stripped of control
   characters) and builds the `Registry` from it. The policy is then applied to that data
   (`Registry.restrict`) as before.

Errors keep their shape: a module that fails to import in the sandbox is an `InputError`
naming the workflow file, the entry's line and ``tools[i]`` (and ``file:line`` of a syntax
error); a duplicate tool id names both definitions (``file:line``, host paths); a module that
kills the sandbox, hangs, or answers nonsense is an `InputError` too (the tools cannot be
described). Only a backend failure (no Docker) is an `InfrastructureError`. Since every tool
module is imported in the image (not only those with tools that execute), a module whose
imports the image lacks is refused, naming the missing package and the image.

Invariant: nothing in this module imports, executes or ``exec``s a file of the workflow's
folder or a packet; a scripted model function is never resolved here either (reproduce serves
model turns from the trace).
"""

from __future__ import annotations

import importlib.machinery
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from runner.domain.ids import path_under
from runner.domain.programs import module_root, program_modules
from runner.domain.registry import Registry, ToolSpec
from runner.domain.toolsource import load_manifest_tools, manifest_path
from runner.errors import InputError
from runner.sdk import Effect, schema_hash

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.backends.base import Backend
    from runner.domain.workflow import WorkflowFile
    from runner.episode.snapshot import ToolSnapshot
    from runner.settings import Settings

__all__ = ["MANIFEST_TIMEOUT_S", "ToolLocations", "locate_tools", "sandbox_registry"]

log = structlog.get_logger(__name__)

MANIFEST_TIMEOUT_S = 60.0
MAX_TOOLS = 10000
MAX_TEXT = 2000
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class ToolLocations:
    """Where a workflow's tools come from, found without importing anything.

    Attributes:
        manifest_tools: tools of ``.json`` entries, by entry index.
        modules: ``(entry index, module name, host root folder)`` in entry order.
        search: the folders looked in first (workflow folder, current directory).
        programs: ``(step index, module name, host root folder)`` of the program steps'
            modules (`runner.domain.programs.program_modules`): located like tool modules,
            copied into the snapshot and mounted with them, imported only in the sandbox.
    """

    manifest_tools: dict[int, list[ToolSpec]]
    modules: list[tuple[int, str, Path]]
    search: list[Path]
    programs: list[tuple[int, str, Path]] = field(default_factory=list)

    def roots(self) -> list[Path]:
        """The distinct host folders to mount: tool modules' in entry order, then programs'."""
        found = [root for _, _, root in self.modules] + [root for _, _, root in self.programs]
        return list(dict.fromkeys(found))


def _where(workflow: WorkflowFile, index: int) -> dict[str, Any]:
    return {
        "file": str(workflow.path),
        "line": workflow.line_of(("tools", index)),
        "field": f"tools[{index}]",
    }


def _root(name: str, search: list[Path], installed: bool) -> Path | None:
    """The ``sys.path`` folder holding ``name``'s top-level package, found by a directory scan."""
    return module_root(name, search, installed)


def _top_spec(
    name: str, search: list[Path], installed: bool
) -> importlib.machinery.ModuleSpec | None:
    if not _MODULE.match(name):
        return None
    top = name.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, [str(p) for p in search])
    if spec is None and installed:
        spec = importlib.machinery.PathFinder.find_spec(top)  # the installed packages
    return spec


def _confined_root(name: str, folder: Path, where: dict[str, Any]) -> Path | None:
    """The mount root of module ``name`` found in ``folder`` alone, which it must not leave.

    Raises:
        InputError: ``name``'s top-level package is a plain folder (no ``__init__.py``: a
            namespace package, e.g. ``Documents``) or a link leading out of ``folder``.
    """
    spec = _top_spec(name, [folder], installed=False)
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
        where = _where(workflow, index)
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


def sandbox_registry(
    workflow: WorkflowFile,
    *,
    backend: Backend | Callable[[], Backend],
    settings: Settings,
    image: str,
    policy: Any,
    timeout_s: float = MANIFEST_TIMEOUT_S,
    confined_to: Path | None = None,
    snapshot: ToolSnapshot | None = None,
    exclude: Sequence[Path] = (),
) -> Registry:
    """The unfiltered registry of ``workflow``, its modules imported only inside a sandbox.

    Args:
        workflow: the loaded workflow.
        backend: the sandbox backend (Docker), or a function making it: called only when
            there is a module to describe (a module not found needs no engine).
        settings: host settings (state folder, limit overrides).
        image: the sandbox image (the one the episode will use).
        policy: the policy whose limits the sandbox gets (`runner.policy.Policy`).
        timeout_s: the most this may take, seconds.
        confined_to: the one folder the tool entries resolve in (a trace's or a packet's
            own; `locate_tools`); None for the user's own workflow file.
        snapshot: the command's tool snapshot, when it has one already (reproduce builds it
            first and runs the episode from the same one); None: one is built here from the
            modules located (the files in ``exclude`` never copied).
        exclude: files never copied into a snapshot built here (the trace read, by real path).

    Raises:
        InputError: a module not found, failing to import in the sandbox, declaring an
            invalid tool, or a duplicate tool id (see the module docstring).
        InfrastructureError: the backend failed.
    """
    from runner.episode.toolmanifest_run import ask_sandbox

    located = locate_tools(workflow, confined_to=confined_to)
    tools: dict[int, list[ToolSpec]] = dict(located.manifest_tools)
    if located.modules:
        roots = located.roots()
        from runner.backends.base import Backend as BackendType

        if snapshot is None:
            from runner.episode.snapshot_sources import snapshot_for

            snapshot = snapshot_for(
                [(workflow, located)], state_dir=settings.state_dir, exclude=exclude
            )
        answer, tool_paths = ask_sandbox(
            workflow,
            [name for _, name, _ in located.modules],
            roots,
            backend=backend if isinstance(backend, BackendType) else backend(),
            settings=settings,
            image=image,
            policy=policy,
            timeout_s=timeout_s,
            snapshot=snapshot,
        )
        paths = _PathMap(tool_paths, roots, [snapshot.copy_of(root) for root in roots])
        tools.update(_module_tools(workflow, located, answer, paths, image))
    ordered = [tool for index in sorted(tools) for tool in tools[index]]
    # a program step's module is mounted like tool code (located, imported only in there)
    return Registry(ordered, located.roots())


class _PathMap:
    """Sandbox paths (``/sandbox/tools/i/...``) back to host paths; anything else is marked.

    An unsandboxed backend reports the paths of the snapshot's copies on the host instead
    (``<state>/snapshots/<digest>/k/...``): they map back to the source folder too.
    """

    def __init__(self, tool_paths: list[str], roots: list[Path], copies: list[Path]) -> None:
        self.pairs = [
            (prefix, root)
            for inside, root, copy in zip(tool_paths, roots, copies, strict=True)
            for prefix in (inside, str(copy))
        ]

    def file(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            return "<unknown file>"
        path = os.path.normpath(value)
        for inside, root in self.pairs:
            relative = None
            if path == inside or path.startswith(inside + "/"):
                relative = os.path.relpath(path, inside)
            elif path.startswith(str(root) + os.sep):  # an unsandboxed backend: host paths
                relative = os.path.relpath(path, root)
            if relative is not None:
                try:  # the sandbox's text: a host path only through the id rules
                    return str(path_under(root, relative, kind="tool file"))
                except InputError:
                    return f"sandbox:{clean_text(path)}"
        return f"sandbox:{clean_text(path)}"  # a file of the image, not of this host

    def text(self, value: Any) -> str:
        shown = clean_text(value)
        for inside, root in self.pairs:
            shown = shown.replace(inside + "/", str(root) + os.sep)
        return shown


def clean_text(value: Any) -> str:
    """``value`` as text safe to print: control characters as ``?``, at most `MAX_TEXT` long."""
    shown = _CONTROL.sub("?", value if isinstance(value, str) else repr(value))
    return shown if len(shown) <= MAX_TEXT else shown[:MAX_TEXT] + "..."


def _error_message(error: Any, name: str, paths: _PathMap, search: list[Path], image: str) -> str:
    if not isinstance(error, dict):
        return f"cannot import tool module {name!r} inside the sandbox (no reason given)"
    kind, message = error.get("kind"), paths.text(error.get("message", ""))
    if kind == "not_found":
        looked = ", ".join(str(p) for p in search)
        return (
            f"cannot import tool module {name!r}: no such module in the sandbox (looked in "
            f"{looked})"
        )
    if kind == "missing_dependency":
        return (
            f"cannot import tool module {name!r}: it imports {clean_text(error.get('missing'))!r}, "
            f"which is not installed in the sandbox image {image}"
        )
    if kind == "definition":
        return f"tool module {name!r}: {message}"
    if kind == "syntax":
        line = error.get("line")
        where = paths.file(error.get("file")) + (f":{line}" if isinstance(line, int) else "")
        return f"cannot import tool module {name!r}: syntax error in {where}: {message}"
    return f"cannot import tool module {name!r}: {message}"


def _module_tools(
    workflow: WorkflowFile,
    located: ToolLocations,
    answer: dict[str, Any],
    paths: _PathMap,
    image: str,
) -> dict[int, list[ToolSpec]]:
    """Check the sandbox's answer and turn it into tools by entry index.

    Raises:
        InputError: an import error it reports, or an answer that is not what was asked.
    """
    modules = answer.get("modules")
    if not isinstance(modules, list) or len(modules) > len(located.modules):
        raise _bad_answer(workflow, "'modules' is not the list asked for")
    error = answer.get("error")
    if error is not None:
        position = error.get("index") if isinstance(error, dict) else None
        if not isinstance(position, int) or not 0 <= position < len(located.modules):
            position = len(modules) if len(modules) < len(located.modules) else 0
        index, name, _ = located.modules[position]
        raise InputError(
            _error_message(error, name, paths, located.search, image), **_where(workflow, index)
        )
    if len(modules) != len(located.modules):
        raise _bad_answer(workflow, "modules are missing from the answer")
    result: dict[int, list[ToolSpec]] = {}
    count = 0
    for (index, name, _), item in zip(located.modules, modules, strict=True):
        entries = item.get("tools") if isinstance(item, dict) else None
        if (
            not isinstance(item, dict)
            or item.get("module") != name
            or not isinstance(entries, list)
        ):
            raise _bad_answer(workflow, f"no tool list for module {name!r}")
        count += len(entries)
        if count > MAX_TOOLS:
            raise _bad_answer(workflow, f"more than {MAX_TOOLS} tools")
        if not entries:
            log.warning("tool_module_without_tools", module=name, file=paths.file(item.get("file")))
        where = _where(workflow, index)
        result[index] = [_tool(entry, name, paths, where) for entry in entries]
    return result


def _bad_answer(workflow: WorkflowFile, problem: str) -> InputError:
    return InputError(
        f"the sandbox's description of the tool modules is unusable: {problem}",
        file=str(workflow.path),
        field="tools",
    )


def _tool(entry: Any, module: str, paths: _PathMap, where: dict[str, Any]) -> ToolSpec:
    """One tool entry of the answer, each field checked (nothing in it is trusted)."""
    if not isinstance(entry, dict):
        raise InputError(f"tool module {module!r}: a tool entry is not an object", **where)
    tool_id = entry.get("id")
    if not isinstance(tool_id, str) or not _TOOL_ID.match(tool_id):
        raise InputError(
            f"tool module {module!r}: {clean_text(tool_id)!r} is not a tool id", **where
        )
    qualname = entry.get("qualname")
    if not isinstance(qualname, str) or not _MODULE.match(qualname):
        raise InputError(f"tool {tool_id!r}: bad qualname {clean_text(qualname)!r}", **where)
    if entry.get("module") != module:
        raise InputError(f"tool {tool_id!r}: not defined by module {module!r}", **where)
    schema = entry.get("schema")
    if not isinstance(schema, dict):
        raise InputError(f"tool {tool_id!r}: its schema is not a JSON object", **where)
    declared = entry.get("declared_effect")
    declared = declared if isinstance(declared, str) else None
    try:
        effect = Effect(declared) if declared is not None else Effect.UNSAFE
    except ValueError:
        effect = Effect.UNSAFE  # fail closed
    line, description = entry.get("line"), entry.get("description")
    return ToolSpec(
        id=tool_id,
        effect=effect,
        declared_effect=declared,
        description=description if isinstance(description, str) else "",  # as the model sees it
        schema=schema,
        schema_hash=schema_hash(schema),  # computed here, not taken from the sandbox
        module=module,
        qualname=qualname,
        file=paths.file(entry.get("file")),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        origin=module,
    )
