"""The metered run: a request, its provider, its ledger entries and one episode, composed once.

Every command that runs an episode composes it here: `metered_episode` is the one composition
(the request charged to its ledger run, the provider metered call by call under the run's
guard when its model turns are paid for, one `runner.episode.driver.run_episode`), used by
``submit``'s pairs (whose job, reservations and settlement are the scheduler's) and, through
`one_off_run`, by ``run``, ``record`` and ``reproduce``: one ledger job, one run, one charge
(`metered_run`). How model turns are charged (`ModelSpend`): ``per_call`` (``submit``,
``run``: each call reserved before it is forwarded, `runner.providers.metered`),
``from_meter`` (``record``: the end line's meter, on the run's charge) or ``none``
(``reproduce``: served from the trace, free).

``record`` charges its run under purpose ``live``; ``run`` and ``reproduce`` under ``replay``
(reproduce never charges ``live``: SPEC.md). The run is reserved before it starts
(against the policy's ceiling of that purpose) and settled with the episode's actual spend when
it ends; a run that never started is released, so nothing is charged for it.

A run's sandbox seconds are charged from container start until after its teardown, so its
reservation (`run_sandbox_s`) is the effective timeout (a settings override wins over the
policy) plus the host's grace past the deadline (`RUN_GRACE_S`).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runner.backends.base import Backend
from runner.domain.ids import IdFactory, new_run_id, timestamped_ids
from runner.episode.driver import (
    KILL_DRAIN_S,
    MIN_WRITE_S,
    POLL_S,
    SHUTDOWN_GRACE_S,
    BudgetDeadline,
    run_episode,
)
from runner.episode.limits import max_rate_limit_wait_s, resource_limits
from runner.episode.request import EpisodeRequest, EpisodeResult
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger, Purpose, run_key
from runner.providers.base import ModelProvider
from runner.providers.fork import ForkProvider
from runner.providers.metered import MeteredProvider, StopSignal
from runner.providers.ratelimit import RateLimitedProvider, RateLimiter, WaitAccount
from runner.settings import Settings

if TYPE_CHECKING:
    from runner.policy.loader import Policy

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MeteredEpisode",
    "MeteredRun",
    "ModelSpend",
    "call_cap",
    "metered_episode",
    "metered_run",
    "one_off_run",
    "rate_limited",
    "run_sandbox_s",
]

DEFAULT_MAX_TOKENS = 1024  # completion-token cap of a forwarded call when a ceiling bounds spend

# How a run's model turns are charged (module docstring).
ModelSpend = Literal["per_call", "from_meter", "none"]

# Seconds a run may be charged past its timeout: the deadline is checked once a poll, a write
# past it still gets MIN_WRITE_S, the killed sandbox's output is drained up to KILL_DRAIN_S and
# its exit awaited up to SHUTDOWN_GRACE_S (container removal is not bounded by the host).
RUN_GRACE_S = POLL_S + MIN_WRITE_S + KILL_DRAIN_S + SHUTDOWN_GRACE_S


def run_sandbox_s(policy: Policy, settings: Settings) -> float:
    """Return the sandbox seconds to reserve for one run, in seconds.

    Args:
        policy: the policy (its ``limits.timeout_s``).
        settings: host settings; a set ``timeout_s`` overrides the policy's.

    Returns:
        The effective timeout, plus the policy's longest rate-limit wait (it does not count
        against the timeout: `runner.providers.ratelimit`), plus `RUN_GRACE_S`.
    """
    timeout_s = float(resource_limits(policy, settings).timeout_s)
    return timeout_s + max_rate_limit_wait_s(policy) + RUN_GRACE_S


@dataclass
class MeteredRun:
    """The ledger entries of one run; `finish` settles them from the trace's end line.

    Attributes:
        ledger: the open ledger.
        guard: the job's ceiling guard.
        job_id: the job (``record-…`` or ``reproduce-…``).
        key: the run's idempotency key.
        reservation_key: the run's charge.
    """

    ledger: Ledger
    guard: CeilingGuard
    job_id: str
    key: str
    reservation_key: str

    def finish(
        self,
        status: str,
        end: dict[str, Any],
        trace_path: str,
        *,
        model_spend: bool = True,
        calls_charged: Amount | None = None,
    ) -> None:
        """Settle the charge and close the run with the episode's meter totals.

        Args:
            status: the episode status.
            end: the trace's end line (its ``meter``).
            trace_path: the trace written.
            model_spend: False when model turns were served from a trace (reproduce): they
                cost nothing, only the run and its sandbox seconds are charged.
            calls_charged: what the run's model calls were already charged, each on its own
                reservation (a `MeteredProvider`): the run's charge is then the run and its
                sandbox seconds, and the run row shows these tokens and USD (counted once).
        """
        meter = end.get("meter") or {}
        sandbox_s = float(meter.get("sandbox_s") or 0.0)
        if calls_charged is not None:
            run_charge = Amount(runs=1, sandbox_s=sandbox_s)
            actual = Amount(
                runs=1,
                tokens_in=calls_charged.tokens_in,
                tokens_out=calls_charged.tokens_out,
                usd=calls_charged.usd,
                sandbox_s=sandbox_s,
            )
        else:
            actual = Amount(
                runs=1,
                tokens_in=int(meter.get("tokens_in") or 0) if model_spend else 0,
                tokens_out=int(meter.get("tokens_out") or 0) if model_spend else 0,
                usd=float(meter.get("usd") or 0.0) if model_spend else 0.0,
                sandbox_s=sandbox_s,
            )
            run_charge = actual
        with self.ledger.transaction():
            self.guard.settle(self.reservation_key, run_charge)
            self.ledger.finish_run(self.key, status, actual, trace_path)


@contextmanager
def metered_run(
    settings: Settings,
    purpose: Purpose,
    command: str,
    variant: str,
    task_id: str,
    policy: Policy,
    estimate: Amount | None = None,
    job_id: str | None = None,
) -> Iterator[MeteredRun]:
    """Open the ledger, create a job and reserve one run of ``purpose`` for the block.

    ``estimate`` is the reservation (default: one run and `run_sandbox_s` sandbox seconds).
    ``job_id``: the job's id (`one_off_run`: the run's own id, the one its trace is named by);
    default a new ``<command>-...`` id.

    An exception escaping the block releases the reservation (the run did not happen) and
    marks the run ``interrupted``.

    Raises:
        CeilingReached: the policy's ceiling of ``purpose`` leaves no room for one more run.
    """
    job_id = job_id or timestamped_ids(prefix=command)()
    ceilings = getattr(policy, "ceilings", None)
    limit = getattr(ceilings, purpose, None) if ceilings is not None else None
    ceiling = Ceiling.of(limit) if limit is not None else Ceiling()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        ledger.create_job(job_id, {"command": command, "variant": variant, "task": task_id}, {})
        guard = CeilingGuard(ledger, job_id, {purpose: ceiling})
        key = run_key(job_id, variant, task_id, 1, purpose)
        if estimate is None:
            estimate = Amount(runs=1, sandbox_s=run_sandbox_s(policy, settings))
        reservation = guard.reserve(
            purpose, estimate, key=f"{key}:run", variant=variant, task_id=task_id, run_key=key
        )
        ledger.start_run(job_id, variant, task_id, 1, purpose, key=key)
        run = MeteredRun(ledger, guard, job_id, key, reservation.key)
        try:
            yield run
        except BaseException:
            guard.release(reservation.key)
            ledger.finish_run(key, "interrupted")
            ledger.set_job_status(job_id, "interrupted")
            raise
        ledger.set_job_status(job_id, "complete")


def call_cap(ceiling: Any) -> int | None:
    """The completion-token cap of forwarded model calls under ``ceiling``.

    Args:
        ceiling: the replay ceiling in effect (its ``tokens`` and ``usd``, None: unbounded).

    Returns:
        `DEFAULT_MAX_TOKENS` when the ceiling bounds tokens or USD (a call's reservation needs a
        bound), else None (requests forwarded unchanged).
    """
    return DEFAULT_MAX_TOKENS if ceiling.tokens is not None or ceiling.usd is not None else None


@dataclass(frozen=True)
class MeteredEpisode:
    """One episode run by `metered_episode`.

    Attributes:
        result: the episode's result (its trace written).
        calls_charged: what its model calls were charged one by one (a `MeteredProvider`);
            None when they were not metered call by call (no model, or ``from_meter``/``none``).
    """

    result: EpisodeResult
    calls_charged: Amount | None

    def usage(self) -> Amount:
        """Tokens and USD its calls were charged, and the end line's sandbox seconds."""
        charged = self.calls_charged if self.calls_charged is not None else Amount()
        sandbox_s = (self.result.end.get("meter") or {}).get("sandbox_s")
        return Amount(
            tokens_in=charged.tokens_in,
            tokens_out=charged.tokens_out,
            usd=charged.usd,
            sandbox_s=float(sandbox_s) if isinstance(sandbox_s, int | float) else 0.0,
        )


def metered_episode(
    request: EpisodeRequest,
    *,
    run_key: str,
    guard: CeilingGuard,
    backend: Backend,
    settings: Settings,
    provider: ModelProvider | None,
    id_factory: IdFactory,
    variant: str,
    model: str | None = None,
    stop: StopSignal | None = None,
    max_tokens: int | None = None,
    per_call: bool = True,
    waits: WaitAccount | None = None,
    budget: BudgetDeadline | None = None,
) -> MeteredEpisode:
    """Run ``request`` as the ledger run ``run_key``, its model calls metered under ``guard``.

    An anchored fork (``request.fork_at``) has its prefix's model turns answered from
    ``request.recorded_calls`` outside the meter (`runner.providers.fork.ForkProvider`): they
    cost nothing and are matched exactly as recorded; only the fresh turns are metered.

    Args:
        request: what to run (its ``ledger_key`` becomes ``run_key``: the reaper can settle it).
        run_key: the ledger run the episode is charged to (its reservation is the caller's).
        guard: the job's ceiling guard (each model call reserved and settled under it).
        backend: the sandbox backend.
        settings: host settings.
        provider: answers model turns; None when the workflow has no model.
        id_factory: makes the run id.
        variant: the variant's name (attribution of the call charges).
        model: the model the variant asks (a call's estimate when the request names none).
        stop: the job's stop signal (default: one of this run's own).
        max_tokens: the completion-token cap of forwarded calls (`call_cap`).
        per_call: meter the model calls one by one (False: ``provider`` answers unmetered;
            the caller charges its turns from the end line's meter, or not at all).
        waits: the episode's rate-limit waits (`runner.episode.driver.run_episode`).
        budget: the run's budget deadline (a submission's budget clock), or None.

    Returns:
        The result and what the calls were charged.

    Raises:
        InputError: invalid run id.
    """
    metered = None
    if provider is not None and per_call:
        metered = MeteredProvider(
            provider,
            guard,
            stop or StopSignal(),
            request.policy.prices,
            model=model,
            variant=variant,
            task_id=request.task.task_id,
            run_key=run_key,
            max_tokens=max_tokens,
        )
    answering = metered if per_call else provider
    if request.fork_at is not None:
        # an anchored fork: the prefix's recorded turns are served outside the meter (free, and
        # matched as recorded: the meter's completion-token cap would change the request), the
        # later ones go through it
        answering = ForkProvider(request.recorded_calls, answering)
    try:
        result = run_episode(
            dataclasses.replace(request, ledger_key=run_key),
            backend=backend,
            settings=settings,
            provider=answering,
            id_factory=id_factory,
            waits=waits,
            budget=budget,
        )
    finally:
        if metered is not None:  # a call still waiting for room is no longer wanted
            metered.close()
    return MeteredEpisode(result, metered.charged if metered is not None else None)


def rate_limited(
    provider: ModelProvider | None, purpose: Purpose, policy: Policy, model: str | None
) -> tuple[ModelProvider | None, WaitAccount | None]:
    """A one-off run's provider under the policy's ``rate_limits``, and its wait account.

    A live run (``record``) keeps the policy's rate limits as a submission's runs do (a limiter
    of its own: nothing else runs beside it); a replay is served from its trace and reaches no
    model API, so it is returned as it is, as is a run without a provider or a policy without
    a ``rate_limits`` table (one built in code).

    Returns:
        ``(provider, waits)``: a `RateLimitedProvider` and its `WaitAccount`, or ``(provider,
        None)`` unchanged.
    """
    table = getattr(policy, "rate_limits", None)
    if provider is None or purpose != "live" or table is None:
        return provider, None
    waits = WaitAccount(max_rate_limit_wait_s(policy))
    return RateLimitedProvider(provider, RateLimiter(table), waits, model=model), waits


def one_off_run(
    request: EpisodeRequest,
    *,
    purpose: Purpose,
    command: str,
    backend: Backend,
    settings: Settings,
    provider: ModelProvider | None,
    id_factory: IdFactory,
    spend: ModelSpend,
    model: str | None = None,
    max_tokens: int | None = None,
    keep_trace_at: Path | None = None,
) -> EpisodeResult:
    """One run of a command of its own (``run``, ``record``, ``reproduce``), metered end to end.

    A ledger job of ``command`` with one run of ``purpose`` reserved (`metered_run`), the
    episode (`metered_episode`), then the charge settled as ``spend`` says. The job's id is
    the run's (its trace's name: ``run-...``, ``repro-...``, ``rec-...``).

    Args:
        request: what to run.
        purpose: ``replay`` (``run``, ``reproduce``) or ``live`` (``record``).
        command: the job id's prefix and the job's ``command``.
        backend: the sandbox backend.
        settings: host settings.
        provider: answers model turns; None without a model.
        id_factory: makes the run id.
        spend: how model turns are charged (`ModelSpend`).
        model: the model asked (``per_call`` estimates).
        max_tokens: the completion-token cap of forwarded calls (``per_call``).
        keep_trace_at: a file the trace is copied to; the ledger and the result name the copy
            (``record --output``).

    Returns:
        The episode result.

    Raises:
        CeilingReached: the policy's ceiling of ``purpose`` leaves no room for the run.
        InputError: invalid run id.
    """
    spec = request.workflow.spec
    variant = f"{spec.name}@{spec.version}"
    task_id = request.task.task_id
    provider, waits = rate_limited(provider, purpose, request.policy, model)
    # the job is named by the run's id, the one its trace and the command's output say, so
    # that ``jobs --all`` lists and ``jobs show`` opens what the user saw
    run_id = new_run_id(id_factory)
    with metered_run(
        settings, purpose, command, variant, task_id, request.policy, job_id=run_id
    ) as metered:
        episode = metered_episode(
            request,
            run_key=metered.key,
            guard=metered.guard,
            backend=backend,
            settings=settings,
            provider=provider,
            id_factory=lambda: run_id,
            variant=variant,
            model=model,
            max_tokens=max_tokens,
            per_call=spend == "per_call",
            waits=waits,
        )
        result = episode.result
        if keep_trace_at is not None:
            keep_trace_at.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result.trace_path, keep_trace_at)
            result = EpisodeResult(result.run_id, result.status, keep_trace_at, result.end)
        metered.finish(
            result.status,
            result.end,
            str(result.trace_path),
            model_spend=spend != "none",
            calls_charged=episode.calls_charged,
        )
    return result
