"""Redact an import before it is written: every trace line and every task.

One `runner.trace.redact.Redactor` (one key, never stored) covers the whole import, so a
secret has the same placeholder in a run's trace and in the task built from it (a task's
observations are what a shadow run is served; its expected calls are matched against the
trace's). Secrets are learnt from every line and task first, then replaced everywhere.

Not redacted: the generated workflows and the ``workflow.content`` of each run line (its hash
names the workflow file reproduce runs; a secret in a source's system prompt stays there, and
its replay would no longer match a redacted model request), and the tool manifest.
"""

from __future__ import annotations

from typing import Any

from runner.trace.redact import Redactor

__all__ = ["redact_import"]


def redact_import(
    traces: dict[str, list[dict[str, Any]]],
    tasks: dict[str, dict[str, Any]],
    rules: dict[str, Any] | None,
) -> int:
    """Redact ``traces`` (run id -> lines) and ``tasks`` (task id -> task) in place.

    Args:
        traces: the import's trace lines per run.
        tasks: the import's tasks per task id.
        rules: the redaction rules document (None: the built-in detectors and header names).

    Returns:
        The number of redaction records written (trace lines only: tasks carry none).
    """
    redactor = Redactor(rules)
    for lines in traces.values():
        for line in lines:
            redactor.learn(line)
    for task in tasks.values():
        redactor.learn(task)
    for run_id, lines in traces.items():
        traces[run_id] = [redactor.apply(line) for line in lines]
    count = redactor.redactions
    for task_id, task in tasks.items():
        redacted = redactor.apply(task)
        redacted.pop("redactions", None)  # a task line has no such field
        tasks[task_id] = redacted
    return count
