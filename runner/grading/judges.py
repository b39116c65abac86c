"""Judges: ``rubric``, ``module:function`` and ``model:NAME``, built from a ``--judge`` value.

`parse_judge` is the one parser of the value (a `JudgeSpec`); `JUDGES` the registry of kinds;
`make_judge` builds one.

A judge is a callable ``Group -> Ranking`` (listwise: the whole group at once).

- ``module:function``: a user function on the host; it receives the group as a JSON-ready dict
  (`Group.to_dict`) and returns ``{"ranks": ...}`` (lower is better, ties allowed) or
  ``{"scores": ...}`` (higher is better), each either a list aligned with ``results`` or an
  object keyed by variant name. The whole contract (shapes, errors, where and when it runs)
  is docs/judges.md, with examples/judges/contains_judge.py, which a test runs.
- ``model:NAME``: asks a model to rank the group through a provider callable
  ``request -> response`` (the OpenAI Chat Completions shape), charged to purpose ``judge``
  (`runner.grading.modeljudge`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runner.domain.userfunction import load_function
from runner.domain.words import counted
from runner.errors import GradingError, InputError
from runner.grading.model import Group, Ranking, check_covers, normalise_ranks, ranks_from_scores
from runner.grading.modeljudge import ModelJudge, Provider
from runner.grading.rubric import NAME as RUBRIC
from runner.grading.rubric import rubric_judge
from runner.hostlog import get_logger
from runner.ledger import CeilingGuard

log = get_logger(__name__)

Judge = Callable[[Group], Ranking]


def _per_variant(group: Group, value: Any, key: str, judge: str) -> dict[str, float]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != len(group.results):
            raise GradingError(
                f"judge {judge} on task {group.task_id!r}: {key} has"
                f" {counted(len(value), 'entry', 'entries')} for"
                f" {counted(len(group.results), 'result')}",
                task_id=group.task_id,
                judge=judge,
            )
        value = dict(zip(group.variants, value, strict=True))
    if not isinstance(value, Mapping):
        raise GradingError(
            f"judge {judge} on task {group.task_id!r}: {key} must be a list or"
            " an object keyed by variant",
            task_id=group.task_id,
            judge=judge,
        )
    check_covers(group, [str(k) for k in value], judge)
    out: dict[str, float] = {}
    for variant, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise GradingError(
                f"judge {judge} on task {group.task_id!r}: {key} of {variant!r}"
                f" is not a number: {number!r}",
                task_id=group.task_id,
                judge=judge,
            )
        out[str(variant)] = float(number)
    return out


class FunctionJudge:
    """A ``module:function`` judge (see the module docstring for the contract)."""

    def __init__(self, spec: str, search_paths: Sequence[Path] = ()) -> None:
        self.name = spec
        self._func = load_function(spec, search_paths, field="judge")

    def __call__(self, group: Group) -> Ranking:
        """Rank ``group`` with the user's function.

        Raises:
            GradingError: the function raised, or returned something other than one of
                ``{"ranks": ...}`` / ``{"scores": ...}`` covering every variant.
        """
        try:
            answer = self._func(group.to_dict())
        except Exception as exc:
            raise GradingError(
                f"judge {self.name} raised on task {group.task_id!r}: {exc!r}",
                task_id=group.task_id,
                judge=self.name,
            ) from exc
        if (
            not isinstance(answer, Mapping)
            or len(answer) != 1
            or not (set(answer) <= {"ranks", "scores"})
        ):
            raise GradingError(
                f"judge {self.name} on task {group.task_id!r} must return"
                f' {{"ranks": ...}} or {{"scores": ...}}, got {answer!r:.200}',
                task_id=group.task_id,
                judge=self.name,
            )
        if "scores" in answer:
            scores = _per_variant(group, answer["scores"], "scores", self.name)
            return Ranking(group.task_id, ranks_from_scores(scores), scores, judge=self.name)
        ranks = _per_variant(group, answer["ranks"], "ranks", self.name)
        if any(r < 1 or r != int(r) for r in ranks.values()):
            raise GradingError(
                f"judge {self.name} on task {group.task_id!r}: ranks must be"
                f" integers >= 1, got {ranks}",
                task_id=group.task_id,
                judge=self.name,
            )
        return Ranking(
            group.task_id, normalise_ranks({v: int(r) for v, r in ranks.items()}), judge=self.name
        )


JudgeKind = Literal["rubric", "model", "function"]


@dataclass(frozen=True)
class JudgeSpec:
    """A ``--judge`` value, parsed once (`parse_judge`).

    Attributes:
        kind: ``rubric``, ``model`` (``model:NAME``) or ``function`` (``module:function``).
        target: the model's name (``model``) or the ``module:function`` reference; empty for
            ``rubric``.
    """

    kind: JudgeKind
    target: str = ""

    def __str__(self) -> str:
        """The value as given: ``rubric``, ``model:NAME`` or ``module:function``."""
        return {"rubric": RUBRIC, "model": f"model:{self.target}"}.get(self.kind, self.target)

    @property
    def asks_a_model(self) -> bool:
        """The judge makes model calls (charged to purpose ``judge``, priced at plan time)."""
        return self.kind == "model"


def parse_judge(text: str) -> JudgeSpec:
    """The one parser of a ``--judge`` value (job files and flags alike).

    Raises:
        InputError: neither ``rubric``, ``model:NAME`` (a name given) nor ``module:function``
            (field ``judge``).
    """
    if text == RUBRIC:
        return JudgeSpec("rubric")
    if text.startswith("model:"):
        name = text.removeprefix("model:")
        if not name:
            raise InputError("model:NAME needs a model name", field="judge")
        return JudgeSpec("model", name)
    module, sep, function = text.partition(":")
    if sep and module and function:
        return JudgeSpec("function", text)
    raise InputError(
        f"unknown judge {text!r}; use rubric, module:function or model:NAME", field="judge"
    )


@dataclass(frozen=True)
class JudgeParts:
    """What building a judge may need; each kind reads its own (`JUDGES`).

    Attributes:
        provider: ``request -> response`` in the OpenAI Chat Completions shape (``model``);
            the caller builds it with the provider factory, `runner.providers.factory`.
        guard: the job's ceiling guard (``model``: every call reserved and settled).
        prices: the policy's price table (``model``).
        search_paths: import folders (``function``).
    """

    provider: Provider | None = None
    guard: CeilingGuard | None = None
    prices: Mapping[str, Any] | None = None
    search_paths: Sequence[Path] = ()


def _model_judge(spec: JudgeSpec, parts: JudgeParts) -> Judge:
    if parts.provider is None or parts.guard is None or parts.prices is None:
        raise InputError(
            "model: judges need a model provider, a ceiling guard and prices", field="judge"
        )
    return ModelJudge(spec.target, parts.provider, parts.guard, parts.prices)


JUDGES: Mapping[JudgeKind, Callable[[JudgeSpec, JudgeParts], Judge]] = {
    "rubric": lambda spec, parts: rubric_judge,
    "model": _model_judge,
    "function": lambda spec, parts: FunctionJudge(spec.target, parts.search_paths),
}
"""The judge registry: each kind of `JudgeSpec` and how it is built."""


def make_judge(
    spec: str | JudgeSpec,
    *,
    provider: Provider | None = None,
    guard: CeilingGuard | None = None,
    prices: Mapping[str, Any] | None = None,
    search_paths: Sequence[Path] = (),
) -> Judge:
    """Build the judge a ``--judge`` value names (`parse_judge`, then `JUDGES`).

    Args:
        spec: ``rubric``, ``module:function`` or ``model:NAME`` (or its `JudgeSpec`).
        provider: the model provider (``model:`` only).
        guard: the job's ceiling guard (``model:`` only).
        prices: the policy's price table (``model:`` only).
        search_paths: import folders for ``module:function``.

    Raises:
        InputError: an unknown spec, an unimportable function, or ``model:`` without a
            provider, guard or price for the model (field ``judge``).
    """
    parsed = parse_judge(spec) if isinstance(spec, str) else spec
    parts = JudgeParts(provider, guard, prices, search_paths)
    return JUDGES[parsed.kind](parsed, parts)
