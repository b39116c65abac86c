"""Specs without sandboxes: tool registry, workflows, agent steps, tasks, ids.

Loading these from files (YAML with line numbers, tool modules imported on the host for
``check``/``submit``/``run``/``record``) happens here; nothing here starts a sandbox, writes a
ledger row or reads a trace (that is `runner.tracetools`).

May import: `runner.sdk` (Effect, tool definitions), `runner.errors`, the standard library and
pydantic / PyYAML; never any other package of runner.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562), for start-up speed: importing
# one module of this package must not load the others (`check` never needs the tasks).
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.domain.ids import new_run_id, sequential_ids, validate_id
    from runner.domain.registry import Registry, ToolSpec
    from runner.domain.tasks import Task, TaskFile, load_tasks
    from runner.domain.userfunction import load_function
    from runner.domain.workflow import Step, Workflow, WorkflowFile, load_workflow

__all__ = [
    "Registry",
    "Step",
    "Task",
    "TaskFile",
    "ToolSpec",
    "Workflow",
    "WorkflowFile",
    "load_function",
    "load_tasks",
    "load_workflow",
    "new_run_id",
    "sequential_ids",
    "validate_id",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Registry": "runner.domain.registry",
        "Step": "runner.domain.workflow",
        "Task": "runner.domain.tasks",
        "TaskFile": "runner.domain.tasks",
        "ToolSpec": "runner.domain.registry",
        "Workflow": "runner.domain.workflow",
        "WorkflowFile": "runner.domain.workflow",
        "load_function": "runner.domain.userfunction",
        "load_tasks": "runner.domain.tasks",
        "load_workflow": "runner.domain.workflow",
        "new_run_id": "runner.domain.ids",
        "sequential_ids": "runner.domain.ids",
        "validate_id": "runner.domain.ids",
    },
)
