"""The load-time eligibility check: can these workflows be sandboxed under this policy?

This is the load path that ``check`` runs and that ``submit`` and ``run`` pass through before
anything starts (`admit`): load the policy, every workflow and its registry, restrict the
registry by the policy, then walk every step of every workflow (each agent step's and each
program step's declared toolset included) and resolve every tool id through the filtered view.
Every problem is collected, never just the first; each names the workflow file, the step, the
tool, its effect class and the rule.

Invariants: nothing here creates a sandbox, touches a backend or writes a ledger row (the
module does not import one); a workflow is eligible only when every tool id of every step
resolves in the filtered view (an unknown id is ineligible: fail closed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import structlog

from runner.domain.registry import Registry
from runner.domain.workflow import WorkflowFile, load_workflow
from runner.errors import (
    EXIT_INELIGIBLE,
    EXIT_INPUT,
    EXIT_OK,
    IneligibleError,
    InputError,
    ToolNotResolvable,
    worst_exit_code,
)
from runner.policy.loader import Policy, load_policy
from runner.providers.base import check_provider

if TYPE_CHECKING:
    from runner.backends.base import Backend

__all__ = [
    "Admission",
    "EligibilityReport",
    "Problem",
    "WorkflowCheck",
    "admit",
    "check_eligibility",
]

log = structlog.get_logger(__name__)

ProblemKind = Literal["denied", "unresolvable", "invalid"]
B = TypeVar("B", bound="Backend")


@dataclass(frozen=True)
class Problem:
    """One reason a workflow cannot run.

    Attributes:
        workflow: the workflow file as given.
        kind: ``denied`` (a policy removed the tool), ``unresolvable`` (no such tool) or
            ``invalid`` (bad input: the file, a module, a manifest).
        message: the full diagnostic line.
        exit_code: 3 for denied and unresolvable tools, 2 for invalid input.
        step, tool, effect, rule, line, field: what is known of the place and the reason.
        error: the `InputError` of an invalid input (not part of the JSON).
    """

    workflow: str
    kind: ProblemKind
    message: str
    exit_code: int
    step: str | None = None
    tool: str | None = None
    effect: str | None = None
    rule: str | None = None
    line: int | None = None
    field: str | None = None
    error: InputError | None = dataclasses.field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object (``--json``)."""
        keys = ("workflow", "kind", "message", "exit_code", "step", "tool", "effect", "rule")
        data = {key: getattr(self, key) for key in keys}
        data.update(line=self.line, field=self.field)
        return data


@dataclass(frozen=True)
class WorkflowCheck:
    """The check of one workflow file.

    Attributes:
        path: the file as given.
        workflow: the loaded workflow; None when it could not be loaded.
        registry: its capability-filtered registry; None when it could not be built.
        problems: every problem found, in file order.
    """

    path: str
    workflow: WorkflowFile | None
    registry: Registry | None
    problems: tuple[Problem, ...]

    @property
    def eligible(self) -> bool:
        """True when the workflow loaded and every tool id of every step resolves."""
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0 eligible, 3 ineligible, 2 invalid input (the worst of its problems)."""
        return worst_exit_code(EXIT_OK, *(p.exit_code for p in self.problems))

    def summary_line(self) -> str:
        """``v1.yaml: eligible: 4 steps, 4 tools (2 execute, 2 recorded)`` (or not)."""
        if not self.eligible or self.workflow is None or self.registry is None:
            return f"{self.path}: not eligible ({len(self.problems)} problem(s))"
        used = [self.registry.resolve(t) for t in self.workflow.spec.tool_ids()]
        executed = sum(1 for t in used if t.disposition == "execute")
        steps = len(self.workflow.spec.steps)
        return (
            f"{self.path}: eligible: {steps} step(s), {len(used)} tool(s) "
            f"({executed} execute, {len(used) - executed} recorded)"
        )

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON object (``--json``)."""
        data: dict[str, Any] = {
            "path": self.path,
            "eligible": self.eligible,
            "exit_code": self.exit_code,
            "problems": [p.to_json() for p in self.problems],
        }
        if self.workflow is not None:
            data.update(name=self.workflow.spec.name, version=self.workflow.spec.version)
            data["content_hash"] = self.workflow.content_hash
        if self.workflow is not None and self.registry is not None:
            tools = []
            for tool_id in self.workflow.spec.tool_ids():
                if tool_id in self.registry:
                    spec = self.registry.resolve(tool_id)
                    tools.append(
                        {
                            "id": spec.id,
                            "effect": spec.effect.value,
                            "disposition": spec.disposition,
                            "schema_hash": spec.schema_hash,
                        }
                    )
            data["tools"] = tools
        return data


@dataclass(frozen=True)
class EligibilityReport:
    """The result of checking several workflows under one policy."""

    policy: Policy
    workflows: tuple[WorkflowCheck, ...]

    @property
    def problems(self) -> list[Problem]:
        """Every problem of every workflow, in the order given."""
        return [p for check in self.workflows for p in check.problems]

    @property
    def eligible(self) -> bool:
        """True when every workflow is eligible."""
        return all(check.eligible for check in self.workflows)

    @property
    def exit_code(self) -> int:
        """The worst exit code of all workflows (SPEC.md order: 2 before 3 before 0)."""
        return worst_exit_code(EXIT_OK, *(check.exit_code for check in self.workflows))

    def lines(self) -> list[str]:
        """One line per problem, and one summary line per eligible workflow."""
        out: list[str] = []
        for check in self.workflows:
            out.extend(p.message for p in check.problems)
            if check.eligible:
                out.append(check.summary_line())
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (``check --json``)."""
        return {
            "policy": {**self.policy.summary(), "source": self.policy.source},
            "eligible": self.eligible,
            "exit_code": self.exit_code,
            "workflows": [check.to_json() for check in self.workflows],
        }

    def raise_for_problems(self) -> None:
        """Raise when any workflow cannot run.

        Raises:
            InputError: the first invalid input, when there is one (exit 2 wins over 3).
            IneligibleError: otherwise, when any tool is denied or unresolvable; its
                ``problems`` holds every diagnostic line.
        """
        for problem in self.problems:
            if problem.error is not None:
                raise problem.error
        problems = self.problems
        if problems:
            count = len({p.workflow for p in problems})
            text = "\n".join(p.message for p in problems)
            raise IneligibleError(
                f"{count} workflow(s) cannot be sandboxed under {self.policy.source}:\n{text}",
                problems=[p.message for p in problems],
            )


def check_eligibility(
    paths: Iterable[str | Path],
    policy: Policy | str | Path,
    *,
    cwd: Path | None = None,
    settings: Any = None,
) -> EligibilityReport:
    """Load and check every workflow of ``paths`` under ``policy``; collect every problem.

    Besides the tools, each workflow's model provider is built once, as ``submit`` and ``run``
    build it (`runner.providers.base.check_provider`): a scripted function that does
    not resolve is invalid input here too. A folder given in ``paths`` (the CLI passes a folder
    that holds no ``*.yaml``/``*.yml`` as itself) is invalid input: nothing was checked.

    Args:
        paths: workflow files.
        policy: a loaded policy, or a policy name or path for `load_policy`.
        cwd: the command's current directory (scripted functions are looked up in the
            workflow's folder, then here); default the process's.
        settings: host settings for the ``openai`` provider.

    Returns:
        The report; invalid workflow files are problems in it (exit 2), not exceptions.

    Raises:
        InputError: the policy itself cannot be loaded.
    """
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    where = cwd if cwd is not None else Path.cwd()
    checks = tuple(_check_one(str(path), policy, where, settings) for path in paths)
    report = EligibilityReport(policy, checks)
    log.debug(
        "eligibility_checked",
        policy=policy.source,
        workflows=len(checks),
        eligible=report.eligible,
        problems=len(report.problems),
    )
    return report


def _check_one(path: str, policy: Policy, cwd: Path, settings: Any) -> WorkflowCheck:
    if Path(path).is_dir():
        empty = InputError("a folder with no workflow file (*.yaml, *.yml)", file=path)
        return WorkflowCheck(path, None, None, (_invalid(path, empty),))
    try:
        workflow = load_workflow(path)
    except InputError as exc:
        return WorkflowCheck(path, None, None, (_invalid(path, exc),))
    try:
        registry = Registry.for_workflow(workflow).restrict(policy)
        check_provider(workflow, cwd=cwd, settings=settings)
    except InputError as exc:
        return WorkflowCheck(path, workflow, None, (_invalid(path, exc),))
    problems: list[Problem] = []
    for index, step in enumerate(workflow.spec.steps):
        if step.tool is not None:
            places: Sequence[tuple[str, tuple[str | int, ...]]] = [
                (step.tool, ("steps", index, "tool"))
            ]
            label = f'step "{step.id}"'
        elif step.program is not None:
            places = [
                (tool_id, ("steps", index, "tools", position))
                for position, tool_id in enumerate(step.tools or [])
            ]
            label = f'step "{step.id}" (program toolset)'
        else:
            assert step.agent is not None  # a validated step is one of the three
            places = [
                (tool_id, ("steps", index, "agent", "tools", position))
                for position, tool_id in enumerate(step.agent.tools)
            ]
            label = f'step "{step.id}" (agent toolset)'
        for tool_id, loc in places:
            try:
                registry.resolve(tool_id)
            except ToolNotResolvable as exc:
                problems.append(_unresolved(path, workflow, label, step.id, loc, exc))
    return WorkflowCheck(path, workflow, registry, tuple(problems))


def _unresolved(
    path: str,
    workflow: WorkflowFile,
    label: str,
    step_id: str,
    loc: tuple[str | int, ...],
    exc: ToolNotResolvable,
) -> Problem:
    rule = exc.fields.get("rule")
    return Problem(
        workflow=path,
        kind="unresolvable" if rule == "unresolvable" else "denied",
        message=f"{path}: {label}: {exc}",
        exit_code=EXIT_INELIGIBLE,
        step=step_id,
        tool=exc.fields.get("tool_id"),
        effect=exc.fields.get("effect"),
        rule=rule,
        line=workflow.line_of(loc),
        field=".".join(str(part) for part in loc),
    )


def _invalid(path: str, exc: InputError) -> Problem:
    return Problem(
        workflow=path,
        kind="invalid",
        message=str(exc),
        exit_code=EXIT_INPUT,
        line=exc.fields.get("line"),
        field=exc.fields.get("field"),
        error=exc,
    )


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


def admit(paths: Iterable[str | Path], policy: Policy | str | Path, backend: B) -> Admission[B]:
    """The load gate of ``submit`` and ``run``: check first, only then hand out the backend.

    The backend is not called here, whatever the outcome: an ineligible or invalid workflow
    raises before any sandbox exists (the acceptance test passes a spy backend).

    Raises:
        InputError: a workflow (or the policy) is invalid input (exit 2).
        IneligibleError: a workflow calls a denied or unknown tool (exit 3), every problem
            listed.
    """
    report = check_eligibility(paths, policy)
    report.raise_for_problems()
    return Admission(report, backend)
