"""The plan of a submission: N variants × M tasks × K repeats, the judge, the ceilings, the cost.

`build_plan` turns the admitted variants (`runner.submit.variants`), the tasks, the ceilings in
effect (`runner.submit.ceilings`) and the options into a `Plan`, which the CLI
prints before anything starts (``--dry-run`` stops there). The cost estimate reads the policy's
price table and, when earlier jobs settled runs, their mean spend per run
(`runner.ledger.Ledger.per_run_history`); without history it is an upper bound from each
variant's agent steps (``max_turns`` model calls of at most ``max_tokens`` completion tokens).

Invariants: episodes are ordered task-major, then by repeat (every variant of task 1 repeat 0,
of task 1 repeat 1, ..., then task 2), so a ceiling that stops replay leaves whole groups graded
first; every repeat is a fresh episode, run and charged like the first (N·M·K runs); a
``model:`` judge is asked twice per group (two orders, `runner.grading.order`); variant names
are unique; a model the policy cannot price is an error for the ``openai`` provider (shadow
evaluation must never look free), and shown as unpriced otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.backends.capacity import ConcurrencyBound
from runner.domain.tasks import Task
from runner.domain.words import counted
from runner.episode.metered_run import DEFAULT_MAX_TOKENS
from runner.errors import InputError
from runner.grading.judges import parse_judge
from runner.ledger import Amount, RunHistory, price_of
from runner.submit.ceilings import CeilingInEffect, describe_limits
from runner.submit.variants import Variant

if TYPE_CHECKING:
    from runner.policy.loader import Policy
    from runner.tracetools.anchor import Anchor

__all__ = ["DEFAULT_MAX_TOKENS", "Plan", "build_plan"]

NOMINAL_PROMPT_TOKENS = 2000  # prompt tokens per model call assumed without history
NOMINAL_SANDBOX_S = 1.0  # sandbox seconds per run assumed without history
JUDGE_MAX_TOKENS = 512  # runner.grading.judges.ModelJudge's default answer cap
ENGINE_CPU_S_PER_RUN = 0.27  # DOCKER-NOTES.md: dockerd/containerd/runc CPU per container


@dataclass(frozen=True)
class Plan:
    """What a submission will do and what it may cost.

    Attributes:
        job_id: the job.
        policy: the loaded policy.
        variants: in the order given.
        tasks: in file order.
        judge: the judge spec.
        concurrency: sandboxes at once.
        ceilings: purpose -> ceiling in effect (``replay``, ``judge``).
        per_run: estimated spend of one run per variant name.
        basis: how ``per_run`` was estimated (each variant's own history, or an upper bound).
        judge_calls: model calls the judge will make (0 for rubric and functions).
        judge_estimate: their estimated spend.
        unpriced: models without a price in the policy.
        limits: the per-run limits in effect, ``{name: {"value", "source"}}``
            (`runner.episode.limits.limits_in_effect`).
        repeats: fresh episodes per (variant, task) (``--repeats``, >= 1).
        seed: the grading seed (shown orders, bootstrap), recorded in the report.
        capacity: how ``concurrency`` was admitted (`runner.backends.capacity`), if weighed.
        backend: where the sandboxes run (``docker``, ``namespace``, ``ray``), when known.
        baseline: the gate's baseline variant (``--baseline``), or None for no gate.
        anchor: ``--anchor TRACE --fork-at K``: every variant forks this recorded run at call
            K (`runner.tracetools.anchor`); None: fresh runs of a task file.
    """

    job_id: str
    policy: Any
    variants: tuple[Variant, ...]
    tasks: tuple[Task, ...]
    judge: str
    concurrency: int
    ceilings: Mapping[str, CeilingInEffect]
    per_run: Mapping[str, Amount]
    basis: str
    judge_calls: int
    judge_estimate: Amount
    unpriced: tuple[str, ...] = ()
    limits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    repeats: int = 1
    seed: int = 0
    capacity: ConcurrencyBound | None = None
    backend: str | None = None
    typical_sandbox_s: float | None = None
    """Earlier runs' mean sandbox seconds per run (of the variants that have history), or None.

    The budget clock's typical run before one of this job ended.
    """
    baseline: str | None = None
    anchor: Anchor | None = None

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Every (variant, task id), task-major."""
        return [(v.name, t.task_id) for t in self.tasks for v in self.variants]

    @property
    def episodes(self) -> list[tuple[str, str, int]]:
        """Every (variant, task id, repeat) to run: task-major, then repeat, then variant."""
        return [
            (v.name, t.task_id, r)
            for t in self.tasks
            for r in range(self.repeats)
            for v in self.variants
        ]

    @property
    def runs(self) -> int:
        """N·M·K: every episode of the plan."""
        return len(self.variants) * len(self.tasks) * self.repeats

    def _anchor_grading(self) -> str:
        """How an anchored submission's runs are graded: the task's expectations, or none."""
        assert self.anchor is not None
        if self.anchor.expected_from is not None:
            return f"anchored fork: {self.anchor.expectations_text()}"
        return (
            f"anchored fork: task {self.anchor.task.task_id} has no expectations to grade"
            " against (the recorded run did not succeed, or called no tool): the rubric ranks the"
            " variants by status only, a succeeded run 1 and any other 0, not by what they"
            " answered"
        )

    @property
    def formula(self) -> str:
        """``2 variants x 5 tasks = 10 runs`` (``x K repeats`` when K > 1)."""
        n, m, k = len(self.variants), len(self.tasks), self.repeats
        repeats = f" x {k} repeats" if k > 1 else ""
        return (
            f"{counted(n, 'variant')} x {counted(m, 'task')}{repeats} = {counted(n * m * k, 'run')}"
        )

    @property
    def replay_estimate(self) -> Amount:
        """Estimated spend of every run of the plan."""
        total = Amount()
        for variant in self.variants:
            for _ in range(len(self.tasks) * self.repeats):
                total = total + self.per_run[variant.name]
        return total

    def variant(self, name: str) -> Variant:
        """The variant called ``name``.

        Raises:
            KeyError: no such variant.
        """
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """The plan as printed with ``--json`` and stored in the job folder."""
        m, runs = len(self.tasks), self.runs
        return {
            "job_id": self.job_id,
            "policy": {
                "name": self.policy.name,
                "source": self.policy.source,
                "hash": self.policy.hash,
                "mode": self.policy.mode,
            },
            "variants": [v.to_json() for v in self.variants],
            "tasks": [t.task_id for t in self.tasks],
            "runs": runs,
            "repeats": self.repeats,
            "seed": self.seed,
            "baseline": self.baseline,
            "anchor": self.anchor.to_json() if self.anchor is not None else None,
            "formula": self.formula,
            "model_calls_at_most": sum(v.max_model_calls for v in self.variants) * m * self.repeats,
            "judge": {
                "spec": self.judge,
                "model_calls": self.judge_calls,
                "estimate": self.judge_estimate.to_dict(),
            },
            "concurrency": self.concurrency,
            "backend": self.backend,
            "concurrency_bound": self.capacity.to_json() if self.capacity else None,
            "ceilings": {p: c.to_json() for p, c in self.ceilings.items()},
            "limits": {name: dict(v) for name, v in self.limits.items()},
            "estimate": {
                "basis": self.basis,
                "per_run": {name: a.to_dict() for name, a in self.per_run.items()},
                "replay": self.replay_estimate.to_dict(),
                "engine_cpu_s": round(runs * ENGINE_CPU_S_PER_RUN, 2),
                "unpriced_models": list(self.unpriced),
            },
            "rung": "shadow evaluation: the most expensive rung",
        }

    def lines(self) -> list[str]:
        """The plan as text, one line each (printed before anything starts)."""
        n, m, runs = len(self.variants), len(self.tasks), self.runs
        est = self.replay_estimate
        calls = sum(v.max_model_calls for v in self.variants) * m * self.repeats
        per = "(variant, task, repeat)" if self.repeats > 1 else "(variant, task)"
        out = [
            f"plan {self.job_id}: {self.formula}"
            f" (policy {self.policy.name},"
            + (f" backend {self.backend}," if self.backend else "")
            + f" concurrency {self.concurrency})",
            "  shadow evaluation is the most expensive rung:"
            f" {counted(runs, 'sandbox', 'sandboxes')}, one per {per}, and"
            f" {'at least' if any(v.calls_unknown for v in self.variants) else 'up to'}"
            f" {counted(calls, 'model call')}; reproduce needs one sandbox per trace and no model"
            " spend, check needs none",
        ]
        if self.anchor is not None:
            k = self.anchor.fork_at
            out.append(
                f"  anchored fork: every run replays the first {counted(k, 'recorded call')}"
                f" of {self.anchor.path.name} (task {self.anchor.task.task_id}, indices"
                f" 0..{k - 1}, verified as reproduce does), then the variant continues fresh"
            )
            out.append("  " + self._anchor_grading())
        if self.repeats == 1:
            out.append(
                "  one episode per (variant, task): the verdict's intervals are over tasks"
                " only; --repeats K runs K fresh episodes per pair"
            )
        for variant in self.variants:
            a = self.per_run[variant.name]
            bound = f"<= {counted(variant.max_model_calls, 'model call')}"
            if variant.calls_unknown:
                bound += " and the program steps' calls (no recorded trace: cost per call below)"
            out.append(
                f"  variant {variant.name}: {variant.path.name},"
                + (f" image {variant.image}," if variant.image else "")
                + f" {_models_words(variant)},"
                f" per run {bound}, ~${a.usd:.4f}, ~{a.tokens} tokens, ~{a.sandbox_s:.1f}"
                " sandbox-s"
            )
            if variant.calls_unknown:
                out.extend(self._per_call_lines(variant))
        out.append(
            f"  replay estimate: ${est.usd:.4f}, {est.tokens} tokens, {est.sandbox_s:.1f}"
            f" sandbox-s, ~{runs * ENGINE_CPU_S_PER_RUN:.1f} s engine CPU ({self.basis})"
        )
        judge_cost = (
            f"{counted(self.judge_calls, 'model call')}, ~${self.judge_estimate.usd:.4f}"
            if self.judge_calls
            else "graded on the host, no model calls"
        )
        out.append(
            f"  judge {self.judge}: {counted(m * self.repeats, 'group')}, each shown in a"
            f" shuffled order (seed {self.seed}); {judge_cost}"
        )
        if self.baseline is not None:
            out.append(
                f"  gate: each other variant against baseline {self.baseline}: PASS, FAIL or"
                " INCONCLUSIVE (exit 7) from the mean scores' 95% intervals; a borderline FAIL"
                f" runs its tasks once more (at most {counted(n * m, 'run')} more, charged as"
                " replay)"
            )
        if n < 2:
            out.append(
                f"  warning: tournament grading needs at least 2 variants; the"
                f" {counted(runs, 'episode')} will run but not be ranked (every task is listed"
                " ungraded)"
            )
        if self.capacity is not None:
            out.append(f"  concurrency: {self.capacity.describe()}")
        out.extend(self._sharing_lines())
        for purpose, ceiling in self.ceilings.items():
            out.append(f"  ceiling {purpose}: {ceiling.describe()}")
        if self.limits:
            out.append(f"  limits per run: {describe_limits(self.limits)}")
        if self.unpriced:
            out.append(f"  unpriced models (cost unknown): {', '.join(self.unpriced)}")
        replay = self.ceilings["replay"].ceiling
        if replay.runs is not None and replay.runs < runs:
            out.append(
                f"  the replay ceiling allows {replay.runs} of {runs} runs: the others will be"
                " listed as not run (exit 4)"
            )
        elif replay.usd is not None and est.usd > replay.usd:
            out.append("  the estimate exceeds the replay USD ceiling: replay may stop (exit 4)")
        return out

    def _per_call_lines(self, variant: Variant) -> list[str]:
        """One line per model of a program step whose calls per run are unknown."""
        out = []
        for model in variant.models:
            price = _price(self.policy.prices, model)
            if price is None:
                continue
            usd = (NOMINAL_PROMPT_TOKENS * price[0] + DEFAULT_MAX_TOKENS * price[1]) / 1e6
            out.append(
                f"    {model}: ~${usd:.4f} per call ({NOMINAL_PROMPT_TOKENS} prompt +"
                f" {DEFAULT_MAX_TOKENS} completion tokens)"
            )
        return out

    def _sharing_lines(self) -> list[str]:
        """How the ceilings and the rate limits are shared by the runs at once, in words."""
        out = []
        replay = self.ceilings["replay"].ceiling
        if replay.sandbox_s is not None:
            out.append(
                f"  sandbox-seconds: the {replay.sandbox_s:g} s ceiling is shared by a budget"
                " clock, not held per run: each running sandbox gets a deadline from what is"
                " left, moved as runs start and end; a run that does not fit waits for one to"
                " end, and a run reaching its deadline ends ceiling_reached"
            )
        if replay.tokens is not None or replay.usd is not None:
            out.append(
                "  tokens and USD: each model call reserves its upper bound before it is"
                " forwarded; a call that does not fit waits for calls in flight to settle"
            )
        limits = getattr(getattr(self.policy, "rate_limits", None), "models", None) or {}
        for pattern, limit in limits.items():
            parts = [
                f"{value} {name.replace('_per_min', '')}/min"
                for name in ("requests_per_min", "tokens_per_min")
                if (value := getattr(limit, name, None)) is not None
            ]
            if parts:
                out.append(
                    f"  rate limit {pattern}: {', '.join(parts)}, shared by every sandbox"
                    " (a call waits its turn; more at once only wait longer)"
                )
        return out


def _models_words(variant: Variant) -> str:
    """``models gpt-4.1-mini (step agent: models:)``: the models, never the provider kind."""
    if not variant.uses:
        return "no model"
    parts = []
    for use in variant.uses:
        if use.source == "none":
            continue
        names = ", ".join(use.models) if use.models else "unknown models"
        parts.append(f"{names} (step {use.step}: {use.source})")
    return "models " + "; ".join(parts) if parts else "no model calls"


def _price(prices: Mapping[str, Any], model: str) -> tuple[float, float] | None:
    try:
        price = price_of(prices, model)
    except InputError:
        return None
    return price.input_usd_per_mtok, price.output_usd_per_mtok


def build_plan(
    job_id: str,
    policy: Policy,
    variants: Sequence[Variant],
    tasks: Sequence[Task],
    *,
    judge: str,
    concurrency: int,
    ceilings: Mapping[str, CeilingInEffect],
    history: Mapping[str, RunHistory] | None,
    limits: Mapping[str, Mapping[str, Any]] | None = None,
    repeats: int = 1,
    seed: int = 0,
    capacity: ConcurrencyBound | None = None,
    baseline: str | None = None,
    anchor: Anchor | None = None,
) -> Plan:
    """Estimate the cost of running every variant on every task, then judging.

    Args:
        job_id: the job.
        policy: the loaded policy (its ``prices``).
        variants: the variants.
        tasks: the tasks.
        judge: the judge spec.
        concurrency: sandboxes at once.
        ceilings: purpose -> ceiling in effect.
        history: mean spend per earlier run, by variant name (`Ledger.per_run_history` of that
            variant: another workflow's runs say nothing of this one's); a variant without
            any is estimated as an upper bound.
        limits: the per-run limits in effect with their sources (shown in plan and report).
        repeats: fresh episodes per (variant, task), >= 1.
        seed: the grading seed.
        capacity: how ``concurrency`` was admitted, if weighed.
        baseline: the gate's baseline variant, or None.
        anchor: the anchored fork every run makes, or None.

    Raises:
        InputError: ``baseline`` names no variant (field ``baseline``); an ``openai``
            variant or a ``model:`` judge asks for a model the policy
            cannot price (field ``prices``).
    """
    names = [v.name for v in variants]
    if baseline is not None and baseline not in names:
        raise InputError(
            f"{baseline!r} is not a variant of this job ({', '.join(names)}): --baseline"
            " names one by its variant name or its workflow file",
            field="baseline",
        )
    prices = policy.prices
    unpriced: list[str] = []
    per_run: dict[str, Amount] = {}
    for variant in variants:
        for model in variant.models:
            if _price(prices, model) is not None:
                continue
            if variant.provider == "openai":
                raise InputError(
                    f"variant {variant.name}: no price for model {model!r} in policy"
                    f" {policy.name}; add it to prices (shadow evaluation must not look free)",
                    file=str(variant.path),
                    field="prices",
                )
            unpriced.append(model)
        earlier = (history or {}).get(variant.name)
        if earlier is not None:
            per_run[variant.name] = earlier.per_run
            continue
        tokens_in = tokens_out = 0
        usd = 0.0
        for use in variant.uses:  # each step's calls at its first model's price
            calls = use.calls_per_run or 0
            price = _price(prices, use.models[0]) if use.models else None
            step_in, step_out = calls * NOMINAL_PROMPT_TOKENS, calls * DEFAULT_MAX_TOKENS
            tokens_in, tokens_out = tokens_in + step_in, tokens_out + step_out
            if price is not None:
                usd += (step_in * price[0] + step_out * price[1]) / 1e6
        per_run[variant.name] = Amount(
            runs=1,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            usd=usd,
            sandbox_s=NOMINAL_SANDBOX_S,
        )
    basis, typical = _basis(variants, history or {})
    # a model judge ranks every group (task, repeat) twice: in two orders (grading.order)
    groups = len(tasks) * repeats
    spec = parse_judge(judge)
    judge_calls = 2 * groups if spec.asks_a_model and len(variants) >= 2 else 0
    judge_estimate = Amount()
    if judge_calls:
        model = spec.target
        price = _price(prices, model)
        if price is None:
            raise InputError(
                f"judge {judge}: no price for model {model!r} in policy {policy.name}",
                field="prices",
            )
        tokens_in = judge_calls * (500 + 1000 * len(variants))
        tokens_out = judge_calls * JUDGE_MAX_TOKENS
        judge_estimate = Amount(
            runs=judge_calls,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            usd=(tokens_in * price[0] + tokens_out * price[1]) / 1e6,
        )
    return Plan(
        job_id=job_id,
        policy=policy,
        variants=tuple(variants),
        tasks=tuple(tasks),
        judge=judge,
        concurrency=concurrency,
        ceilings=dict(ceilings),
        per_run=per_run,
        basis=basis,
        judge_calls=judge_calls,
        judge_estimate=judge_estimate,
        unpriced=tuple(dict.fromkeys(unpriced)),
        limits=dict(limits or {}),
        repeats=repeats,
        seed=seed,
        capacity=capacity,
        typical_sandbox_s=typical,
        baseline=baseline,
        anchor=anchor,
    )


def _basis(
    variants: Sequence[Variant], history: Mapping[str, RunHistory]
) -> tuple[str, float | None]:
    """How the per-run estimates were made, and the mean sandbox-s of the runs behind them."""
    bound = (
        f"upper bound: max_turns calls x ({NOMINAL_PROMPT_TOKENS} prompt +"
        f" {DEFAULT_MAX_TOKENS} completion tokens)"
    )
    known = [(v.name, history[v.name]) for v in variants if v.name in history]
    if not known:
        return f"{bound}; no earlier runs", None
    runs = sum(h.runs for _, h in known)
    typical = sum(h.per_run.sandbox_s * h.runs for _, h in known) / runs
    said = ", ".join(f"{name} {h.runs}" for name, h in known)
    basis = f"mean of each variant's earlier runs: {said}"
    if len(known) < len(variants):
        basis += f"; {bound} for the others"
    return basis, typical
