"""What an adapter read from its source: the `ImportSource` that `write_import` writes.

Each adapter (`runner.importers.tau2`, ``openai_messages``, ``otel``) returns one `ImportSource`:
its tools, its runs (`runner.importers.source.SourceRun`) and the `WorkflowShape` that the
generated workflow shares across runs. Data only; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.importers.source import SourceRun
from runner.importers.toolset import ImportedTool

__all__ = ["ImportSource", "WorkflowShape", "agent_shape"]


@dataclass(frozen=True)
class WorkflowShape:
    """The parts of the generated workflow that every run of a source shares.

    Attributes:
        name: workflow name; version: its version label.
        header: comment text put at the top of the file (where it came from).
        model: the workflow's ``model`` block, or None.
        input_template: the agent step's ``input`` (first user message), or None.
        user: the simulated user's instructions (``${task.x}`` allowed), or None.
        max_turns: the agent step's turn limit.
        user_stop: texts that end the conversation when the user says them (τ²'s
            ``###STOP###``, ``###TRANSFER###``), or None (no stop text: see
            ``user_turn_limit``).
        user_turn_limit: give each run's simulated user a turn limit equal to its recorded
            user turns, so that the replay ends where the recording ended (sources whose
            conversations end without a stop text).
    """

    name: str
    version: str
    header: str
    model: Mapping[str, Any] | None
    input_template: str | None
    user: str | None
    max_turns: int
    user_stop: tuple[str, ...] | None = None
    user_turn_limit: bool = False


@dataclass
class ImportSource:
    """Everything an adapter read from its source.

    Attributes:
        kind: ``tau2`` or ``openai-messages``; backend: the run lines' backend.
        file: the source file.
        tools: the source's tools in order (every tool a run calls is among them).
        runs: the runs, ids validated and unique.
        shape: what the generated workflow shares across runs.
        expected: task id -> the task's ``expected`` object.
        missing: source-level missing fields (counted in the report).
        notes: free-text remarks for the report.
        call_schema_hashes: tool call lines carry the schema hash of the manifest (False:
            the source records none at call time; counted missing, ``lint`` reports it).
        explain: per file, what was read and what was ignored and why (``import --explain``;
            the shape is the importer's, e.g. `runner.importers.otel.explain.Explain`).
    """

    kind: str
    backend: str
    file: str
    tools: list[ImportedTool]
    runs: list[SourceRun]
    shape: WorkflowShape
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    call_schema_hashes: bool = True
    explain: dict[str, Any] = field(default_factory=dict)


def agent_shape(name: str, what: str, runs: list[SourceRun], user: str) -> WorkflowShape:
    """The generic tool-calling agent's shape for a source of conversations.

    Args:
        name: the workflow name.
        what: where the runs came from (the header's words).
        runs: the runs (their turns set ``max_turns``; a run with user turns adds ``user``).
        user: the simulated user's instructions, used when a run has user turns.
    """
    return WorkflowShape(
        name=name,
        version="1",
        header=(
            f"Imported from {what}: the generic tool-calling agent.\nTools are manifest-only "
            "(no code): every call is served from a recording."
        ),
        model=None,
        input_template="${task.message}",
        user=user if any(r.simulated_user for r in runs) else None,
        user_turn_limit=True,
        max_turns=max(1, max(sum(m.role == "assistant" for m in r.messages) for r in runs)),
    )
