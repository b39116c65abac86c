"""A workflow's registry built inside a sandbox: the host never imports the tool code.

`runner.tools.source.registry_for_workflow` imports the tool modules on the host (as
pytest imports a project's tests). That is right for ``check``, ``submit``, ``run`` and
``record``: they run the user's own project, whose code the user runs anyway (``record`` even
runs it unsandboxed, on purpose). It is wrong for ``reproduce``: a reviewer packet, or a trace
from elsewhere whose workflow copy and tool modules sit beside it, is someone else's code, and
importing a module runs it. So `sandbox_registry` (used by `runner.reproduce.reproducer`,
always) does this:

1. on the host, *locate* every ``tools`` entry without running anything: a ``.json`` tool
   manifest is read as data (`runner.tools.source.load_manifest_tools`); a module's
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

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission.answer import PathMap, mcp_tools, module_tools
from runner.admission.cache import description_slot, report_outbound
from runner.admission.describe_run import ask_sandbox
from runner.backends.base import Backend as BackendType
from runner.domain.registry import Registry, ToolSpec
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.tools.locate import locate_tools, tool_entry_where
from runner.tools.snapshot.sources import snapshot_for
from runner.tools.source import URL_TOOLS_UNKNOWN, mcp_tool_specs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.backends.base import Backend
    from runner.domain.workflow import WorkflowFile
    from runner.policy.loader import Policy
    from runner.settings import Settings
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

__all__ = ["MANIFEST_TIMEOUT_S", "sandbox_registry"]

log = get_logger(__name__)

MANIFEST_TIMEOUT_S = 60.0


def sandbox_registry(
    workflow: WorkflowFile,
    *,
    backend: Backend | Callable[[], Backend],
    settings: Settings,
    image: str,
    policy: Policy,
    timeout_s: float = MANIFEST_TIMEOUT_S,
    confined_to: Path | None = None,
    snapshot: ToolSnapshot | None = None,
    exclude: Sequence[Path] = (),
    cache: bool = False,
    recorded_mcp: Mapping[int, Any] | None = None,
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
            modules in the state folder (`runner.admission.cache`): no
            sandbox starts for one described before (``run``, ``submit``).
        recorded_mcp: ``{entry index: tools/list result}`` of MCP servers never to start
            (``reproduce``: what the trace recorded, `runner.reproduce.mcprecorded`); their
            tools come from this data, checked as any server's answer.

    Raises:
        InputError: a module not found, failing to import in the sandbox, declaring an
            invalid tool, or a duplicate tool id (see the module docstring).
        InfrastructureError: the backend failed.
    """
    located = locate_tools(workflow, confined_to=confined_to)
    tools: dict[int, list[ToolSpec]] = dict(located.manifest_tools)
    if recorded_mcp:
        for index, source, _ in located.mcp_servers:
            if index in recorded_mcp:
                label = f"{source.label()} (its tools/list recorded in the trace)"
                tools[index] = mcp_tool_specs(recorded_mcp[index], file=label, source=source)
        asked = [s for s in located.mcp_servers if s[0] not in recorded_mcp]
        located = replace(located, mcp_servers=asked)
    for index, source in located.mcp_urls:  # a URL is never asked (`unknown_url_tools`)
        recorded = (recorded_mcp or {}).get(index)
        if recorded is None:
            where = tool_entry_where(workflow, index)
            raise InputError(f"{source.label()}: {URL_TOOLS_UNKNOWN}", **where)
        label = f"{source.label()} (its tools/list recorded in the trace)"
        tools[index] = mcp_tool_specs(recorded, file=label, source=source)
    if located.modules or located.mcp_servers:
        roots = located.roots()
        cache = cache and not located.mcp_servers  # a server's answer is not cached
        modules = [name for _, name, _ in located.modules]

        if snapshot is None:
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
            mcp_servers=[
                (source.command or (), folder) for _, source, folder in located.mcp_servers
            ],
        )
        log.info("tool_description", modules=len(modules), reused=kept is not None)
        report_outbound(workflow, described.outbound, cached=kept is not None)
        paths = PathMap(described.tool_paths, roots, [snapshot.copy_of(root) for root in roots])
        tools.update(module_tools(workflow, located, described.answer, paths, image))
        tools.update(mcp_tools(workflow, located, described.answer))
        if slot is not None and kept is None:
            slot.put(described)  # checked, and without an import error
    ordered = [tool for index in sorted(tools) for tool in tools[index]]
    # a program step's module is mounted like tool code (located, imported only in there)
    return Registry(ordered, located.roots())
