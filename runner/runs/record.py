"""``record``: run a workflow live, outside the sandbox, and write its trace (purpose ``live``).

Production runs are recorded so that they can be reproduced (SPEC.md "Who uses it"). Record
mode runs the workflow with its real tools and providers: every tool that has code
*executes* (``read``, ``local`` and ``unsafe`` too; a tool from a manifest without code is
served from the task's observations), through the same runtime and episode driver as a
sandboxed run, but as a local process (the registry's ``process`` backend). The run is charged to
the ledger under purpose ``live``.

Invariants: the trace has the five fields on every call (the runtime records the raw body,
the schema hash, the clock reading; the host the model id read from the response body; the
end line the failure signature); the registry manifest of a record run names policy
``record`` with every tool with code ``execute``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.admission.describe import sandbox_registry
from runner.backends import registry as backends
from runner.backends.base import Backend
from runner.domain.ids import timestamped_ids
from runner.domain.mcpentry import McpEntry
from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.episode.metered_run import one_off_run
from runner.episode.request import EpisodeRequest, EpisodeResult
from runner.hostlog import get_logger
from runner.policy import load_policy
from runner.providers.workflows import provider_for_workflow
from runner.runs.run import SkippedLine, asked_task
from runner.settings import Settings
from runner.tools.source import registry_for_workflow

log = get_logger(__name__)

RECORD_IMAGE = "none (unsandboxed local process)"


@dataclass(frozen=True)
class _RecordPolicyHeader:
    name: str
    mode: str
    hash: str


class RecordRegistry:
    """The registry view of a record run: every tool with code executes, nothing is denied.

    Args:
        registry: the workflow's unfiltered registry.
        policy_hash: hash of the policy whose limits and prices the run uses.
    """

    def __init__(self, registry: Registry, policy_hash: str) -> None:
        self._registry = registry
        self.policy = _RecordPolicyHeader("record", "record", policy_hash)

    def manifest(self, _policy: Any = None) -> dict[str, Any]:
        """The manifest: ``{"policy": {name: record, ...}, "tools": [...]}``, all present."""
        tools = []
        for tool in self._registry:
            entry = tool.manifest_entry()
            entry["disposition"] = "execute" if tool.has_code else "recorded"
            tools.append(entry)
        header = self.policy
        return {
            "policy": {"name": header.name, "mode": header.mode, "hash": header.hash},
            "tools": tools,
        }

    def tool_roots(self) -> list[Path]:
        """Folders the tool modules were imported from."""
        return self._registry.tool_roots()


def record_run(
    settings: Settings,
    workflow_path: Path,
    tasks_path: Path,
    task_id: str,
    *,
    output: Path | None = None,
    policy_name: str = "shadow",
    backend: Backend | None = None,
    env: dict[str, str] | None = None,
    clock_start: float | None = None,
    on_skipped_line: SkippedLine = lambda error: None,
) -> EpisodeResult:
    """Run one task of a workflow live and write its trace; charge it under ``live``.

    Args:
        settings: host settings (state dir: ledger and the trace's default home).
        workflow_path: the workflow file.
        tasks_path: the task file.
        task_id: the task to run.
        output: where to copy the trace (default: only ``<state>/traces/<run_id>.jsonl``).
        policy_name: the policy whose limits, prices and ``live`` ceiling apply (its tool
            rules do not: record runs every tool).
        backend: the backend (default the registry's ``process``: the runtime as a local
            process, `runner.backends.registry.RECORD`).
        env: extra environment variables for the tools.
        clock_start: the injected clock's start, epoch seconds (default: now).
        on_skipped_line: told each rejected line of the task file (the asked task still runs
            when its own line loaded).

    Returns:
        The episode result; ``trace_path`` is ``output`` when given.

    Raises:
        InputError: a bad workflow, task file, task id, policy or model function.
        CeilingReached: the ``live`` ceiling leaves no room for the run.
    """
    task = asked_task(tasks_path, task_id, on_skipped_line)
    workflow = load_workflow(workflow_path)
    policy = load_policy(policy_name)
    provider = provider_for_workflow(workflow, cwd=Path.cwd(), settings=settings)
    backend = backend or backends.entry(backends.RECORD, selectable=False).make(
        settings, backends.BackendOptions(env=env or {})
    )
    if any(isinstance(e, McpEntry) and e.mcp.command for e in workflow.spec.tools):
        # an MCP server is asked for its tools by the runtime (as a local process here, as
        # record runs everything), never by a host import: its annotations give the classes
        found = sandbox_registry(
            workflow, backend=backend, settings=settings, image=RECORD_IMAGE, policy=policy
        )
    else:
        found = registry_for_workflow(workflow)
    registry = RecordRegistry(found, policy.hash)
    request = EpisodeRequest(
        workflow=workflow,
        task=task,
        policy=policy,
        registry=registry,
        image=RECORD_IMAGE,
        mode="record",
        purpose="live",
        clock_start=clock_start if clock_start is not None else round(time.time(), 3),
    )
    result = one_off_run(
        request,
        purpose="live",
        command="record",
        backend=backend,
        settings=settings,
        provider=provider,
        id_factory=timestamped_ids(prefix="rec"),
        spend="from_meter",
        keep_trace_at=output,
    )
    log.info("recorded", run_id=result.run_id, status=result.status, trace=str(result.trace_path))
    return result
