"""The result of the eligibility check: each problem, each workflow's check, the report.

`runner.admission.eligibility` builds these; ``check`` prints them (``lines``, ``to_json``) and
``submit`` and ``run`` raise on them (`EligibilityReport.raise_for_problems`). No I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from runner.domain.registry import Registry
from runner.domain.words import counted
from runner.domain.workflow import WorkflowFile
from runner.errors import EXIT_OK, IneligibleError, InputError, worst_exit_code
from runner.policy.loader import Policy

__all__ = ["EligibilityReport", "Problem", "ProblemKind", "WorkflowCheck"]

ProblemKind = Literal["denied", "unresolvable", "invalid", "undeclared"]


@dataclass(frozen=True)
class Problem:
    """One reason a workflow cannot run.

    Attributes:
        workflow: the workflow file as given.
        kind: ``denied`` (a policy removed the tool), ``unresolvable`` (no such tool),
            ``undeclared`` (a program offers its model an agent SDK's tool its step does not
            declare: unsafe, fail closed) or ``invalid`` (bad input: the file, a module, a
            manifest).
        message: the full diagnostic line.
        exit_code: 3 for denied and unresolvable tools, 2 for invalid input.
        step, tool, effect, rule, line, field: what is known of the place and the reason.
        error: the `InputError` of an invalid input (not part of the JSON).
        decided: False when only a static reading's limits made it a problem (see the
            module docstring); not part of the JSON.
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
    decided: bool = dataclasses.field(default=True, compare=False)

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
            return f"{self.path}: not eligible ({counted(len(self.problems), 'problem')})"
        used = [self.registry.resolve(t) for t in self.workflow.spec.tool_ids()]
        executed = sum(1 for t in used if t.disposition == "execute")
        steps = len(self.workflow.spec.steps)
        return (
            f"{self.path}: eligible: {counted(steps, 'step')}, {counted(len(used), 'tool')} "
            f"({executed} execute, {len(used) - executed} recorded)"
        )

    def tool_lines(self) -> list[str]:
        """One line per used tool whose effect class no ``@tool`` declaration gave.

        An agent SDK's tool (`runner.sdk.sdktools`):
        ``  openai-agents tool "search_kb" as kb.search: read (execute|recorded)``; a tool
        whose class something else decided, an MCP server's annotations
        (`runner.tools.mcp`) or the policy's ``map:``:
        ``  tool "docs.search_docs" of mcp server python3 docs_server.py: read (MCP
        annotations: readOnlyHint: true) (recorded)`` (one line). Empty when every used tool
        declares its class: the text form of ``check`` then shows what ``--json`` shows.
        """
        if self.workflow is None or self.registry is None:
            return []
        out = []
        for tool_id in self.workflow.spec.tool_ids():
            if tool_id not in self.registry:
                continue
            spec = self.registry.resolve(tool_id)
            if spec.framework is not None:
                alias = f" as {spec.id}" if spec.id != spec.sdk_name else ""
                out.append(
                    f'  {spec.framework} tool "{spec.sdk_name}"{alias}: {spec.effect_text()}'
                    f" ({spec.disposition})"
                )
            elif spec.decided_by is not None:
                out.append(
                    f'  tool "{spec.id}" of {spec.origin}: {spec.effect_text()}'
                    f" ({spec.disposition})"
                )
        return out

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
                            "schema_hash": spec.schema_hash or None,
                            **({"decided_by": spec.decided_by} if spec.decided_by else {}),
                            **(
                                {"framework": spec.framework, "sdk_name": spec.sdk_name}
                                if spec.framework
                                else {}
                            ),
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
        """One line per problem; per eligible workflow its summary and `tool_lines`."""
        out: list[str] = []
        for check in self.workflows:
            out.extend(p.message for p in check.problems)
            if check.eligible:
                out.extend([check.summary_line(), *check.tool_lines()])
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (``check --json``)."""
        return {
            "policy": {**self.policy.summary(), "source": self.policy.source},
            "eligible": self.eligible,
            "exit_code": self.exit_code,
            "workflows": [check.to_json() for check in self.workflows],
        }

    def raise_for_problems(self, *, decided_only: bool = False) -> None:
        """Raise when any workflow cannot run.

        Args:
            decided_only: ignore the problems a static reading could not decide (``submit``
                and ``run`` before their sandbox's description).

        Raises:
            InputError: the first invalid input, when there is one (exit 2 wins over 3).
            IneligibleError: otherwise, when any tool is denied or unresolvable; its
                ``problems`` holds every diagnostic line.
        """
        problems = [p for p in self.problems if p.decided or not decided_only]
        for problem in problems:
            if problem.error is not None:
                raise problem.error
        if problems:
            count = len({p.workflow for p in problems})
            text = "\n".join(p.message for p in problems)
            raise IneligibleError(
                f"{count} workflow(s) cannot be sandboxed under {self.policy.source}:\n{text}",
                problems=[p.message for p in problems],
            )
