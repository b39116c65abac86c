"""What a submission asks for: `SubmitOptions`, from command-line flags or a job file.

A job file (YAML, ``sandbox-replay submit job.yaml``) says the same as the flags::

    variants:                      # workflow files, relative to the job file's folder
      - workflows/v1.yaml
      - {name: challenger, workflow: workflows/v2.yaml}
    tasks: tasks.jsonl
    policy: shadow                 # name (./policies, then defaults) or path
    judge: rubric                  # rubric | module:function | model:NAME
    repeats: 3                     # fresh episodes per (variant, task), default 1
    seed: 42                       # grading seed (shown orders, bootstrap); default from job id
    baseline: v1@1                 # gate: PASS/FAIL/INCONCLUSIVE of each other variant
    concurrency: 4
    ceilings:                      # override the policy's ceilings
      replay: {runs: 20, usd: 1.5, tokens: 100000, sandbox_s: 600}
      judge: {usd: 0.5, tokens: 20000}

Unknown keys are errors naming file, line and field (pydantic ``extra="forbid"``). Flags given
on the command line win over the job file, which wins over the policy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.domain.yamlsource import load_yaml, validation_error
from runner.errors import InputError
from runner.inputfile import read_input
from runner.policy.models import CeilingAmount, CeilingCount
from runner.trace.strictjson import loads as strict_loads

__all__ = ["CeilingFlags", "SubmitOptions", "grading_seed", "load_job_file"]

DIMENSIONS = ("runs", "tokens", "usd", "sandbox_s")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _VariantEntry(_Frozen):
    name: str | None = None
    workflow: str


class _CeilingEntry(_Frozen):
    # the policy's ceiling types: strict, finite, within what the ledger stores
    runs: CeilingCount | None = None
    tokens: CeilingCount | None = None
    usd: CeilingAmount | None = None
    sandbox_s: CeilingAmount | None = None


class _Ceilings(_Frozen):
    replay: _CeilingEntry = Field(default_factory=_CeilingEntry)
    judge: _CeilingEntry = Field(default_factory=_CeilingEntry)


class JobFileSpec(_Frozen):
    """The validated content of a job file (see the module docstring for the shape)."""

    variants: list[str | _VariantEntry] = Field(min_length=1)
    tasks: str
    policy: str = "shadow"
    judge: str = "rubric"
    repeats: int = Field(default=1, ge=1, le=1000)
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    baseline: str | None = None
    concurrency: int | None = Field(default=None, ge=1)
    ceilings: _Ceilings = Field(default_factory=_Ceilings)


@dataclass(frozen=True)
class CeilingFlags:
    """Ceiling values given by the user for one purpose, and where each came from.

    Attributes:
        values: dimension (``runs``, ``tokens``, ``usd``, ``sandbox_s``) -> value.
        sources: dimension -> where it was set (``--ceiling-usd``, ``job.yaml``).
    """

    values: dict[str, float | int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def merged(self, other: CeilingFlags) -> CeilingFlags:
        """Return these values overridden by ``other``'s."""
        return CeilingFlags({**self.values, **other.values}, {**self.sources, **other.sources})


@dataclass(frozen=True)
class SubmitOptions:
    """Everything a submission needs, however it was given.

    Attributes:
        variants: workflow files, absolute.
        names: a variant name per workflow, or None for the default (``name@version``).
        tasks: the task file, absolute; with ``fork_at``: the anchor trace (``--anchor``),
            whose task the variants fork (`runner.tracetools.anchor`).
        policy: policy name or path.
        judge: ``rubric``, ``module:function`` or ``model:NAME``.
        concurrency: sandboxes at once, or None for the settings' default.
        replay_ceiling: user ceilings for purpose ``replay``.
        judge_ceiling: user ceilings for purpose ``judge``.
        cwd: the folder the submission was made from (tool modules also resolve from it).
        repeats: fresh episodes per (variant, task), >= 1.
        seed: the grading seed, or None to derive it from the job id (`grading_seed`).
        prices: ``--price MODEL=IN/OUT`` values, added to the policy's prices
            (`runner.policy.pricing.with_prices`).
        baseline: the variant the gate compares every other one with (``--baseline``), or
            None for no gate (`runner.grading.gate`).
        fork_at: ``--fork-at K`` of ``--anchor``: every variant forks the trace ``tasks`` at
            call K (its first K recorded calls replayed strictly, then fresh); None: a task
            file.
    """

    variants: tuple[Path, ...]
    names: tuple[str | None, ...]
    tasks: Path
    policy: str = "shadow"
    judge: str = "rubric"
    concurrency: int | None = None
    replay_ceiling: CeilingFlags = field(default_factory=CeilingFlags)
    judge_ceiling: CeilingFlags = field(default_factory=CeilingFlags)
    cwd: Path = field(default_factory=Path.cwd)
    repeats: int = 1
    seed: int | None = None
    prices: tuple[str, ...] = ()
    baseline: str | None = None
    fork_at: int | None = None

    @property
    def anchor(self) -> Path | None:
        """The anchor trace (``--anchor``), or None for a task file."""
        return self.tasks if self.fork_at is not None else None

    def to_json(self) -> dict[str, Any]:
        """A JSON object `from_json` reads back (the job folder's ``job.json``)."""
        return {
            "variants": [str(p) for p in self.variants],
            "names": list(self.names),
            "tasks": str(self.tasks),
            "policy": self.policy,
            "judge": self.judge,
            "concurrency": self.concurrency,
            "replay_ceiling": {
                "values": self.replay_ceiling.values,
                "sources": self.replay_ceiling.sources,
            },
            "judge_ceiling": {
                "values": self.judge_ceiling.values,
                "sources": self.judge_ceiling.sources,
            },
            "cwd": str(self.cwd),
            "repeats": self.repeats,
            "seed": self.seed,
            "prices": list(self.prices),
            "baseline": self.baseline,
            "fork_at": self.fork_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, where: str = "job.json") -> SubmitOptions:
        """Read what `to_json` wrote.

        Raises:
            InputError: the object is not what `to_json` writes (names ``where``).
        """
        try:
            return cls(
                variants=tuple(Path(p) for p in data["variants"]),
                names=tuple(data["names"]),
                tasks=Path(data["tasks"]),
                policy=str(data["policy"]),
                judge=str(data["judge"]),
                concurrency=data.get("concurrency"),
                replay_ceiling=CeilingFlags(**data["replay_ceiling"]),
                judge_ceiling=CeilingFlags(**data["judge_ceiling"]),
                cwd=Path(data["cwd"]),
                repeats=int(data.get("repeats", 1)),  # job.json of an older version: 1
                seed=data.get("seed"),
                prices=tuple(str(p) for p in data.get("prices") or ()),  # older: none
                baseline=_optional_str(data.get("baseline")),  # older: no gate
                fork_at=_optional_int(data.get("fork_at")),  # older: no anchor
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a submission record: {exc!r}", file=where) from None

    def with_overrides(
        self,
        *,
        judge: str | None = None,
        concurrency: int | None = None,
        policy: str | None = None,
        replay_ceiling: CeilingFlags | None = None,
        judge_ceiling: CeilingFlags | None = None,
        repeats: int | None = None,
        seed: int | None = None,
        prices: tuple[str, ...] = (),
        baseline: str | None = None,
    ) -> SubmitOptions:
        """Return a copy with the given (command-line) values winning."""
        return replace(
            self,
            baseline=baseline or self.baseline,
            prices=(*self.prices, *prices),
            repeats=repeats or self.repeats,
            seed=self.seed if seed is None else seed,
            judge=judge or self.judge,
            concurrency=concurrency or self.concurrency,
            policy=policy or self.policy,
            replay_ceiling=self.replay_ceiling.merged(replay_ceiling or CeilingFlags()),
            judge_ceiling=self.judge_ceiling.merged(judge_ceiling or CeilingFlags()),
        )


def _optional_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"baseline: not a string: {value!r:.80}")
    return value


def _optional_int(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"fork_at: not an integer: {value!r:.80}")
    return value


def _ceiling_flags(entry: _CeilingEntry, source: str) -> CeilingFlags:
    values = {k: v for k, v in entry.model_dump().items() if v is not None}
    return CeilingFlags(values, dict.fromkeys(values, source))


def load_job_file(path: Path) -> SubmitOptions:
    """Read a job file into `SubmitOptions` (paths resolved against the file's folder).

    Raises:
        InputError: unreadable YAML, an unknown key or a bad value (file, line, field named).
    """
    doc = load_yaml(path, what="job file")
    try:
        spec = JobFileSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(doc, exc, JobFileSpec, what="job file") from None
    folder = path.resolve().parent
    variants: list[Path] = []
    names: list[str | None] = []
    for entry in spec.variants:
        if isinstance(entry, str):
            variants.append((folder / entry).resolve())
            names.append(None)
        else:
            variants.append((folder / entry.workflow).resolve())
            names.append(entry.name)
    policy = spec.policy
    if "/" in policy or policy.endswith((".yaml", ".yml")):
        policy = str((folder / policy).resolve())
    source = path.name
    options = SubmitOptions(
        variants=tuple(variants),
        names=tuple(names),
        tasks=(folder / spec.tasks).resolve(),
        policy=policy,
        judge=spec.judge,
        concurrency=spec.concurrency,
        replay_ceiling=_ceiling_flags(spec.ceilings.replay, source),
        judge_ceiling=_ceiling_flags(spec.ceilings.judge, source),
        cwd=folder,
        repeats=spec.repeats,
        seed=spec.seed,
        baseline=spec.baseline,
    )
    if spec.baseline is not None and names_a_file(spec.baseline):  # relative to the job file
        return with_baseline_file(options, spec.baseline, cwd=folder)
    return options


def names_a_file(baseline: str) -> bool:
    """``--baseline`` names a workflow file, not a variant name (``v1.yaml``, ``dir/v1``).

    A variant name is ``name@version`` or a job file's ``name:``; a value that is an existing
    file, has a path separator or a YAML suffix is a path.
    """
    return (
        Path(baseline).is_file()
        or "/" in baseline
        or os.sep in baseline
        or baseline.endswith((".yaml", ".yml"))
    )


def with_baseline_file(options: SubmitOptions, baseline: str, *, cwd: Path) -> SubmitOptions:
    """``options`` gated against the workflow file ``baseline`` (``--baseline FILE``).

    The file is one of the variants (the same file, resolved), or else it is added as the first
    variant: a baseline is compared on fresh runs of the same tasks in the same job, so it
    runs there too, and naming it once is enough (``--variant v2.yaml --baseline v1.yaml``).
    `SubmitOptions.baseline` then holds the file's absolute path; `resolve_baseline` turns it
    into the variant's name once the variants are loaded.

    Raises:
        InputError: no such file (field ``--baseline``).
    """
    path = (cwd / baseline).resolve()
    if not path.is_file():
        raise InputError(
            "no such workflow file (--baseline takes a variant name or a workflow file)",
            file=baseline,
            field="--baseline",
        )
    if path in options.variants:
        return replace(options, baseline=str(path))
    return replace(
        options,
        variants=(path, *options.variants),
        names=(None, *options.names),
        baseline=str(path),
    )


def resolve_baseline(baseline: str | None, variants: Sequence[tuple[str, Path]]) -> str | None:
    """The baseline's variant name: ``baseline`` itself, or the variant whose file it is.

    Args:
        baseline: ``--baseline`` as stored (a variant name, or a file's absolute path).
        variants: ``(name, workflow file)`` of the job's variants.
    """
    if baseline is None or baseline in {name for name, _ in variants}:
        return baseline
    for name, path in variants:
        if str(path) == baseline:
            return name
    return baseline  # no such variant: `runner.submit.plan.build_plan` names the choices


def grading_seed(options: SubmitOptions, job_id: str) -> int:
    """The job's grading seed: ``options.seed``, else a number derived from the job id.

    Derived, not random: a resumed job grades with the same seed, and two jobs differ.
    """
    if options.seed is not None:
        return options.seed
    import hashlib

    return int(hashlib.sha256(job_id.encode()).hexdigest()[:8], 16)


def read_json_object(path: Path) -> dict[str, Any]:
    """Read a JSON object written by this package (``job.json``, ``report.json``).

    Raises:
        InputError: the file is missing, unreadable or not a JSON object.
    """
    try:
        data = strict_loads(read_input(path, "job record"))  # a job folder may be anyone's
    except ValueError as exc:
        raise InputError(f"cannot read: {exc}", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("not a JSON object", file=str(path))
    return data
