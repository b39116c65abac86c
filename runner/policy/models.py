r"""The policy file's model: which tools a run may resolve, how, within which limits and budgets.

A policy (YAML) is validated into `PolicySpec`: frozen, unknown keys forbidden. Shape::

    name: shadow
    mode: shadow                 # shadow | reproduce: how the tools that remain are served
    deny_effects: [unsafe]       # effect classes absent from the filtered registry
    tools:                       # per-tool overrides, ids or globs (fnmatch, case-sensitive)
      deny: ["email.*"]          # absent whatever their class
      allow: []                  # when non-empty, only these remain (it can only narrow)
      unsafe_allow: []           # present despite a denied effect class: the visible opt-in
    limits: {timeout_s: 300, memory_mb: 512, pids_limit: 128, cpus: 1.0, tmpfs_mb: 64,
             max_calls: 10000, max_trace_mb: 128}
    ceilings:                    # per purpose; an absent value means no limit
      replay: {runs: 200, tokens: 2000000, usd: 5.0, sandbox_s: 3600}
      judge: {runs: 400, tokens: 1000000, usd: 2.0}
    prices:                      # model id or glob -> USD per million tokens
      gpt-4.1: {input_usd_per_mtok: 2.0, output_usd_per_mtok: 8.0}
    rate_limits:                 # optional; enforced on the host across every sandbox
      max_wait_s: 120            # per episode, in total; not counted against timeout_s
      models: {"gpt-4.1*": {requests_per_min: 500, tokens_per_min: 30000}}
    redaction:                   # secrets never written (`runner.policy.redaction`)
      patterns: [{name: ssn, regex: '\b\d{3}-\d{2}-\d{4}\b'}]
    rules:                       # argument rules, decided at call time (runner.policy.rules)
      - {name: no-rm, tool: shell.run, action: deny, when: {command: {matches: 'rm\s+-rf'}}}

Invariants: a ``shadow`` policy always denies ``unsafe`` (single tools may be let in only by
``unsafe_allow``); every number carries its unit in its name; limits and ceilings are
validated strictly at load time (`LIMIT_BOUNDS`): an integer field takes only integers (``true``
is not 1, ``5.0`` is not 5), a number only finite numbers (``.inf`` and ``.nan`` are refused),
each within what the engine and the ledger accept, so a bad value is an input error naming the
file, line and field, never an engine refusal (exit 6) or a limit silently turned off later.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    field_validator,
    model_validator,
)

from runner.limitbounds import (
    LIMIT_BOUNDS,
    MAX_COUNT,
    Bounds,
    Cpus,
    MaxCalls,
    MaxTraceMb,
    MemoryMb,
    PidsLimit,
    TimeoutS,
    TmpfsMb,
)
from runner.policy.redaction import RedactionSpec
from runner.policy.rules import ArgRule
from runner.sdk import Effect

__all__ = [
    "LIMIT_BOUNDS",
    "MAX_COUNT",
    "Bounds",
    "Ceiling",
    "CeilingAmount",
    "CeilingCount",
    "Ceilings",
    "Cpus",
    "Limits",
    "MaxCalls",
    "MaxTraceMb",
    "MemoryMb",
    "PidsLimit",
    "PolicySpec",
    "Price",
    "RateLimit",
    "RateLimits",
    "TimeoutS",
    "TmpfsMb",
    "ToolOverrides",
]


# Ceiling dimensions and prices (also of job files): strict, counts fit the ledger, amounts
# are finite (an infinite or NaN ceiling would bound nothing: use no value for no limit).
CeilingCount = Annotated[int, Strict(), Field(ge=0, le=MAX_COUNT)]
CeilingAmount = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]

_GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+\Z")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolOverrides(_Frozen):
    """Per-tool overrides by id or glob.

    Attributes:
        deny: tools absent whatever their effect class (wins over everything else).
        allow: when non-empty, an allow list: tools matching none of ``allow`` and
            ``unsafe_allow`` are absent. It only narrows: a tool of a denied effect class stays
            denied even when it matches.
        unsafe_allow: tools present despite a denied effect class (in shadow they are served
            from recordings, never executed). The one way to widen, spelled visibly.
    """

    deny: list[str] = Field(default_factory=list)
    allow: list[str] = Field(default_factory=list)
    unsafe_allow: list[str] = Field(default_factory=list)

    @field_validator("deny", "allow", "unsafe_allow")
    @classmethod
    def _globs(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not _GLOB.match(pattern):
                raise ValueError(f"{pattern!r} is not a tool id or glob (e.g. 'email.*')")
        return patterns


def first_match(tool_id: str, patterns: list[str]) -> str | None:
    """The first pattern of ``patterns`` that ``tool_id`` matches (case-sensitive), or None."""
    for pattern in patterns:
        if fnmatch.fnmatchcase(tool_id, pattern):
            return pattern
    return None


class Limits(_Frozen):
    """Per-run resource limits (settings override them for a run).

    Every value is checked against `LIMIT_BOUNDS` when the policy is loaded (strict types,
    finite numbers; the bounds' sources are in that table).

    Attributes:
        timeout_s: wall-clock seconds before the host kills the sandbox.
        memory_mb: memory limit in MiB (no extra swap).
        pids_limit: processes and threads at most.
        cpus: CPU share (1.0 = one core).
        tmpfs_mb: size of the writable ``/tmp`` in MiB.
        max_calls: call lines (tool, model and user calls) one episode may record; the next
            one ends the run ``limit_exceeded`` and the host kills the sandbox.
        max_trace_mb: MiB of trace one episode may write (the ``end`` line aside); a call line
            that would pass it ends the run ``limit_exceeded``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    timeout_s: TimeoutS = 300.0
    memory_mb: MemoryMb = 512
    pids_limit: PidsLimit = 128
    cpus: Cpus = 1.0
    tmpfs_mb: TmpfsMb = 64
    max_calls: MaxCalls = 10_000
    max_trace_mb: MaxTraceMb = 128


class Ceiling(_Frozen):
    """Spend limits of one purpose; None means no limit of that kind.

    Attributes:
        runs: runs (for ``judge``: judge calls).
        tokens: model tokens, input plus output.
        usd: US dollars.
        sandbox_s: sandbox wall-clock seconds.
    """

    runs: CeilingCount | None = None
    tokens: CeilingCount | None = None
    usd: CeilingAmount | None = None
    sandbox_s: CeilingAmount | None = None


class Ceilings(_Frozen):
    """Ceilings per purpose (SPEC.md: replay runs never count against judge, and back)."""

    live: Ceiling = Field(default_factory=Ceiling)
    replay: Ceiling = Field(default_factory=Ceiling)
    judge: Ceiling = Field(default_factory=Ceiling)

    def for_purpose(self, purpose: str) -> Ceiling:
        """The ceiling of ``purpose`` (``live``, ``replay`` or ``judge``).

        Raises:
            KeyError: an unknown purpose.
        """
        if purpose not in ("live", "replay", "judge"):
            raise KeyError(purpose)
        ceiling: Ceiling = getattr(self, purpose)
        return ceiling


class Price(_Frozen):
    """A model's price in USD per million tokens.

    Attributes:
        input_usd_per_mtok: per million input (prompt) tokens.
        output_usd_per_mtok: per million output (completion) tokens.
    """

    input_usd_per_mtok: CeilingAmount
    output_usd_per_mtok: CeilingAmount

    def cost_usd(self, tokens_in: int, tokens_out: int) -> float:
        """USD for ``tokens_in`` input and ``tokens_out`` output tokens."""
        return (tokens_in * self.input_usd_per_mtok + tokens_out * self.output_usd_per_mtok) / 1e6


# Rate-limit counts are strict positive integers that fit the ledger.
RateCount = Annotated[int, Strict(), Field(ge=1, le=MAX_COUNT)]
DEFAULT_RATE_LIMIT_WAIT_S = 60.0


class RateLimit(_Frozen):
    """One model's provider rate limit; None means no limit of that kind.

    Attributes:
        requests_per_min: requests per minute (each try of a retried call counts).
        tokens_per_min: tokens per minute, prompt plus completion, reserved at the same upper
            bound as the ledger's (`runner.ledger.tokens.prompt_tokens_bound` plus the
            completion cap) and given back down to the billed tokens after the answer.
    """

    requests_per_min: RateCount | None = None
    tokens_per_min: RateCount | None = None


class RateLimits(_Frozen):
    """Provider rate limits per model (ids or globs, matched like ``prices``).

    Attributes:
        max_wait_s: the longest one episode may be held, in total, waiting on rate limits
            (the policy's and the provider's HTTP 429 ``Retry-After``); that time does not count
            against ``limits.timeout_s``, and a call that would wait longer is refused
            (error class ``RateLimited``). The sandbox's hard lifetime cap includes it.
        models: model id or glob -> its limits; a model matching none is not limited here
            (the provider's 429 answers are still honoured).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_wait_s: TimeoutS = DEFAULT_RATE_LIMIT_WAIT_S
    models: dict[str, RateLimit] = Field(default_factory=dict)

    @field_validator("models")
    @classmethod
    def _globs(cls, models: dict[str, RateLimit]) -> dict[str, RateLimit]:
        for pattern in models:
            if not _GLOB.match(pattern):
                raise ValueError(f"{pattern!r} is not a model id or glob (e.g. 'gpt-4.1*')")
        return models

    def for_model(self, model: str) -> RateLimit | None:
        """The limits of ``model``: an exact key, else the longest matching glob key."""
        if model in self.models:
            return self.models[model]
        matches = [key for key in self.models if fnmatch.fnmatchcase(model, key)]
        return self.models[max(matches, key=len)] if matches else None


class PolicySpec(_Frozen):
    """The validated content of a policy file (see the module docstring for the shape)."""

    name: str
    mode: Literal["shadow", "reproduce"]
    description: str = ""
    deny_effects: list[Effect] = Field(default_factory=lambda: [Effect.UNSAFE])
    tools: ToolOverrides = Field(default_factory=ToolOverrides)
    limits: Limits = Field(default_factory=Limits)
    ceilings: Ceilings = Field(default_factory=Ceilings)
    prices: dict[str, Price] = Field(default_factory=dict)
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    redaction: RedactionSpec | None = None
    rules: list[ArgRule] = Field(default_factory=list, max_length=1000)
    map: dict[str, Effect] = Field(default_factory=dict, max_length=1000)
    """Tool id or glob -> the effect class of a tool that declares none (an agent SDK's
    ``@function_tool``, ``@beta_tool`` or LangChain tool: `runner.sdk.sdktools`). A tool's
    own declaration wins; the first matching key in file order decides; a tool nobody
    declared or mapped stays ``unsafe`` (fail closed)."""

    @field_validator("rules")
    @classmethod
    def _unique_rules(cls, rules: list[ArgRule]) -> list[ArgRule]:
        names = [rule.name for rule in rules]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two rules named {twice[0]!r}: rule names are unique")
        return rules

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"policy name {value!r} must be 1-64 ASCII letters, digits, _ or -")
        return value

    @model_validator(mode="after")
    def _safe_default(self) -> PolicySpec:
        if self.mode == "shadow" and Effect.UNSAFE not in self.deny_effects:
            raise ValueError(
                "a shadow policy must deny the unsafe effect class (deny_effects: [unsafe]); "
                "let single tools in with tools.unsafe_allow"
            )
        return self

    def mapped_effect(self, tool_id: str) -> tuple[str, Effect] | None:
        """``(key, effect)`` of the first ``map`` key ``tool_id`` matches, or None."""
        key = first_match(tool_id, list(self.map))
        return (key, self.map[key]) if key is not None else None

    def price_for(self, model: str) -> Price | None:
        """The price of ``model``: an exact key, else the longest matching glob key."""
        if model in self.prices:
            return self.prices[model]
        matches = [key for key in self.prices if fnmatch.fnmatchcase(model, key)]
        return self.prices[max(matches, key=len)] if matches else None
