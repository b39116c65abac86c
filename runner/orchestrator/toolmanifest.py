"""A workflow's registry built inside a sandbox: the host never imports the tool code.

`Registry.for_workflow` imports the tool modules on the host (as pytest imports a project's
tests). That is right for ``check``, ``submit``, ``run`` and ``record``: they run the user's
own project, whose code the user runs anyway (``record`` even runs it unsandboxed, on
purpose). It is wrong for ``reproduce``: a reviewer packet, or a trace from elsewhere whose
workflow copy and tool modules sit beside it, is someone else's code, and importing a module
runs it. So `sandbox_registry` (used by `runner.orchestrator.reproduce`, always) does this:

1. on the host, *locate* every ``tools`` entry without running anything: a ``.json`` tool
   manifest is read as data (`runner.domain.toolsource.load_manifest_tools`); a module's
   top-level package is found with ``importlib.machinery.PathFinder.find_spec`` over the
   workflow's folder and the current directory, then the installed packages (a directory
   scan: no module code, no ``.pth`` file runs). Not found: the same `InputError` as before;
2. start a sandbox of the run's image under the policy's hardening (network none, read-only
   root, no capabilities, non-root, limits; mounts from `runner.orchestrator.episode.
   prepare_run`: the modules come from the command's tool snapshot, `runner.orchestrator.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from runner.domain.ids import path_under
from runner.domain.registry import Registry, ToolSpec
from runner.domain.toolsource import load_manifest_tools, manifest_path
from runner.errors import InputError
from runner.orchestrator.toolmanifest_answer import PathMap, module_tools

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.backends.base import Backend
    from runner.domain.workflow import WorkflowFile
    from runner.orchestrator.snapshot import ToolSnapshot
    from runner.settings import Settings

__all__ = [
    "MANIFEST_TIMEOUT_S",
    "ToolLocations",
    "locate_tools",
    "sandbox_registry",
    "tool_entry_where",
]

log = structlog.get_logger(__name__)

MANIFEST_TIMEOUT_S = 60.0
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass
class ToolLocations:
    """Where a workflow's tools come from, found without importing anything.

    Attributes:
        manifest_tools: tools of ``.json`` entries, by entry index.
        modules: ``(entry index, module name, host root folder)`` in entry order.
        search: the folders looked in first (workflow folder, current directory).
    """

    manifest_tools: dict[int, list[ToolSpec]]
    modules: list[tuple[int, str, Path]]
    search: list[Path]

    def roots(self) -> list[Path]:
        """The distinct host folders to mount, in entry order."""
        return list(dict.fromkeys(root for _, _, root in self.modules))


def tool_entry_where(workflow: WorkflowFile, index: int) -> dict[str, Any]:
    """``file``/``line``/``field`` of the workflow's ``tools[index]`` entry, for errors."""
    return {
        "file": str(workflow.path),
        "line": workflow.line_of(("tools", index)),
        "field": f"tools[{index}]",
    }


def _root(name: str, search: list[Path], installed: bool) -> Path | None:
    """The ``sys.path`` folder holding ``name``'s top-level package, found by a directory scan."""
    spec = _top_spec(name, search, installed)
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0]).resolve().parent
    if spec.origin is None or not os.path.isabs(spec.origin):
        return None  # built-in or frozen: nothing to mount
    return Path(spec.origin).resolve().parent


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
        where = tool_entry_where(workflow, index)
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
    cache: bool = False,
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
        cache: reuse (and keep) the description of the same snapshot, image, policy and
            modules in the state folder (`runner.orchestrator.toolmanifest_cache`): no
            sandbox starts for one described before (``run``, ``submit``).

    Raises:
        InputError: a module not found, failing to import in the sandbox, declaring an
            invalid tool, or a duplicate tool id (see the module docstring).
        InfrastructureError: the backend failed.
    """
    from runner.orchestrator.toolmanifest_cache import description_slot, report_outbound
    from runner.orchestrator.toolmanifest_run import ask_sandbox

    located = locate_tools(workflow, confined_to=confined_to)
    tools: dict[int, list[ToolSpec]] = dict(located.manifest_tools)
    if located.modules:
        roots = located.roots()
        modules = [name for _, name, _ in located.modules]
        from runner.backends.base import Backend as BackendType

        if snapshot is None:
            from runner.orchestrator.snapshot_sources import snapshot_for

            snapshot = snapshot_for(
                [(workflow, located)], state_dir=settings.state_dir, exclude=exclude
            )
        engine = backend if isinstance(backend, BackendType) else backend()
        slot = None
        if cache:
            slot = description_slot(
                workflow,
                modules,
                roots,
                backend=engine,
                state_dir=settings.state_dir,
                image=image,
                policy=policy,
                snapshot=snapshot,
            )
        kept = slot.get() if slot is not None else None
        described = kept or ask_sandbox(
            workflow,
            modules,
            roots,
            backend=engine,
            settings=settings,
            image=image,
            policy=policy,
            timeout_s=timeout_s,
            snapshot=snapshot,
        )
        log.info("tool_description", modules=len(modules), reused=kept is not None)
        report_outbound(workflow, described.outbound, cached=kept is not None)
        paths = PathMap(described.tool_paths, roots, [snapshot.copy_of(root) for root in roots])
        tools.update(module_tools(workflow, located, described.answer, paths, image))
        if slot is not None and kept is None:
            slot.put(described)  # checked, and without an import error
    ordered = [tool for index in sorted(tools) for tool in tools[index]]
    return Registry(ordered, located.roots())
