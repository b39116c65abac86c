"""Write an import: traces, tasks, manifest, workflows and the import report into one folder.

Layout of ``--out DIR``:

    traces/<run_id>.jsonl        one trace per run (run line, call lines, end line)
    traces/tools.manifest.json   a copy of the manifest, so that the workflow a trace carries
                                 (``tools: [tools.manifest.json]``) resolves next to the trace too
    tasks.jsonl                  one task per task id (input, observations, expected)
    tasks.read-only.jsonl        the same tasks, ``expected`` limited to the calls of read (and
                                 pure) tools: what a read-only workflow can be graded against
    tools.manifest.json          the registry manifest of the source's tools (recorded-only)
    workflow.yaml                the generic agent workflow with the full toolset
    workflow.read-only.yaml      the same agent limited to the read (and pure) tools
    workflow-N.yaml ...          further workflows when runs differ in system prompt or tools
    import-report.json           counts: runs, calls by kind, tool errors, failed runs, fixed
                                 messages, missing fields

Invariants: a trace's ``workflow.content`` is byte for byte one of the workflow files written
(its hash is that file's sha256); an existing non-empty folder is refused unless ``force``;
nothing is written before every run has been built (bad input leaves no half import).

Reproduce against what was written. Each trace must replay against its own
workflow, so the workflow says what the source did:

- tools: a run's model requests list its *offered* tools (the run's own ``tools``, else every
  tool the source defines), each exactly as the runtime offers it (its function name is
  `runner.sdk.function_name` of the id: ``ticket.get`` is offered as ``ticket__get``, in the
  trace and by the workflow alike); a tool the run calls without a definition (known by name
  only) is in the agent's ``tools`` and ``unlisted_tools``: callable, never listed, and
  ``lint`` reports its calls; the import report's notes name such tools and ``--tools``.
- a run the source ended on a tool's error (the last call raised, with the class the run
  failed with: a framework without an error handler) gets ``tool_errors: raise``, so that the
  replay fails at that call as recorded instead of handing the error to the model;
- the stop rule: a run that ended right after a tool result (the agent handed off by calling
  a tool, or the source's step limit cut it) gets ``max_turns`` equal to its recorded model
  turns, so the replay ends where the recording did and asks for no turn the trace never had.
  The source's reason is not guessed (a hand-off tool is not inferred from its name); every
  other run keeps the shape's ``max_turns`` (a final answer ends the loop anyway).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet, path_for_id, validate_id
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.importers.conversation import BuiltRun, ToolIndex, build_run
from runner.importers.imported import ImportSource, WorkflowShape
from runner.importers.redaction import redact_import
from runner.importers.source import SourceRun
from runner.importers.toolset import (
    MANIFEST_NAME,
    build_manifest,
    content_hash,
    workflow_text,
)
from runner.importers.unicodetext import encoded
from runner.trace.format import TRACE_VERSION
from runner.wire.toolrecord import RuntimeTool

__all__ = ["write_import"]

log = get_logger(__name__)

REPORT_NAME = "import-report.json"
TASKS_NAME = "tasks.jsonl"
READ_ONLY_TASKS_NAME = "tasks.read-only.jsonl"
_SAFE_EFFECTS = ("read", "pure")


def _dumps(value: Any, file: str, where: str) -> str:
    """One JSON line of ``value``.

    Raises:
        InputError: a number JSON cannot hold: the source's numbers are finite, but the
            import's sums of them may not be (two clock readings of 1.7e308), file and place
            named.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise InputError(
            f"{where}: a number too large for JSON (the source's numbers, added up, pass 1.8e308)",
            file=file,
        ) from None


def _prepare(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", file=str(out), field="--out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(
            "folder is not empty (use --force to write into it)", file=str(out), field="--out"
        )


def _run_line(
    run: SourceRun,
    workflow: Mapping[str, str],
    shape: WorkflowShape,
    env_tools: Mapping[str, str],
    backend: str,
    missing: Counter[str],
) -> dict[str, Any]:
    if run.clock_start is None:
        missing["run.clock_start"] += 1
    if run.seed is None:
        missing["run.seed"] += 1
    for key in ("python", "platform", "image_id", "policy_hash"):
        missing[f"environment.{key}"] += 1
    meta = dict(run.meta)
    if run.clock_start is None:
        meta["clock_start_missing"] = True
    return {
        "v": TRACE_VERSION,
        "type": "run",
        "run_id": run.run_id,
        "task_id": run.task_id,
        "task_input": run.task_input,
        "workflow": {"name": shape.name, "version": shape.version, **workflow},
        "purpose": "live",
        "backend": backend,
        "clock": {"start": float(run.clock_start or 0.0), "step_s": 0.0},
        "seed": run.seed if run.seed is not None else 0,
        "environment": {
            "python": None,
            "platform": None,
            "packages": {},
            "image_id": None,
            "tools": dict(env_tools),
            "policy_hash": None,
        },
        "meta": meta,
    }


def _max_turns(shape: WorkflowShape, built: BuiltRun) -> int:
    """The agent's turn limit: the recorded model turns when the run ended after a tool result."""
    ended_on_tool = bool(built.calls) and built.calls[-1]["tool"] not in ("model", "user")
    if ended_on_tool:
        return max(1, sum(1 for c in built.calls if c["tool"] == "model"))
    return shape.max_turns


def _workflow(
    shape: WorkflowShape,
    run: SourceRun,
    built: BuiltRun,
    tool_ids: Sequence[str],
    name: str,
    unlisted: Sequence[str],
) -> str:
    return workflow_text(
        name=name,
        version=shape.version,
        header=shape.header,
        tool_ids=tool_ids,
        model=run.workflow_model if run.workflow_model is not None else shape.model,
        system=run.system,
        fixed_messages=built.fixed_messages,
        input_template=shape.input_template,
        user=_user(shape, run, built) if run.simulated_user else None,
        max_turns=_max_turns(shape, built),
        unlisted_tools=[t for t in tool_ids if t in unlisted],
        tool_errors="raise" if _aborted_on_tool_error(run, built) else "return",
    )


def _aborted_on_tool_error(run: SourceRun, built: BuiltRun) -> bool:
    """The source ended the run on its last call, a tool that raised (ADK with no handler).

    The generic agent hands a tool error back to the model; such a run's workflow says
    ``tool_errors: raise`` instead, so that the replay fails at the same call, as recorded.
    """
    if run.failure is None or not built.calls:
        return False
    last = built.calls[-1]
    error = last.get("error") or {}
    return last["tool"] not in ("model", "user") and error.get("class") == run.failure[0]


def _offered(run: SourceRun, source: ImportSource, defined: set[str]) -> list[str]:
    """Ids of the tools the run's model requests list: its own ``tools``, else all defined."""
    if run.request_tools is None:
        return [t.id for t in source.tools if t.id in defined]
    names = [str(t.get("function", t).get("name")) for t in run.request_tools]
    return [n for n in dict.fromkeys(names) if n in defined]


def _user(shape: WorkflowShape, run: SourceRun, built: BuiltRun) -> str | dict[str, Any] | None:
    """The agent step's ``user``: the instructions, or the object form with stop/turn limit.

    The runtime asks the first user turn itself (not counted) when the run has no input
    message, then one turn after each final answer until a stop text or the turn limit.
    """
    if shape.user is None:
        return None
    if shape.user_stop is None and not shape.user_turn_limit:
        return shape.user
    user: dict[str, Any] = {"system": shape.user}
    if shape.user_stop is not None:
        user["stop"] = list(shape.user_stop)
    if shape.user_turn_limit:
        turns = sum(1 for c in built.calls if c["tool"] == "user")
        user["max_turns"] = max(0, turns - (0 if run.first_user_is_input else 1))
    return user


def write_import(
    source: ImportSource,
    out: Path,
    effect_map: Mapping[str, str],
    *,
    force: bool = False,
    redaction_rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build every run of ``source`` and write the import folder.

    Args:
        source: what the adapter read.
        out: the output folder (created when missing).
        effect_map: tool -> effect overrides (``--map`` / ``--map-file``).
        force: write into a non-empty folder (earlier traces there are removed).
        redaction_rules: the redaction rules document for the traces and tasks
            (`runner.importers.redaction`; None: the built-in detectors).

    Returns:
        The import report (also written as ``import-report.json``).

    Raises:
        InputError: ``out`` is a file or a non-empty folder without ``force``; a mapped tool
            the source lacks; a run the builder rejects (file and field named).
    """
    _prepare(out, force)
    manifest = build_manifest(source.tools, effect_map)
    effects = {t["id"]: t["effect"] for t in manifest["tools"]}
    hashes = {t["id"]: t["schema_hash"] for t in manifest["tools"]}
    index = ToolIndex(
        effects=effects,
        hashes=hashes,
        specs={
            t["id"]: RuntimeTool(t, "recorded", None).function_spec() for t in manifest["tools"]
        },
        call_schema_hashes=source.call_schema_hashes,
    )
    defined = {t.id for t in source.tools if t.schema is not None}
    name_only = [t.id for t in source.tools if t.schema is None]
    missing: Counter[str] = Counter(source.missing)
    missing["tool.schema"] += len(name_only)
    ids = IdSet("run id")
    workflows: dict[str, str] = {}  # content -> file name
    read_only: dict[str, str] = {}
    traces: dict[str, list[dict[str, Any]]] = {}
    built_runs: list[tuple[SourceRun, BuiltRun]] = []
    templated_warned = False
    notes = list(source.notes)
    for run in source.runs:
        ids.add(validate_id(run.run_id, kind="run id", file=source.file))  # it names a file
        offered = _offered(run, source, defined)
        built = build_run(run, index, offered)
        tool_ids = list(offered)
        if run.request_tools is None:
            tool_ids += [t.id for t in source.tools if t.id not in tool_ids]
        called = (c["tool"] for c in built.calls if c["tool"] not in ("model", "user"))
        tool_ids += [t for t in dict.fromkeys(called) if t not in tool_ids]
        unlisted = [t for t in tool_ids if t not in offered]
        text = _workflow(source.shape, run, built, tool_ids, source.shape.name, unlisted)
        if text not in workflows:
            stem = "workflow" if not workflows else f"workflow-{len(workflows) + 1}"
            workflows[text] = f"{stem}.yaml"
            safe = [t for t in tool_ids if effects.get(t) in _SAFE_EFFECTS]
            read_only[f"{stem}.read-only.yaml"] = _workflow(
                source.shape, run, built, safe, source.shape.name + "-read-only", unlisted
            )
        env_tools = {t: hashes[t] for t in tool_ids}
        wf = {"hash": content_hash(text), "content": text}
        head = _run_line(run, wf, source.shape, env_tools, source.backend, missing)
        head["meta"]["workflow_file"] = workflows[text]
        traces[run.run_id] = [head, *built.calls, built.end]
        built_runs.append((run, built))
        if run.system is not None and "${" in run.system and not templated_warned:
            templated_warned = True
            notes.append(
                f"run {run.run_id}: the system prompt contains '${{': the workflow language "
                "reads it as a reference, so `check` may reject the generated workflow"
            )

    if name_only:
        notes.append(
            f"tools known by name only (the source has no definition): {', '.join(name_only)}; "
            "the workflows list them in unlisted_tools (callable, not shown to the model) and "
            "lint reports their calls; pass --tools FILE (OpenAI function format) to import "
            "their definitions"
        )
    tasks: dict[str, dict[str, Any]] = {}
    for run, built in built_runs:
        task = tasks.setdefault(
            run.task_id, {"task_id": run.task_id, "input": run.task_input, "observations": []}
        )
        task["observations"].extend(built.observations)
        if run.task_id in source.expected:
            task["expected"] = source.expected[run.task_id]

    redactions = redact_import(traces, tasks, redaction_rules)
    # every file is encoded before anything is written or removed: a text that is not Unicode
    # (a lone surrogate escape of the source) is refused naming where it is, and an earlier
    # import under --force is left as it was
    files: dict[Path, bytes] = {}
    trace_dir = out / "traces"
    manifest_text = json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"
    files[out / MANIFEST_NAME] = encoded(manifest_text, source.file, "tools manifest")
    files[trace_dir / MANIFEST_NAME] = files[out / MANIFEST_NAME]
    for text, name in [*workflows.items(), *((t, n) for n, t in read_only.items())]:
        files[out / name] = encoded(text, source.file, f"workflow {name}")
    for run_id, lines in traces.items():
        path = path_for_id(trace_dir, run_id, suffix=".jsonl", kind="run id")
        files[path] = b"".join(
            encoded(
                _dumps(line, source.file, f"run {run_id} line {number}") + "\n",
                source.file,
                f"run {run_id} line {number}",
                line,
            )
            for number, line in enumerate(lines, 1)
        )
    for name, rows in (
        (TASKS_NAME, list(tasks.values())),
        (READ_ONLY_TASKS_NAME, [_read_only_task(t, effects) for t in tasks.values()]),
    ):
        files[out / name] = b"".join(
            encoded(
                _dumps(t, source.file, f"task {t['task_id']}") + "\n",
                source.file,
                f"task {t['task_id']}",
                t,
            )
            for t in rows
        )
    out.mkdir(parents=True, exist_ok=True)
    trace_dir.mkdir(exist_ok=True)
    for old in trace_dir.glob("*.jsonl"):
        old.unlink()
    for path, data in files.items():
        path.write_bytes(data)
    report = _report(source, manifest, built_runs, missing, workflows, read_only, len(tasks))
    report["notes"] = notes
    report["redactions"] = redactions
    report["explain"] = source.explain or _explain_runs(source)
    (out / REPORT_NAME).write_text(
        json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    log.info(
        "import_written",
        source=source.kind,
        out=str(out),
        runs=report["runs"],
        calls=report["calls"]["total"],
    )
    return report


def _explain_runs(source: ImportSource) -> dict[str, Any]:
    """What a conversation importer read, by file: runs and messages by role (``--explain``)."""
    out: dict[str, Any] = {}
    for run in source.runs:
        entry = out.setdefault(
            run.file, {"read": Counter(), "ignored": {}, "log_records": {}, "decided": {}}
        )
        entry["read"]["runs"] += 1
        for msg in run.messages:
            entry["read"][f"{msg.role} messages"] += 1
        if run.system is not None:
            entry["read"]["system prompts"] += 1
    for entry in out.values():
        entry["read"] = dict(sorted(entry["read"].items()))
    return out


def _read_only_task(task: Mapping[str, Any], effects: Mapping[str, str]) -> dict[str, Any]:
    """The task with ``expected`` limited to read/pure tool calls.

    Expected texts are dropped: the outputs a source expects confirm writes that a read-only
    workflow cannot make.
    """
    out = {k: v for k, v in task.items() if k != "expected"}
    calls = [
        c
        for c in (task.get("expected") or {}).get("tool_calls") or []
        if effects.get(str(c.get("tool"))) in _SAFE_EFFECTS
    ]
    if calls:
        out["expected"] = {"tool_calls": calls}
    return out


def _report(
    source: ImportSource,
    manifest: Mapping[str, Any],
    built_runs: Sequence[tuple[SourceRun, BuiltRun]],
    missing: Counter[str],
    workflows: Mapping[str, str],
    read_only: Mapping[str, str],
    task_count: int,
) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    totals = {"tool_errors": 0, "fixed_messages": 0, "id_mismatches": 0}
    failed = 0
    for run, built in built_runs:
        calls.update(built.counts.calls)
        missing.update(built.counts.missing)
        totals["tool_errors"] += built.counts.tool_errors
        totals["fixed_messages"] += built.counts.fixed_messages
        totals["id_mismatches"] += built.counts.id_mismatches
        failed += run.failed_reason is not None or run.failure is not None
    effects = Counter(t["effect"] for t in manifest["tools"])
    return {
        "source": source.kind,
        "file": source.file,
        "runs": len(built_runs),
        "tasks": task_count,
        "succeeded_runs": len(built_runs) - failed,
        "failed_runs": failed,
        "calls": {
            "model": calls["model"],
            "user": calls["user"],
            "tool": calls["tool"],
            "total": sum(calls.values()),
        },
        "tool_errors": totals["tool_errors"],
        "fixed_messages": totals["fixed_messages"],
        "tool_results_matched_by_position": totals["id_mismatches"],
        "tools": {
            "total": len(manifest["tools"]),
            "by_effect": dict(sorted(effects.items())),
            "unsafe": [t["id"] for t in manifest["tools"] if t["effect"] == "unsafe"],
        },
        "workflows": sorted(workflows.values()) + sorted(read_only),
        "missing": {k: v for k, v in sorted(missing.items()) if v},
        "notes": list(source.notes),
    }
