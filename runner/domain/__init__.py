"""Specs without sandboxes: tool registry, workflows, agent steps, tasks, ids.

Loading these from files (YAML with line numbers, tool modules imported on the host for
``check``/``submit``/``run``/``record``) happens here; nothing here starts a sandbox, writes a
ledger row or reads a trace (that is `runner.tracetools`).

May import: `runner.sdk` (Effect, tool definitions), `runner.errors`, the standard library and
pydantic / PyYAML; never any other package of runner.
"""

from runner.domain.ids import new_run_id, sequential_ids, validate_id
from runner.domain.registry import Registry, ToolSpec
from runner.domain.tasks import Task, TaskFile, load_tasks
from runner.domain.workflow import Step, Workflow, WorkflowFile, load_workflow

__all__ = [
    "Registry",
    "Step",
    "Task",
    "TaskFile",
    "ToolSpec",
    "Workflow",
    "WorkflowFile",
    "load_tasks",
    "load_workflow",
    "new_run_id",
    "sequential_ids",
    "validate_id",
]
