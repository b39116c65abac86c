"""Reviewer packets: one ``.tar.gz`` that reproduces a recorded run anywhere.

Layout (every member a regular file, paths relative, written in sorted order with fixed
metadata so that one trace gives the same bytes)::

    README.md            what this is and the one command: sandbox-replay reproduce FILE
    trace.jsonl          the trace, redacted (`runner.trace.redact`: the rules given, by
                         default the built-in detectors; byte for byte when nothing matched)
    workflow/NAME.yaml   the recorded workflow (the trace's own copy: its sha256 is the
                         trace's workflow hash, which is how reproduce finds it)
    workflow/...         the source of the tool modules the workflow uses (and of its
                         scripted model function, and its tool manifests), of each program
                         step's module and the modules of its folder it imports (read with
                         `ast`, never imported), the data files its ``files`` globs match:
                         what the run's tool snapshot holds (`runner.tools.snapshot`), laid
                         out so that they import from the workflow's folder; and the
                         requirements file the workflow names (``requirements:``)
    manifest.json        the capability-filtered registry manifest under policy reproduce,
                         its tools described inside a sandbox (never imported here)
    environment.json     the trace's environment manifest

``sandbox-replay reproduce FILE.tar.gz`` accepts it (`runner.reproduce.inputs.
safe_extract` unpacks it safely into a scratch folder).
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission.describe import sandbox_registry
from runner.domain.ids import path_under
from runner.domain.mcpentry import McpEntry
from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.inputfile import read_input
from runner.policy import load_policy
from runner.reproduce.inputs import recorded_workflow_file, tool_folder
from runner.tools.locate import locate_tools
from runner.tools.mcp import server_files
from runner.tools.snapshot.sources import workflow_entries
from runner.tools.snapshot.tree import plan_entries
from runner.tools.source import manifest_path
from runner.trace import strictjson
from runner.trace.redact import Redactor
from runner.trace.writer import dumps_line
from runner.tracetools.lint import load_well_formed_trace

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.domain.registry import Registry
    from runner.domain.workflow import WorkflowFile
    from runner.settings import Settings

README = """# Reviewer packet: {run_id}

A recorded run of workflow `{name}` version `{version}` on task `{task_id}`
(recorded status: **{status}**, failure signature `{signature}`).

Re-run it with egress blocked, every model turn and every non-pure tool call served from the
recording, in a Docker sandbox:

    sandbox-replay reproduce {packet}

Exit code 0 means `reproduced` (the recorded outcome came back from the recording alone),
1 `not_reproduced` (the report names the first differing call), 5 `refused`.

Contents: `trace.jsonl` (the trace), `workflow/` (the workflow file, the source of its tool
modules and program steps with the modules they import, its data files, and the requirements
file its sandbox image was built from when it names one: `sandbox-replay image build --tag T
--requirements workflow/FILE`, then `SANDBOX_REPLAY_IMAGE=T`), `manifest.json` (the filtered
tool manifest), `environment.json` (the recorded environment: python, platform, packages, tool
schema hashes).
"""


def _source(root: Path, relative: str) -> Path | None:
    """``root/relative`` when it is a file inside ``root`` (no link leading out), else None."""
    try:
        path = path_under(root, relative, kind="tool source file")
    except InputError:
        return None
    return path if path.is_file() else None


def _module_files(registry: Registry, workflow: WorkflowFile) -> dict[str, Path]:
    """``{packet path under workflow/: host file}`` of the code the workflow needs.

    Every path is built with `runner.domain.ids.path_under` from a module name, a ``tools``
    entry or a file the sandbox reported, so nothing outside the tool folders is packed.
    """
    files: dict[str, Path] = {}
    roots = [Path(r).resolve() for r in registry.tool_roots()]
    modules = {t.module for t in registry if t.module}
    model = workflow.spec.model
    function = getattr(model, "function", None) if model is not None else None
    if isinstance(function, str) and ":" in function:
        modules.add(function.split(":", 1)[0])
        roots.append(workflow.folder)
    for module in sorted(modules):
        parts = module.split(".")
        for root in roots:
            base = "/".join(parts)
            found = next(
                (
                    (relative, path)
                    for relative in (f"{base}.py", f"{base}/__init__.py")
                    if (path := _source(root, relative)) is not None
                ),
                None,
            )
            if found is None:
                continue
            files[found[0]] = found[1]
            for depth in range(1, len(parts)):
                relative = "/".join([*parts[:depth], "__init__.py"])
                init = _source(root, relative)
                if init is not None:
                    files[relative] = init
            break
    for tool in registry:  # a tool defined in another module of the package (re-exported)
        # the file is what the sandbox reported: untrusted, a path only through the id rules
        defined = Path(tool.file) if tool.module and tool.file.endswith(".py") else None
        home = next((r for r in roots if defined and r in defined.parents), None)
        if defined is not None and home is not None:
            relative = defined.relative_to(home).as_posix()
            source = _source(home, relative)
            if source is not None:
                files.setdefault(relative, source)
    for index, entry in enumerate(workflow.spec.tools):
        where = {
            "file": str(workflow.path),
            "line": workflow.line_of(("tools", index)),
            "field": f"tools[{index}]",
        }
        if isinstance(entry, McpEntry):  # a saved tools/list, or the files a server names
            named = [entry.mcp.tools_list] if entry.mcp.tools_list else []
            named += server_files(workflow.folder, entry.mcp.command or (), where)
            for relative in named:
                path = manifest_path(workflow.folder, relative, where)
                files[path.relative_to(workflow.folder).as_posix()] = path
        elif entry.endswith(".json"):
            path = manifest_path(workflow.folder, entry, where)
            files[path.relative_to(workflow.folder).as_posix()] = path
    return files


def _snapshot_files(
    workflow: WorkflowFile, confined_to: Path | None, state_dir: Path, trace_path: Path
) -> dict[str, Path]:
    """``{packet path under workflow/: host file}`` of what the run's tool snapshot copies.

    The same entries as the snapshot a run mounts (`runner.tools.snapshot.sources.
    workflow_entries`): tool modules, each program step's module and the modules of its folder
    it imports (found with `ast`, nothing imported), MCP server files and ``files`` matches,
    under the same bounds and link rules (`runner.tools.snapshot.tree.plan_entries`); the
    trace itself, the state folder, tasks and traces are never copied. Each file keeps its
    path below the folder its module was found in.

    Raises:
        InputError: a module no longer found, a glob matching nothing, a bound passed.
    """
    located = locate_tools(workflow, confined_to=confined_to)
    entries = workflow_entries(workflow, located, state_dir=state_dir)
    plan = plan_entries(entries, state_dir.resolve(), exclude=[trace_path])
    files: dict[str, Path] = {}
    for dest, real in sorted(plan.files.items()):
        relative = dest.split("/", 1)[1]  # below source folder "k/"
        files.setdefault(relative, real)
    return files


def _requirements_file(workflow: WorkflowFile) -> tuple[str, Path] | None:
    """``(path under workflow/, host file)`` of the workflow's ``requirements:``, or None.

    Raises:
        InputError: the file is missing, or its path leaves the workflow's folder.
    """
    named = workflow.spec.requirements
    if named is None:
        return None
    where: dict[str, Any] = {
        "file": str(workflow.path),
        "line": workflow.line_of(("requirements",)),
    }
    path = path_under(workflow.folder, named, kind="requirements file", **where)
    if not path.is_file():
        raise InputError(f"requirements file {named!r} is not found in {workflow.folder}", **where)
    return named, path


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uname = info.gname = ""
    archive.addfile(info, io.BytesIO(data))


def _redacted(data: bytes, rules: dict[str, Any] | None) -> tuple[bytes, dict[str, Any]]:
    """The trace's bytes redacted (the same bytes when nothing matched) and its environment.

    ``data`` is a trace `load_well_formed_trace` accepted: every line decodes strictly.
    """
    lines = [strictjson.loads(line) for line in data.splitlines()]
    redactor = Redactor(rules)
    redacted = redactor.redact_all(lines)
    environment: dict[str, Any] = redacted[0].get("environment") or {}
    if not redactor.redactions:
        return data, environment
    return "".join(dumps_line(line) for line in redacted).encode("ascii"), environment


def build_packet(
    trace_path: Path,
    output: Path,
    workflow_path: Path | None = None,
    *,
    settings: Settings,
    backend: Backend | Callable[[], Backend],
    image: str | None = None,
    redaction_rules: dict[str, Any] | None = None,
) -> list[str]:
    """Write the reviewer packet of one trace, its secrets redacted.

    The filtered manifest comes from a registry described inside a sandbox, exactly as
    ``reproduce`` builds it (`runner.admission.sandbox_registry`): the trace
    folder's tool modules are never imported on the host, and its tool entries resolve only
    in the workflow file's folder (`runner.reproduce.inputs.tool_folder`).

    Args:
        trace_path: the recorded trace.
        output: the ``.tar.gz`` to write.
        workflow_path: the workflow file whose folder holds the tool modules (default: the file
            beside the trace, one folder up or in the current directory whose sha256 is the
            trace's workflow hash).
        settings: host settings (state folder of the short describing sandbox, limits).
        backend: the sandbox backend, or a function making it (called only when there is a
            module to describe).
        image: the sandbox image (default: the settings').
        redaction_rules: the redaction rules document (a policy's ``redaction_rules``; None:
            the built-in detectors and header names). A secret found anywhere in the trace is
            replaced in every line, and in ``environment.json``; the key is never stored.

    Returns:
        The member names written.

    Raises:
        InputError: an unreadable trace, one with an unknown ``v`` or a field `lint` calls
            malformed (`runner.tracetools.lint.load_well_formed_trace`), no workflow file to
            take the tool modules from, or a workflow whose tools cannot be described (not
            found, failing to import in the sandbox, outside the workflow's folder).
        InfrastructureError: the backend failed.
    """
    trace = load_well_formed_trace(trace_path)  # lint's reader and rules
    run = trace.run
    found = workflow_path or recorded_workflow_file(
        trace_path, run.workflow.hash, settings.state_dir.name
    )
    if found is None:
        raise InputError(
            "cannot find the workflow file this trace ran (no YAML file beside the trace, one "
            "folder up or in the current directory has its sha256): pass --workflow FILE",
            file=str(trace_path),
        )
    workflow = load_workflow(found)
    policy = load_policy("reproduce")
    # the user's own --workflow resolves as check does; a trace's, in its folder alone
    confined_to = None if workflow_path is not None else tool_folder(found, trace_path)
    registry = sandbox_registry(
        workflow,
        backend=backend,
        settings=settings,
        image=image or settings.image,
        policy=policy,
        confined_to=confined_to,
    )
    trace_bytes, environment = _redacted(read_input(trace_path, "trace"), redaction_rules)
    members: dict[str, bytes] = {
        "trace.jsonl": trace_bytes,
        f"workflow/{found.name}": run.workflow.content.encode("utf-8"),
        "manifest.json": (json.dumps(registry.manifest(policy), indent=1) + "\n").encode("utf-8"),
        "environment.json": (json.dumps(environment, indent=1, sort_keys=True) + "\n").encode(
            "utf-8"
        ),
    }
    code = _module_files(registry, workflow)
    for name, source in _snapshot_files(
        workflow, confined_to, settings.state_dir, trace_path
    ).items():
        code.setdefault(name, source)
    requirements = _requirements_file(workflow)
    if requirements is not None:
        code.setdefault(*requirements)
    for name, source in code.items():
        members.setdefault(f"workflow/{name}", read_input(source, "tool source"))
    end = trace.end
    members["README.md"] = README.format(
        run_id=run.run_id,
        name=run.workflow.name,
        version=run.workflow.version,
        task_id=run.task_id,
        status=end.status if end else "unknown",
        signature=(end.failure_signature if end else None) or "none",
        packet=output.name,
    ).encode("utf-8")
    output.parent.mkdir(parents=True, exist_ok=True)
    part = output.with_name(output.name + ".part")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            _add(tar, name, members[name])
    with (
        open(part, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed,
    ):
        packed.write(buffer.getvalue())
    part.replace(output)
    return sorted(members)
