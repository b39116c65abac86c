"""The tool registry: every tool a workflow names, with effect class, schema and schema hash.

A `Registry` is built from a workflow's ``tools`` entries: dotted Python modules (read from
source by ``check``, described inside a sandbox by the commands that run sandboxes, imported on
the host by ``record`` alone: `runner.tools.source.registry_for_workflow`), and tool
manifests without code (``.json``; their tools are
recorded-only). `Registry.restrict` returns the capability-filtered view of a policy: denied
tools are *absent* from it (structural denial), every remaining tool carries its disposition
(``execute`` or ``recorded``), and `Registry.resolve` of a denied or unknown id raises
`ToolNotResolvable` naming the tool, its effect class and the rule. `Registry.manifest` is the
JSON mounted into the sandbox (HELPERS.md "Shared contracts").

Invariants: tool ids are unique in a registry (a duplicate is an `InputError` naming both
definitions); a view never holds a tool its policy denied; a tool without code is never
``execute``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from runner.errors import InputError, ToolNotResolvable
from runner.sdk import Effect, function_name

if TYPE_CHECKING:
    pass

__all__ = ["CapabilityPolicy", "Decision", "Denial", "Disposition", "Registry", "ToolSpec"]

Disposition = Literal["execute", "recorded"]


@dataclass(frozen=True)
class Decision:
    """A policy's verdict on one tool.

    Attributes:
        allowed: the tool is present in the filtered registry.
        disposition: ``execute`` or ``recorded`` when allowed, else None.
        rule: the rule that decided, e.g. ``deny effect unsafe`` or ``deny "email.*"``.
        source: the policy file as shown in diagnostics, e.g. ``policies/shadow.yaml``.
    """

    allowed: bool
    disposition: Disposition | None
    rule: str
    source: str


class CapabilityPolicy(Protocol):
    """What `Registry.restrict` needs of a policy (`runner.policy.Policy` provides it)."""

    @property
    def name(self) -> str:
        """The policy's name."""

    @property
    def mode(self) -> str:
        """``shadow`` or ``reproduce``."""

    @property
    def hash(self) -> str:
        """sha256 hex of the policy's canonical JSON."""

    @property
    def source(self) -> str:
        """Where the policy came from, for diagnostics."""

    def decide(self, tool: ToolSpec) -> Decision:
        """Present or absent, and how it is served."""

    def mapped(self, tool: ToolSpec) -> ToolSpec:
        """``tool`` with the effect class the policy's ``map:`` gives a tool declaring none."""

    def argument_rules(self) -> list[dict[str, Any]]:
        """The policy's argument rules, JSON (decided at call time in the sandbox)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a registry.

    Attributes:
        id: the `ToolId`.
        effect: the effect class (`Effect.UNSAFE` when undeclared or unknown: fail closed).
        declared_effect: the effect as written (None when none was declared), for diagnostics.
        description: free text; not part of the schema hash.
        schema: JSON Schema of the arguments.
        schema_hash: `runner.sdk.schema_hash` of ``schema``.
        module: module to import the function from; None for a tool without code.
        qualname: attribute of ``module`` holding the guarded function; None without code.
        file: the file defining the tool (a module's source file or a manifest).
        line: the definition's line in ``file``, when known.
        origin: the workflow ``tools`` entry that brought the tool in.
        disposition: ``execute`` or ``recorded`` in a filtered view; None when unfiltered.
        rule: the policy rule that let the tool in (filtered views only).
        unread: what a static reading of the source (``check``) could not read literally,
            with its ``file:line``; the effect is then ``unsafe`` (fail closed). None when
            the tool was fully read, imported, or described by a sandbox. A tool whose
            parameters were not read has an empty ``schema`` and ``schema_hash``.
        decided_by: what gave a tool without a declared class its class, in words (an MCP
            tool's annotations, `runner.tools.mcp`; the policy's ``map:``); None otherwise.
        framework: the agent SDK that defines the tool (``openai-agents``, ``anthropic``,
            ``langchain``: `runner.sdk.sdktools.FRAMEWORKS`), None for a ``@tool`` function.
        sdk_name: the name that SDK offers the tool to its model under (None: the tool's
            `runner.sdk.function_name`).
    """

    id: str
    effect: Effect
    declared_effect: str | None
    description: str
    schema: dict[str, Any]
    schema_hash: str
    module: str | None
    qualname: str | None
    file: str
    line: int | None
    origin: str
    disposition: Disposition | None = None
    rule: str | None = None
    unread: str | None = None
    decided_by: str | None = None
    framework: str | None = None
    sdk_name: str | None = None

    @property
    def offered_name(self) -> str:
        """The name a model is offered the tool under."""
        return self.sdk_name or function_name(self.id)

    @property
    def has_code(self) -> bool:
        """True when the tool has a function that can be imported and run."""
        return self.module is not None and self.qualname is not None

    @property
    def location(self) -> str:
        """``file:line`` of the definition (relative to the current directory when inside)."""
        try:
            shown = str(Path(self.file).resolve().relative_to(Path.cwd().resolve()))
        except (ValueError, OSError):
            shown = self.file
        return f"{shown}:{self.line}" if self.line is not None else shown

    def effect_text(self) -> str:
        """The effect class for diagnostics, saying why when it defaulted to ``unsafe``."""
        if self.unread is not None:
            return f"{self.effect.value} (read without importing it: {self.unread})"
        if self.decided_by is not None:
            return f"{self.effect.value} ({self.decided_by})"
        if self.declared_effect is None and self.framework is not None:
            return (
                f"{self.effect.value} (an undeclared {self.framework} tool: no @tool "
                "declaration on its function, no entry in the policy's map:)"
            )
        if self.declared_effect is None:
            return f"{self.effect.value} (no effect class declared)"
        if self.declared_effect != self.effect.value:
            return f"{self.effect.value} (declared {self.declared_effect!r}, not an effect class)"
        return self.effect.value

    def manifest_entry(self) -> dict[str, Any]:
        """The tool's record in the mounted manifest.

        Returns:
            ``{id, effect, description, schema, schema_hash, module, qualname}`` plus
            ``disposition`` in a filtered view.
        """
        entry: dict[str, Any] = {
            "id": self.id,
            "effect": self.effect.value,
            "description": self.description,
            "schema": self.schema,
            "schema_hash": self.schema_hash,
            "module": self.module,
            "qualname": self.qualname,
        }
        if self.disposition is not None:
            entry["disposition"] = self.disposition
        if self.framework is not None and self.sdk_name:  # the name its model is offered
            entry["name"] = self.sdk_name  # (runner.providers.offered.sdk_aliases)
        return entry


@dataclass(frozen=True)
class Denial:
    """A tool a policy removed from a view, and why."""

    tool: ToolSpec
    decision: Decision

    def message(self) -> str:
        """``tool "x" is unsafe: denied by policies/shadow.yaml (deny effect unsafe)``."""
        return (
            f'tool "{self.tool.id}" is {self.tool.effect_text()}: '
            f"denied by {self.decision.source} ({self.decision.rule})"
        )


class Registry:
    """A set of tools by id; unfiltered, or a policy's capability-filtered view.

    Args:
        tools: the tools; ids must be unique.
        roots: host folders the tool modules were imported from (mounted into sandboxes).
        policy: the policy of a filtered view; None for an unfiltered registry.
        denied: tools the view's policies removed, by id.
        unread: what a static reading could not follow that may define more tools (a
            decorator that is not ``runner.sdk.tool``, an id that is not literal), each with
            its place; named when an id does not resolve.

    Raises:
        InputError: two tools with one id (both definitions named).
    """

    def __init__(
        self,
        tools: Iterable[ToolSpec],
        roots: Iterable[Path] = (),
        *,
        policy: CapabilityPolicy | None = None,
        denied: Mapping[str, Denial] | None = None,
        unread: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for tool in tools:
            first = self._tools.get(tool.id)
            if first is not None:
                raise InputError(
                    f"tool id {tool.id!r} is defined twice: {first.location} and {tool.location}",
                    file=tool.file,
                    line=tool.line,
                    tool_id=tool.id,
                )
            self._tools[tool.id] = tool
        self._roots = list(dict.fromkeys(roots))
        self.policy = policy
        self._denied: dict[str, Denial] = dict(denied or {})
        self.unread: tuple[str, ...] = tuple(dict.fromkeys(unread))

    def restrict(self, policy: CapabilityPolicy) -> Registry:
        """The view of ``policy``: denied tools absent, the others with their disposition.

        Restricting a view again can only remove more tools.
        """
        present: list[ToolSpec] = []
        denied = dict(self._denied)
        for tool in self._tools.values():
            tool = policy.mapped(tool)
            decision = policy.decide(tool)
            if decision.allowed and decision.disposition is not None:
                present.append(replace(tool, disposition=decision.disposition, rule=decision.rule))
            else:
                denied[tool.id] = Denial(tool, decision)
        return Registry(present, self._roots, policy=policy, denied=denied, unread=self.unread)

    def resolve(self, tool_id: str) -> ToolSpec:
        """The tool ``tool_id``.

        Raises:
            ToolNotResolvable: the id is unknown (fail closed), or the view's policy removed
                it; the message names the tool, its effect class and the rule.
        """
        tool = self._tools.get(tool_id)
        if tool is not None:
            return tool
        denial = self._denied.get(tool_id)
        if denial is not None:
            raise ToolNotResolvable(
                denial.message(),
                tool_id=tool_id,
                effect=denial.tool.effect.value,
                rule=denial.decision.rule,
                policy=denial.decision.source,
            )
        close = difflib.get_close_matches(tool_id, [*self._tools, *self._denied], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        if self.unread:
            shown = "; ".join(self.unread[:3]) + ("; ..." if len(self.unread) > 3 else "")
            hint += f"; read without importing, the modules hold what was not followed: {shown}"
        raise ToolNotResolvable(
            f'tool "{tool_id}" does not resolve: no module or manifest of the workflow '
            f"defines it (unknown tools are denied){hint}",
            tool_id=tool_id,
            rule="unresolvable",
        )

    def denial(self, tool_id: str) -> Denial | None:
        """Why ``tool_id`` is absent from this view, or None when it is not denied."""
        return self._denied.get(tool_id)

    def manifest(self, policy: CapabilityPolicy) -> dict[str, Any]:
        """The capability-filtered manifest mounted into the sandbox.

        Returns:
            ``{"policy": {"name", "mode", "hash", "rules"?}, "tools": [manifest entries]}``;
            denied tools are absent, every entry has its ``disposition``; ``rules`` are the
            policy's argument rules, which the runtime's guard decides each call with.
        """
        view = self.restrict(policy)
        summary: dict[str, Any] = {"name": policy.name, "mode": policy.mode, "hash": policy.hash}
        rules = policy.argument_rules()
        if rules:  # a policy without argument rules mounts the manifest it always did
            summary["rules"] = rules
        return {
            "policy": summary,
            "tools": [tool.manifest_entry() for tool in view],
        }

    def tool_roots(self) -> list[Path]:
        """Host folders to mount read-only so that the tool modules import in the sandbox."""
        return list(self._roots)

    def modules(self) -> list[str]:
        """Modules the sandbox imports: those with a tool this view executes.

        An unfiltered registry names every module with a tool.
        """
        wanted = (
            t.module
            for t in self._tools.values()
            if t.module is not None and (self.policy is None or t.disposition == "execute")
        )
        return list(dict.fromkeys(wanted))

    def schema_hashes(self) -> dict[str, str]:
        """Tool id -> schema hash (the trace's environment manifest)."""
        return {tool.id: tool.schema_hash for tool in self._tools.values()}

    def ids(self) -> list[str]:
        """The ids present, in definition order."""
        return list(self._tools)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._tools

    def __repr__(self) -> str:
        scope = f"policy={self.policy.name!r}" if self.policy is not None else "unfiltered"
        return f"Registry({len(self._tools)} tools, {scope})"
