"""What of a workflow goes into the tool snapshot (`runner.tools.snapshot`).

For each ``tools`` module: its top-level module file or package folder, in the ``sys.path``
folder it resolves from (`runner.tools.locate.locate_tools` finds it without
importing: the workflow's folder and the current directory as for the host import, then the
installed packages; ``reproduce`` of a packet only inside the packet). Tool manifests without
code need nothing in the sandbox: their tools are served from recordings. The scripted model
function and the judge run on the host, not in the sandbox.

For each ``files`` glob (relative to the workflow file; `runner.domain.workflow` refuses one
that leaves its folder): the files and folders it matches below the workflow's folder. ``*``,
``?`` and ``[...]`` match within one name, ``**`` any number of folders; dot entries,
``__pycache__``, virtual environments and the state folder are never matched, and matching does
not descend into linked folders. A glob matching nothing is an `InputError` naming the workflow
file, the line and ``files[i]`` (a typo must not silently leave the data out).

`run_roots` says which source folders one run mounts: its registry's tool roots, then the
workflow's folder when it declares files; `tool_mounts` mounts their copies from the command's
snapshot (``record`` alone, unsandboxed, gets the live folders).
"""

from __future__ import annotations

import fnmatch
import importlib.machinery
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.backends.base import Mount
from runner.errors import InputError
from runner.sdk.agentcode import agent_code, local_imports
from runner.tools.locate import locate_tools
from runner.tools.mcp import server_files
from runner.tools.snapshot.toolsnapshot import SnapshotEntry, ToolSnapshot, build_snapshot
from runner.tools.snapshot.tree import VENV_NAMES
from runner.wire import protocol

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile
    from runner.tools.locate import ToolLocations

__all__ = [
    "MAX_GLOB_ENTRIES",
    "match_files",
    "project_snapshot",
    "run_roots",
    "snapshot_for",
    "tool_mounts",
    "workflow_entries",
]

MAX_GLOB_ENTRIES = 200_000  # folder entries one glob may look at
_MAGIC = re.compile(r"[*?\[]")


def _where(workflow: WorkflowFile, key: str, index: int) -> dict[str, Any]:
    return {
        "file": str(workflow.path),
        "line": workflow.line_of((key, index)),
        "field": f"{key}[{index}]",
    }


def _module_entry(name: str, root: Path, where: dict[str, Any]) -> str:
    """The top-level module file or package folder of ``name`` below ``root``."""
    top = name.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, [str(root)])
    if spec is not None:
        for location in spec.submodule_search_locations or []:
            if Path(location).resolve().parent == root:
                return Path(location).name
        if spec.origin is not None and Path(spec.origin).resolve().parent == root:
            return Path(spec.origin).name
    raise InputError(f"tool module {name!r} is no longer found in {root}", **where)


def workflow_entries(
    workflow: WorkflowFile, located: ToolLocations, *, state_dir: Path | None = None
) -> list[SnapshotEntry]:
    """The snapshot entries of one workflow: its modules, then what its ``files`` match.

    Args:
        workflow: the loaded workflow.
        located: where its modules resolve (`runner.tools.locate.locate_tools`).
        state_dir: the state folder (never matched by a glob).

    Raises:
        InputError: a module no longer found, or a glob matching nothing (file, line, field).
    """
    entries: list[SnapshotEntry] = []
    for index, name, root in located.modules:
        where = _where(workflow, "tools", index)
        entries.append(SnapshotEntry(root, _module_entry(name, root, where), where, required=True))
    for index, name, root in located.programs:  # program steps' modules: code like the tools'
        where = {**_where(workflow, "steps", index), "field": f"steps[{index}].program"}
        top = _module_entry(name, root, where)
        entries.append(SnapshotEntry(root, top, where, required=True))
        # and the modules of its own folder it imports (read from source, never imported)
        entries.extend(SnapshotEntry(root, found, where) for found in local_imports(root, top))
    for index, source, folder in located.mcp_servers:  # an MCP server's files it names
        if folder is not None:
            where = _where(workflow, "tools", index)
            files = server_files(folder, source.command or (), where)
            entries.extend(SnapshotEntry(folder, part, where, required=True) for part in files)
    folder = workflow.folder
    for index, pattern in enumerate(workflow.spec.files):
        where = _where(workflow, "files", index)
        matches = match_files(folder, pattern, state_dir=state_dir, where=where)
        if not matches:
            raise InputError(
                f"{pattern!r} matches no file in {folder} (dot entries, __pycache__ and virtual "
                "environments are never copied)",
                **where,
            )
        entries.extend(SnapshotEntry(folder, match, where) for match in matches)
    return entries


def match_files(
    folder: Path,
    pattern: str,
    *,
    state_dir: Path | None = None,
    where: dict[str, Any] | None = None,
) -> list[str]:
    """The paths below ``folder`` (``/``-separated, sorted) that ``pattern`` matches.

    Raises:
        InputError: the glob looked at more than `MAX_GLOB_ENTRIES` folder entries.
    """
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    base: list[str] = []
    while parts and not _MAGIC.search(parts[0]):
        base.append(parts.pop(0))
    if any(_hidden(p) for p in base):
        return []
    start = folder.joinpath(*base)
    if not parts:
        return ["/".join(base)] if os.path.lexists(start) else []
    walker = _Walker(state_dir.resolve() if state_dir else None, where or {})
    walker.match(start, base, [None if p == "**" else _compile(p) for p in parts])
    return sorted(dict.fromkeys(walker.found))


def _compile(part: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(part))


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


class _Walker:
    def __init__(self, state_dir: Path | None, where: dict[str, Any]) -> None:
        self.state_dir = state_dir
        self.where = where
        self.found: list[str] = []
        self.seen = 0

    def _children(self, path: Path) -> list[tuple[str, bool]]:
        """``(name, is a real folder)`` of the entries worth matching, sorted."""
        try:
            with os.scandir(path) as listing:
                items = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
        except OSError:
            return []
        self.seen += len(items)
        if self.seen > MAX_GLOB_ENTRIES:
            raise InputError(
                f"the glob looked at more than {MAX_GLOB_ENTRIES} entries: make it narrower",
                **self.where,
            )
        return sorted((name, is_dir) for name, is_dir in items if not _hidden(name))

    def _descend(self, path: Path) -> bool:
        if path.name in VENV_NAMES or os.path.lexists(path / "pyvenv.cfg"):
            return False
        return self.state_dir is None or path.resolve() != self.state_dir

    def match(self, path: Path, rel: list[str], patterns: list[re.Pattern[str] | None]) -> None:
        head, rest = patterns[0], patterns[1:]
        if head is None and not rest:  # a trailing ``**``: all below (folders copy whole)
            for name, is_dir in self._children(path):
                if not is_dir or self._descend(path / name):
                    self.found.append("/".join([*rel, name]))
            return
        if head is None:  # ``**``: here, or in any folder below
            self.match(path, rel, rest)
            for name, is_dir in self._children(path):
                if is_dir and self._descend(path / name):
                    self.match(path / name, [*rel, name], patterns)
            return
        for name, is_dir in self._children(path):
            if not head.match(name):
                continue
            if not rest:
                self.found.append("/".join([*rel, name]))
            elif is_dir and self._descend(path / name):
                self.match(path / name, [*rel, name], rest)


def tool_mounts(request: Any) -> tuple[list[Mount], list[str]]:
    """The read-only mounts of a run's tool code and their sandbox paths (``tool_paths``).

    Args:
        request: the run (`runner.episode.request.EpisodeRequest`).

    Every sandboxed run mounts the copies in its command's snapshot. Only ``record`` (an
    unsandboxed local process that runs the project's own files on purpose, data files and all)
    gets the live folders, which its backend maps back to host paths.

    Raises:
        InputError: a tool folder the snapshot does not hold.
        ValueError: tool folders but no snapshot (a caller's bug).
    """
    tool_roots = [Path(p).resolve() for p in request.registry.tool_roots()]
    if request.mode == "record":
        paths = [f"{protocol.TOOLS_DIR}/{i}" for i in range(len(tool_roots))]
        return [Mount(root, path) for root, path in zip(tool_roots, paths, strict=True)], paths
    roots = run_roots(request.workflow, tool_roots)
    snapshot: ToolSnapshot | None = request.snapshot
    if snapshot is None:
        if roots:
            raise ValueError(
                "a sandboxed run with tool folders needs the command's tool snapshot "
                "(runner.tools.snapshot.sources.snapshot_for)"
            )
        return [], []
    return snapshot.mounts(roots)


def run_roots(workflow: WorkflowFile, tool_roots: Iterable[Path]) -> list[Path]:
    """The source folders one run of ``workflow`` mounts, in ``sys.path`` order.

    Args:
        workflow: the run's workflow (`runner.domain.workflow.WorkflowFile`).
        tool_roots: its registry's tool roots.

    Returns:
        The tool roots, then the workflow's folder when it declares ``files`` (and is not one
        of them already).
    """
    roots = [Path(r).resolve() for r in tool_roots]
    spec = getattr(workflow, "spec", None)
    if getattr(spec, "files", None):
        roots.append(workflow.folder)
    return list(dict.fromkeys(roots))


def snapshot_for(
    workflows: Sequence[tuple[WorkflowFile, ToolLocations]],
    *,
    state_dir: Path,
    exclude: Iterable[Path] = (),
) -> ToolSnapshot:
    """Build the one tool snapshot of a command from its workflows.

    Args:
        workflows: each workflow with where its modules resolve.
        state_dir: the state folder.
        exclude: files never copied, by real path (the tasks file, the traces read).

    Raises:
        InputError: see `workflow_entries` and `runner.tools.snapshot.build_snapshot`.
    """
    entries = [
        entry
        for workflow, located in workflows
        for entry in workflow_entries(workflow, located, state_dir=state_dir)
    ]
    return build_snapshot(entries, state_dir=state_dir, exclude=exclude)


def project_snapshot(
    workflows: Sequence[WorkflowFile], *, state_dir: Path, exclude: Iterable[Path] = ()
) -> ToolSnapshot:
    """The snapshot of the user's own workflows (``run``, ``submit``).

    Modules are located as the host import found them (workflow folder, current directory,
    installed packages).

    Raises:
        InputError: see `snapshot_for`.
    """
    located = [(workflow, locate_tools(workflow)) for workflow in workflows]
    return snapshot_for(located, state_dir=state_dir, exclude=exclude)


def snapshot_agent_code(snapshot: ToolSnapshot, modules: Iterable[str]) -> dict[str, str]:
    """`runner.sdk.agentcode.agent_code` of program ``modules`` in the copies a sandbox mounts.

    Hashes what the sandbox ran (the snapshot's copies, not the live files), with the rule
    `runner.sdk.record` uses in the user's process, so that the two compare.

    Args:
        snapshot: the run's tool snapshot.
        modules: the program steps' module names (``support_agent``, ``pkg.agent``).

    Returns:
        ``{path relative to the module's folder: sha256 hex}``; empty when none is found.
    """
    hashes: dict[str, str] = {}
    copies = [snapshot.copy_of(root) for root in snapshot.roots]
    for module in dict.fromkeys(modules):
        top = module.split(".")[0]
        for copy in copies:
            entry = next(
                (
                    e
                    for e in (f"{top}.py", top)
                    if (copy / e).is_file() or (copy / e / "__init__.py").is_file()
                ),
                None,
            )
            if entry is not None:
                hashes.update(agent_code(copy, [entry]))
                break
    return dict(sorted(hashes.items()))
