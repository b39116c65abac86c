"""One (variant, task) run of a submission: the episode, its metered provider, its charge.

`PairRunner.run_pair` is the `Scheduler`'s unit of work. Everything that is the same for every
run (base providers, per-variant model settings, resource limits, the task index) is built once
per submission, not per run, so the per-run cost on the host is the episode itself.

A run whose model call was refused by the replay ceiling, or whose sandbox reached its budget
deadline (`runner.submit.budgetclock`), ends ``ceiling_reached``: the episode driver classifies
it so (`runner.episode.status`), and the trace's ``end`` line, the ledger and the report say
the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner.domain.ids import timestamped_ids
from runner.episode.limits import max_rate_limit_wait_s, resource_limits
from runner.episode.metered_run import metered_episode
from runner.episode.request import EpisodeRequest
from runner.ledger import Amount, CeilingGuard
from runner.providers.base import ModelProvider
from runner.providers.metered import StopSignal
from runner.providers.ratelimit import RateLimitedProvider, RateLimiter, WaitAccount
from runner.providers.workflows import provider_for_workflow
from runner.settings import Settings
from runner.submit.budgetclock import BudgetClock
from runner.submit.plan import Plan
from runner.tools.snapshot.toolsnapshot import ToolSnapshot

if TYPE_CHECKING:
    from runner.backends.base import Backend

__all__ = ["PairRunner"]


class PairRunner:
    """Runs single pairs of a plan.

    Args:
        plan: the plan.
        settings: host settings.
        backend: the (tracking) backend.
        guard: the job's ceiling guard.
        image: the sandbox image.
        search_root: the folder the submission was made from (scripted model modules
            resolve from the workflow's folder, then from here).
        max_tokens: the completion-token cap of forwarded model calls (None: uncapped).
        snapshot: the submission's tool snapshot, mounted by every run
            (`runner.tools.snapshot`).
        clock: the job's budget clock: each run's budget deadline (None: no deadline).

    Raises:
        InputError: a variant's model provider cannot be built (e.g. a scripted function that
            does not import).
    """

    def __init__(
        self,
        plan: Plan,
        settings: Settings,
        backend: Backend,
        guard: CeilingGuard,
        *,
        image: str,
        search_root: Path,
        max_tokens: int | None,
        snapshot: ToolSnapshot | None = None,
        clock: BudgetClock | None = None,
    ) -> None:
        self.plan = plan
        self.settings = settings
        self.backend = backend
        self.guard = guard
        self.image = image
        self.max_tokens = max_tokens
        self.snapshot = snapshot
        self.clock = clock
        self.stop = StopSignal()
        self.limits = resource_limits(plan.policy, settings)
        self._tasks = {t.task_id: t for t in plan.tasks}
        self._variants = {v.name: v for v in plan.variants}
        self._providers: dict[str, ModelProvider | None] = {}
        for variant in plan.variants:
            self._providers[variant.name] = provider_for_workflow(
                variant.workflow, cwd=search_root, settings=settings
            )
        self._ids = timestamped_ids()
        # one limiter for every run of the submission: the policy's rate limits hold across
        # all sandboxes, and a provider's 429 pauses that model for all of them
        self.limiter = RateLimiter(plan.policy.rate_limits)
        self.max_wait_s = max_rate_limit_wait_s(plan.policy)
        self.waits: dict[str, float] = {}  # run key -> seconds it waited on rate limits

    def close(self) -> None:
        """Close providers that hold connections."""
        for provider in self._providers.values():
            close = getattr(provider, "close", None)
            if callable(close):
                close()

    def run_pair(self, variant_name: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        """Run one episode; return ``(ledger status, trace path, usage)``.

        Raises:
            InputError: an invalid run id (a bug of the id factory).
        """
        variant = self._variants[variant_name]
        anchor = self.plan.anchor
        request = EpisodeRequest(
            workflow=variant.workflow,
            task=self._tasks[task_id],
            policy=self.plan.policy,
            registry=variant.registry,
            image=variant.image or self.image,  # a variant naming its own image runs there
            mode=self.plan.policy.mode,
            snapshot=self.snapshot,
            # an anchored fork: the anchor's first K calls replayed strictly, then fresh
            recorded_calls=anchor.prefix if anchor is not None else (),
            fork_at=anchor.fork_at if anchor is not None else None,
        )
        base = self._providers[variant_name]
        waits = WaitAccount(self.max_wait_s)
        limited = (
            RateLimitedProvider(base, self.limiter, waits, model=variant.model)
            if base is not None
            else None
        )
        episode = metered_episode(
            request,
            run_key=key,
            guard=self.guard,
            backend=self.backend,
            settings=self.settings,
            provider=limited,
            id_factory=self._ids,
            variant=variant_name,
            model=variant.model,
            stop=self.stop,
            max_tokens=self.max_tokens,
            waits=waits,
            budget=self.clock.grant(key) if self.clock is not None else None,
        )
        self.waits[key] = waits.waited_s
        result = episode.result  # a refused model call: ``ceiling_reached`` (episode.state)
        return result.status, str(result.trace_path), episode.usage()
