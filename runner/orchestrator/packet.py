"""Reviewer packets: one ``.tar.gz`` that reproduces a recorded run anywhere.

Layout (every member a regular file, paths relative, written in sorted order with fixed
metadata so that one trace gives the same bytes)::

    README.md            what this is and the one command: sandbox-replay reproduce FILE
    trace.jsonl          the trace, byte for byte
    workflow/NAME.yaml   the recorded workflow (the trace's own copy: its sha256 is the
                         trace's workflow hash, which is how reproduce finds it)
    workflow/...         the source of the tool modules the workflow uses (and of its
                         scripted model function, and its tool manifests), laid out so that
                         they import from the workflow's folder
    manifest.json        the capability-filtered registry manifest under policy reproduce
    environment.json     the trace's environment manifest

``sandbox-replay reproduce FILE.tar.gz`` accepts it (`runner.orchestrator.reproduce_inputs.
safe_extract` unpacks it safely into a scratch folder).
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from runner.errors import InputError
from runner.inputfile import read_input
from runner.orchestrator.lint import load_well_formed_trace
from runner.orchestrator.reproduce_inputs import find_workflow_file, project_of

README = """# Reviewer packet: {run_id}

A recorded run of workflow `{name}` version `{version}` on task `{task_id}`
(recorded status: **{status}**, failure signature `{signature}`).

Re-run it with egress blocked, every model turn and every non-pure tool call served from the
recording, in a Docker sandbox:

    sandbox-replay reproduce {packet}

Exit code 0 means `reproduced` (the recorded outcome came back from the recording alone),
1 `not_reproduced` (the report names the first differing call), 5 `refused`.

Contents: `trace.jsonl` (the trace), `workflow/` (the workflow file and the source of its tool
modules), `manifest.json` (the filtered tool manifest), `environment.json` (the recorded
environment: python, platform, packages, tool schema hashes).
"""


def _module_files(registry: Any, workflow: Any) -> dict[str, Path]:
    """``{packet path under workflow/: host file}`` of the code the workflow needs."""
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
            base = root.joinpath(*parts)
            candidates = [base.with_suffix(".py"), base / "__init__.py"]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                continue
            files[found.relative_to(root).as_posix()] = found
            for depth in range(1, len(parts)):
                init = root.joinpath(*parts[:depth], "__init__.py")
                if init.is_file():
                    files[init.relative_to(root).as_posix()] = init
            break
    for entry in workflow.spec.tools:
        if entry.endswith(".json"):
            relative = PurePosixPath(entry)
            if relative.is_absolute() or ".." in relative.parts:
                raise InputError(
                    "a tool manifest outside the workflow's folder cannot be packed",
                    file=str(workflow.path),
                    field="tools",
                )
            files[relative.as_posix()] = workflow.folder / entry
    return files


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uname = info.gname = ""
    archive.addfile(info, io.BytesIO(data))


def build_packet(trace_path: Path, output: Path, workflow_path: Path | None = None) -> list[str]:
    """Write the reviewer packet of one trace.

    Args:
        trace_path: the recorded trace.
        output: the ``.tar.gz`` to write.
        workflow_path: the workflow file whose folder holds the tool modules (default: the file
            beside the trace, one folder up or in the current directory whose sha256 is the
            trace's workflow hash).

    Returns:
        The member names written.

    Raises:
        InputError: an unreadable trace, one with an unknown ``v`` or a field `lint` calls
            malformed (`runner.orchestrator.lint.load_well_formed_trace`), no workflow file to
            take the tool modules from, or a workflow whose tools do not load.
    """
    from runner.domain.registry import Registry
    from runner.domain.workflow import load_workflow
    from runner.policy import load_policy

    trace = load_well_formed_trace(trace_path)  # lint's reader and rules
    run = trace.run
    project = project_of(trace_path)
    extra = [Path.cwd(), *([project] if project is not None else [])]
    found = workflow_path or find_workflow_file(trace_path, run.workflow.hash, extra)
    if found is None:
        raise InputError(
            "cannot find the workflow file this trace ran (no YAML file beside the trace, one "
            "folder up or in the current directory has its sha256): pass --workflow FILE",
            file=str(trace_path),
        )
    workflow = load_workflow(found)
    registry = Registry.for_workflow(workflow)
    members: dict[str, bytes] = {
        "trace.jsonl": read_input(trace_path, "trace"),
        f"workflow/{found.name}": run.workflow.content.encode("utf-8"),
        "manifest.json": (
            json.dumps(registry.manifest(load_policy("reproduce")), indent=1) + "\n"
        ).encode("utf-8"),
        "environment.json": (
            json.dumps(run.environment.to_json(), indent=1, sort_keys=True) + "\n"
        ).encode("utf-8"),
    }
    for name, source in _module_files(registry, workflow).items():
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
