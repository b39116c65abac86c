"""The load gate of ``run`` and ``submit``: read the tools first, then take the sandbox's word.

The host never imports the code under evaluation. So the gate has two stages:

1. `read_gate` (no engine, nothing run): the eligibility check over the registry read from
   source (`runner.tools.static`), with the model provider built as the command
   will build it. What that reading decided is raised now, before any backend exists: invalid
   input (exit 2), a tool the policy denies whose declaration was read literally, an id no
   module defines where every module was fully read (exit 3). What it could not decide waits.
2. `sandbox_gate`, once the command's tool snapshot exists and the backend is made: each
   workflow's registry is described inside a sandbox from that snapshot
   (`runner.admission.sandbox_registry`, kept by the snapshot's digest, the
   image id and the policy hash: a resumed job, or a second command over the same snapshot,
   starts no describing sandbox again), and the check runs again on it. This registry is the
   one the runs use; every problem it shows is raised (exit 2 or 3) before a run starts or a
   job is written.

`admit` (both stages at once) is for callers holding a backend already.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from runner.admission.describe import sandbox_registry
from runner.admission.eligibility import (
    EligibilityReport,
    check_eligibility,
    recheck,
)
from runner.domain.registry import Registry
from runner.domain.workflow import WorkflowFile
from runner.hostlog import get_logger
from runner.policy import Policy
from runner.tools.locate import locate_tools

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.settings import Settings
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

__all__ = ["Admission", "admit", "read_gate", "sandbox_gate"]

log = get_logger(__name__)

B = TypeVar("B", bound="Backend")


def read_gate(
    paths: Iterable[str | Path],
    policy: Policy | str | Path,
    *,
    cwd: Path | None = None,
    settings: Settings | None = None,
    decided_only: bool = True,
) -> EligibilityReport:
    """Stage 1: check with the registries read from source; raise what that decided.

    ``decided_only=False`` raises what the reading could not decide too, as ``check`` does
    (``submit --dry-run``: no sandbox will describe the tools).

    Raises:
        InputError: a workflow, a module (not found, a declaration the runtime refuses), the
            model provider or the policy is invalid input (exit 2).
        IneligibleError: a tool read literally is denied, or an id does not resolve in
            modules read in full (exit 3).
    """
    report = check_eligibility(paths, policy, cwd=cwd, settings=settings, model_check="import")
    report.raise_for_problems(decided_only=decided_only)
    # `check` fails on these (fail closed); here the sandbox's description decides. Not said
    # of a workflow naming an MCP stdio server: `check` describes that one in a sandbox too
    # (`runner.admission.checkread`), so both agree, and its tools "do not resolve" here only
    # because the server is never run on the host (the warning was false for every MCP tool).
    undecided = [
        p.message
        for c in report.workflows
        if c.workflow is None or not locate_tools(c.workflow).mcp_servers
        for p in c.problems
    ]
    if undecided:
        log.warning("eligibility_left_to_the_sandbox", problems=undecided)
    return report


def sandbox_gate(
    report: EligibilityReport,
    *,
    backend: Backend,
    settings: Settings,
    image: str,
    snapshot: ToolSnapshot,
) -> EligibilityReport:
    """Stage 2: check again with each registry described in a sandbox (kept by snapshot).

    Returns:
        The report; each check's registry is the sandbox's (filtered by the policy).

    Raises:
        InputError: a module fails to import in the sandbox, or is described as invalid.
        IneligibleError: a tool the sandbox describes is denied, or an id does not resolve.
        InfrastructureError: the backend failed.
    """

    def describe(workflow: WorkflowFile) -> Registry:
        return sandbox_registry(
            workflow,
            backend=backend,
            settings=settings,
            image=image,
            policy=report.policy,
            snapshot=snapshot,
            cache=True,
        )

    described = recheck(report, describe)
    described.raise_for_problems()
    return described


@dataclass(frozen=True)
class Admission(Generic[B]):
    """Workflows that passed the load gate, with the backend they may now run on.

    Attributes:
        report: the eligibility report (every workflow eligible).
        backend: the backend, handed back only after the gate passed.
    """

    report: EligibilityReport
    backend: B

    def workflow(self, path: str | Path) -> tuple[WorkflowFile, Registry]:
        """The loaded workflow of ``path`` and its filtered registry.

        Raises:
            KeyError: ``path`` was not admitted.
        """
        for check in self.report.workflows:
            if check.path == str(path) and check.workflow and check.registry:
                return check.workflow, check.registry
        raise KeyError(str(path))


def admit(
    paths: Iterable[str | Path],
    policy: Policy | str | Path,
    backend: B,
    *,
    settings: Settings | None = None,
    image: str | None = None,
    snapshot: ToolSnapshot | None = None,
) -> Admission[B]:
    """Both stages: read first, then (given ``settings``, ``image`` and ``snapshot``) describe.

    Without ``snapshot`` only the reading runs and the backend is not called, whatever the
    outcome: an ineligible or invalid workflow raises before any sandbox exists.

    Raises:
        InputError: a workflow (or the policy) is invalid input (exit 2).
        IneligibleError: a workflow calls a denied or unknown tool (exit 3), every problem
            listed.
        InfrastructureError: the backend failed (describing only).
    """
    report = read_gate(paths, policy)
    if snapshot is None or settings is None or image is None:
        report.raise_for_problems()
        return Admission(report, backend)
    return Admission(
        sandbox_gate(report, backend=backend, settings=settings, image=image, snapshot=snapshot),
        backend,
    )
