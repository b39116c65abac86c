"""The load-time eligibility check: can these workflows be sandboxed under this policy?

This is the load path that ``check`` runs and that ``submit`` and ``run`` pass through before
anything starts: load the policy, every workflow and its registry, restrict the registry by the
policy, then walk every step of every workflow (each agent step's and each program step's
declared toolset included) and resolve
every tool id through the filtered view. Every problem is collected, never just the first; each
names the workflow file, the step, the tool, its effect class and the rule.

Where the registry comes from is the caller's (``describe``): by default the tool modules are
read from source (`runner.tools.static.static_registry`: ``check`` imports and runs
nothing, and needs no engine); ``submit`` and ``run`` check again with the registry a sandbox
described (`recheck`, `runner.admission.gate`). A problem the static reading
could not decide (a tool it could not read literally, so ``unsafe``; an id missing from a module
it could not fully follow; a module the host's Python cannot parse) is marked ``decided=False``:
``check`` fails on it all the same (fail closed), ``submit`` and ``run`` leave it to the sandbox.

Invariants: nothing here creates a sandbox, touches a backend or writes a ledger row (the
module does not import one) unless ``describe`` does; a workflow is eligible only when every
tool id of every step resolves in the filtered view (an unknown id is ineligible: fail closed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from runner.admission.report import EligibilityReport, Problem, WorkflowCheck
from runner.domain.registry import Registry, ToolSpec
from runner.domain.workflow import WorkflowFile, load_workflow
from runner.errors import (
    EXIT_INELIGIBLE,
    EXIT_INPUT,
    InputError,
    ToolNotResolvable,
)
from runner.hostlog import get_logger
from runner.policy.loader import Policy, load_policy
from runner.providers.workflows import check_provider, located_model_error
from runner.sdk import function_name
from runner.tools.static import (
    HostSyntaxError,
    program_sdk_tools,
    read_function,
    static_registry,
)

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = [
    "EligibilityReport",
    "Problem",
    "WorkflowCheck",
    "check_eligibility",
    "recheck",
]

log = get_logger(__name__)

Describe = Callable[[WorkflowFile], Registry]


def check_eligibility(
    paths: Iterable[str | Path],
    policy: Policy | str | Path,
    *,
    cwd: Path | None = None,
    settings: Settings | None = None,
    describe: Describe = static_registry,
    model_check: Literal["static", "import"] = "static",
) -> EligibilityReport:
    """Load and check every workflow of ``paths`` under ``policy``; collect every problem.

    Besides the tools, each workflow's model provider is checked: ``model_check="import"``
    builds it once, as ``submit`` and ``run`` build it (a scripted function is imported: it
    runs on the host by design, `runner.providers.workflows.check_provider`);
    ``"static"`` (``check``) only finds a scripted function's module and its definition
    (`runner.tools.static.read_function`). Either way a scripted function that does
    not resolve is invalid input. A folder given in ``paths`` (the CLI passes a folder that
    holds no ``*.yaml``/``*.yml`` as itself) is invalid input: nothing was checked.

    Args:
        paths: workflow files.
        policy: a loaded policy, or a policy name or path for `load_policy`.
        cwd: the command's current directory (scripted functions are looked up in the
            workflow's folder, then here); default the process's.
        settings: host settings for the ``openai`` provider.
        describe: builds a loaded workflow's unfiltered registry (default: read from source,
            nothing imported).
        model_check: how the model provider is checked (above).

    Returns:
        The report; invalid workflow files are problems in it (exit 2), not exceptions.

    Raises:
        InputError: the policy itself cannot be loaded.
    """
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    where = cwd if cwd is not None else Path.cwd()
    checks = []
    for path in map(str, paths):
        loaded = _load(path)
        if isinstance(loaded, WorkflowCheck):
            checks.append(loaded)
            continue
        try:
            registry = describe(loaded).restrict(policy)
            _check_model(loaded, where, settings, static=model_check == "static")
        except InputError as exc:
            checks.append(WorkflowCheck(path, loaded, None, (_invalid(path, exc),)))
            continue
        checks.append(_walk(path, loaded, registry))
    report = EligibilityReport(policy, tuple(checks))
    report = offered_checked(report)
    log.debug(
        "eligibility_checked",
        policy=policy.source,
        workflows=len(checks),
        eligible=report.eligible,
        problems=len(report.problems),
    )
    return report


def recheck(report: EligibilityReport, describe: Describe) -> EligibilityReport:
    """The checks of ``report``'s workflows again, each registry from ``describe``.

    ``submit`` and ``run`` pass the sandbox's description here after the static reading
    (`runner.admission.gate`); the workflows are the ones loaded then, the model
    providers were checked then. A workflow that did not load stays as it was.
    """
    checks = []
    for check in report.workflows:
        if check.workflow is None:
            checks.append(check)
            continue
        try:
            registry = describe(check.workflow).restrict(report.policy)
        except InputError as exc:
            checks.append(
                WorkflowCheck(check.path, check.workflow, None, (_invalid(check.path, exc),))
            )
            continue
        checks.append(_walk(check.path, check.workflow, registry))
    return offered_checked(EligibilityReport(report.policy, tuple(checks)))


def offered_checked(report: EligibilityReport) -> EligibilityReport:
    """``report`` with a problem for each SDK tool a program step's module defines, undeclared.

    An agent SDK's tool the program's module defines (read from source: `runner.tools.
    static.program_sdk_tools`) is offered to its model; when its step's toolset declares it
    neither by id nor by the name the SDK offers it under, nobody declared what it does:
    ``unsafe`` (fail closed), the workflow ineligible (exit 3), the tool named.
    """
    checks = []
    for check in report.workflows:
        if check.workflow is None or check.registry is None:
            checks.append(check)
            continue
        problems = list(check.problems)
        for index, tools in program_sdk_tools(check.workflow):
            step = check.workflow.spec.steps[index]
            known = _declared_names(step.tools or [], check.registry)
            for tool in tools:
                if tool.id in known or tool.offered_name in known:
                    continue
                problems.append(_undeclared(check.path, check.workflow, index, tool))
        checks.append(dataclasses.replace(check, problems=tuple(problems)))
    return EligibilityReport(report.policy, tuple(checks))


def _declared_names(tool_ids: Sequence[str], registry: Registry) -> set[str]:
    """Every name a step's declared tools go by: ids, offered names, SDK names."""
    known: set[str] = set()
    for tool_id in tool_ids:
        known.update((tool_id, function_name(tool_id)))
        if tool_id in registry:
            known.add(registry.resolve(tool_id).offered_name)
    return known


def _undeclared(path: str, workflow: WorkflowFile, index: int, tool: ToolSpec) -> Problem:
    step = workflow.spec.steps[index]
    return Problem(
        workflow=path,
        kind="undeclared",
        message=(
            f'{path}: step "{step.id}" (program toolset): its program defines the '
            f'{tool.framework} tool "{tool.offered_name}" ({tool.location}) for its model, '
            "which the step does not declare: unsafe (fail closed); declare it: its id in "
            "the step's tools, its module in the workflow's tools, an effect class from @tool "
            "stacked with the SDK's decorator or the policy's map:"
        ),
        exit_code=EXIT_INELIGIBLE,
        step=step.id,
        tool=tool.offered_name,
        effect="unsafe",
        rule="undeclared offered tool",
        line=workflow.line_of(("steps", index, "program")),
        field=f"steps.{index}.program",
    )


def _load(path: str) -> WorkflowFile | WorkflowCheck:
    """The loaded workflow, or the check of a file that did not load."""
    if Path(path).is_dir():
        empty = InputError("a folder with no workflow file (*.yaml, *.yml)", file=path)
        return WorkflowCheck(path, None, None, (_invalid(path, empty),))
    try:
        return load_workflow(path)
    except InputError as exc:
        return WorkflowCheck(path, None, None, (_invalid(path, exc),))


def _check_model(
    workflow: WorkflowFile, cwd: Path, settings: Settings | None, *, static: bool
) -> None:
    model = workflow.spec.model
    if static and model is not None and model.provider == "scripted" and model.function:
        try:
            read_function(model.function, [workflow.folder, cwd])
        except InputError as exc:
            raise located_model_error(workflow, exc) from exc
        return
    check_provider(workflow, cwd=cwd, settings=settings)


def _walk(path: str, workflow: WorkflowFile, registry: Registry) -> WorkflowCheck:
    """Resolve every tool id of every step through the filtered ``registry``."""
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
                denial = registry.denial(tool_id)
                decided = denial.tool.unread is None if denial is not None else not registry.unread
                problem = _unresolved(path, workflow, label, step.id, loc, exc)
                problems.append(dataclasses.replace(problem, decided=decided))
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
        decided=not isinstance(exc, HostSyntaxError),  # the image's Python may read it
    )
