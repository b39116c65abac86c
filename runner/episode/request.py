"""What one episode is asked to run, the run folder prepared for it, and how it ended.

`EpisodeRequest` (workflow, task, policy, registry, image, mode) goes into
`runner.episode.prepare.prepare_run`, which writes a `PreparedRun`; `runner.episode.driver.
run_episode` runs it and returns an `EpisodeResult` (the content of the trace's ``end`` line).
Plain data: the driver, the state and every command composing a run share these classes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.backends.base import SandboxSpec
from runner.domain.tasks import Task
from runner.tools.snapshot.toolsnapshot import ToolSnapshot

__all__ = ["EpisodeRequest", "EpisodeResult", "PreparedRun"]


@dataclass(frozen=True)
class EpisodeRequest:
    """What to run.

    Attributes:
        workflow: a loaded workflow file (`runner.domain.workflow.WorkflowFile`).
        task: the task.
        policy: the loaded policy (`runner.policy.Policy`).
        registry: the workflow's registry (`runner.domain.registry.Registry`); the manifest
            mounted into the sandbox is ``registry.manifest(policy)``.
        image: the sandbox image.
        mode: ``shadow`` or ``reproduce``.
        purpose: the trace's purpose (``replay`` for sandboxed runs).
        recorded_calls: reproduce: the trace's call records; else empty.
        fork_at: an anchored fork (mode ``shadow``): the first ``fork_at`` calls are
            ``recorded_calls`` (the anchor trace's prefix), served and verified as reproduce
            does; the run goes on fresh from call index ``fork_at``. None: no fork.
        clock_start: overrides the task's ``clock_start`` (reproduce: the trace's).
        ledger_key: the ledger run this episode is charged to (`runner.ledger.run_key`), put
            on the sandbox as a label so that the reaper can settle it after a crash.
        snapshot: the command's tool snapshot, mounted in place of the tool folders (required
            whenever the run has tool folders, except in ``record`` mode, which runs the
            project's own files live and unsandboxed on purpose).
    """

    workflow: Any
    task: Task
    policy: Any
    registry: Any
    image: str
    mode: str = "shadow"
    purpose: str = "replay"
    recorded_calls: Sequence[Mapping[str, Any]] = ()
    fork_at: int | None = None
    clock_start: float | None = None
    ledger_key: str | None = None
    snapshot: ToolSnapshot | None = None


@dataclass
class PreparedRun:
    """A prepared run: the spec to start its sandbox, and what ``start`` will carry.

    Attributes:
        run_id: the run id.
        trace_path: ``<state>/traces/<run_id>.jsonl``.
        spec: the sandbox spec.
        manifest: the manifest (sent in ``start``).
        run_spec: the run spec (sent in ``start``, `runner.episode.prepare.start_message`).
    """

    run_id: str
    trace_path: Path
    spec: SandboxSpec
    manifest: dict[str, Any]
    run_spec: dict[str, Any]


@dataclass
class EpisodeResult:
    """How an episode ended (also the content of the trace's ``end`` line).

    Attributes:
        run_id: the run id.
        status: one of `runner.trace.format.STATUSES`.
        trace_path: the written trace.
        end: the trace's ``end`` record.
        infrastructure_failed: True when the status is ``infra_error`` (CLI exit 6).
    """

    run_id: str
    status: str
    trace_path: Path
    end: dict[str, Any] = field(default_factory=dict)

    @property
    def infrastructure_failed(self) -> bool:
        """True when infrastructure, not the workflow, ended the run."""
        return self.status == "infra_error"

    def summary(self, exit_code: int | None = None) -> dict[str, Any]:
        """Return a JSON-able summary: run id, status, trace path and the ``end`` fields.

        Args:
            exit_code: the command's exit code (``run --json``, ``record --json``): then
                ``exit_code`` is it, as in every command's JSON, and the end line's own
                (the episode's logical code: 0, 1, 124, 125, 137) is ``episode_exit_code``.
                None: the end line's fields as they are.
        """
        summary = {"run_id": self.run_id, "trace": str(self.trace_path), **self.end}
        if exit_code is not None:
            summary["episode_exit_code"] = self.end.get("exit_code")
            summary["exit_code"] = exit_code
        return summary
