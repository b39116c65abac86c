"""Provider rate limits, enforced on the host across every sandbox, and the waits they cost.

One `RateLimiter` per submission (or command) is shared by every run's provider: per model a
requests bucket and a tokens bucket (token buckets holding a minute's allowance, refilled
continuously), and a pause set by a provider's HTTP 429 answer (its ``Retry-After``), which
holds every sandbox's calls to that model, not only the one that was told.

Waiting is by reservation: `RateLimiter.acquire` takes the call's request and tokens at once
(a bucket may go below zero) and answers how long the caller must wait before sending, so
waiters are served in arrival order and nobody polls. A call's tokens are reserved at the
ledger's own upper bound (`runner.ledger.tokens.prompt_tokens_bound` of the forwarded request
plus its completion caps); `Grant.settle` gives back what the provider did not bill.

Every wait is charged to the episode's `WaitAccount`: the episode driver moves the run's
deadline by what was waited (rate-limit waits do not count against ``timeout_s``), the trace's
``end`` line and the report show it (``rate_limit_wait_s``), and an episode may wait at most
the policy's ``rate_limits.max_wait_s`` in total: a call that would wait longer is answered
with an error turn of class ``RateLimited`` at once. The sandbox's hard lifetime cap includes
that longest wait (`runner.backends.base.LifetimeCap.rate_limit_wait_s`).

The provider's own 429 answers are retried by the providers (tenacity,
`runner.providers.retries`): the sleep between tries, inside a `RateLimitedProvider` call,
pauses the model in the shared limiter and is charged to the episode's account.

Clocks and sleeps are injected (tests need no real waiting).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.hostlog import get_logger
from runner.ledger.tokens import prompt_tokens_bound
from runner.providers.apis import CAP_FIELDS, ApiCall
from runner.providers.base import ModelProvider, ProviderResponse

log = get_logger(__name__)

__all__ = [
    "RATE_LIMITED_ERROR_CLASS",
    "Grant",
    "RateLimitedProvider",
    "RateLimiter",
    "WaitAccount",
    "WaitRefused",
    "current_scope",
    "tokens_bound",
]

RATE_LIMITED_ERROR_CLASS = "RateLimited"


class _Limits(Protocol):
    requests_per_min: int | None
    tokens_per_min: int | None


class _Table(Protocol):
    """What the limiter reads of the policy's ``rate_limits`` (`runner.policy.models`)."""

    max_wait_s: float

    def for_model(self, model: str) -> _Limits | None: ...


class WaitRefused(Exception):
    """A wait longer than the episode may still wait (the call is refused, not sent)."""


@dataclass
class _Bucket:
    """A token bucket of ``per_min`` a minute, full at start; its level may go below zero."""

    per_min: int
    level: float
    updated: float

    def refill(self, now: float) -> None:
        self.level = min(self.per_min, self.level + (now - self.updated) * self.per_min / 60.0)
        self.updated = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` fits (a call larger than the bucket waits for it full)."""
        need = min(amount, self.per_min) - self.level
        return max(0.0, need * 60.0 / self.per_min)


class WaitAccount:
    """One episode's rate-limit waits: what was waited, what may still be (thread-safe).

    Args:
        max_wait_s: the longest the episode may wait in total.
        clock: monotonic seconds (the driver's deadline clock).
    """

    def __init__(self, max_wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._done_s = 0.0
        self._since: float | None = None
        self._pending_s = 0.0

    @property
    def waited_s(self) -> float:
        """Seconds waited so far, a wait in progress included up to now."""
        with self._lock:
            extra = 0.0
            if self._since is not None:
                extra = min(self._pending_s, max(0.0, self._clock() - self._since))
            return self._done_s + extra

    @property
    def left_s(self) -> float:
        """Seconds the episode may still wait."""
        with self._lock:
            return max(0.0, self.max_wait_s - self._done_s - self._pending_s)

    @contextmanager
    def waiting(self, seconds: float) -> Iterator[None]:
        """Charge a wait of ``seconds`` (started now) for the block that waits it.

        Raises:
            WaitRefused: ``seconds`` is more than the episode may still wait.
        """
        with self._lock:
            if seconds > self.max_wait_s - self._done_s - self._pending_s + 1e-9:
                raise WaitRefused(
                    f"a {seconds:.1f} s rate-limit wait is more than the"
                    f" {max(0.0, self.max_wait_s - self._done_s):.1f} s this episode may still"
                    f" wait (rate_limits.max_wait_s {self.max_wait_s:g})"
                )
            self._since, self._pending_s = self._clock(), seconds
        try:
            yield
        finally:
            with self._lock:
                self._done_s += seconds
                self._since, self._pending_s = None, 0.0


@dataclass
class Grant:
    """A call's reservation in the limiter; `settle` gives back the tokens not billed."""

    limiter: RateLimiter | None
    model: str
    tokens: int
    settled: bool = field(default=False)

    def settle(self, billed: int) -> None:
        """Give back ``tokens - billed`` (never more than reserved; once)."""
        if self.limiter is not None and not self.settled:
            self.limiter.give_back(self.model, max(0, self.tokens - max(0, billed)))
        self.settled = True


class RateLimiter:
    """Per-model request and token buckets shared by every run (see module doc).

    Args:
        table: the policy's ``rate_limits`` (``max_wait_s``, ``for_model(model)``).
        clock: monotonic seconds.
        sleep: how to wait (tests advance a fake clock).
    """

    def __init__(
        self,
        table: _Table,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.table = table
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._paused_until: dict[str, float] = {}

    def _bucket(self, model: str, kind: str, per_min: int | None, now: float) -> _Bucket | None:
        if per_min is None:
            return None
        bucket = self._buckets.get((model, kind))
        if bucket is None:
            bucket = self._buckets[(model, kind)] = _Bucket(per_min, float(per_min), now)
        bucket.refill(now)
        return bucket

    def reserve(self, model: str, tokens: int, *, max_wait_s: float) -> float:
        """Take one request and ``tokens`` of ``model`` now; return the seconds to wait first.

        Raises:
            WaitRefused: the wait would be longer than ``max_wait_s`` (nothing is taken).
        """
        limits = self.table.for_model(model) if model else None
        with self._lock:
            now = self.clock()
            wait = max(0.0, self._paused_until.get(model, now) - now)
            requests = self._bucket(
                model, "requests", getattr(limits, "requests_per_min", None), now
            )
            token_bucket = self._bucket(
                model, "tokens", getattr(limits, "tokens_per_min", None), now
            )
            if requests is not None:
                wait = max(wait, requests.wait_for(1))
            if token_bucket is not None:
                wait = max(wait, token_bucket.wait_for(tokens))
            if wait > max_wait_s + 1e-9:
                raise WaitRefused(
                    f"model {model!r} is rate-limited for {wait:.1f} s more; this episode may"
                    f" still wait {max_wait_s:.1f} s (rate_limits.max_wait_s)"
                )
            if requests is not None:
                requests.level -= 1
            if token_bucket is not None:
                token_bucket.level -= tokens
            return wait

    def give_back(self, model: str, tokens: int) -> None:
        """Return ``tokens`` unused tokens of ``model`` to its bucket (up to full)."""
        with self._lock:
            bucket = self._buckets.get((model, "tokens"))
            if bucket is not None:
                bucket.refill(self.clock())
                bucket.level = min(bucket.per_min, bucket.level + tokens)

    def pause(self, model: str, seconds: float) -> None:
        """Hold every call to ``model`` for ``seconds`` from now (a provider's 429)."""
        with self._lock:
            until = self.clock() + max(0.0, seconds)
            self._paused_until[model] = max(self._paused_until.get(model, 0.0), until)
        log.info("model_rate_limited", model=model, pause_s=round(seconds, 3))

    def acquire(self, model: str, tokens: int, account: WaitAccount) -> Grant:
        """Reserve, wait (charged to ``account``) and return the grant.

        Raises:
            WaitRefused: the wait is more than ``account`` may still wait.
        """
        wait = self.reserve(model, tokens, max_wait_s=account.left_s)
        grant = Grant(self if self.table.for_model(model) else None, model, tokens)
        if wait > 0:
            with account.waiting(wait):
                self.sleep(wait)
        return grant


@dataclass(frozen=True)
class _Scope:
    limiter: RateLimiter
    account: WaitAccount
    model: str


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "sandbox_replay_rate_limit_scope", default=None
)


def current_scope() -> tuple[RateLimiter, WaitAccount, str] | None:
    """The limiter, account and model of this thread's `RateLimitedProvider` call, or None.

    What `runner.providers.retries.retry_sleep` charges a 429's wait to.
    """
    scope = _SCOPE.get()
    return None if scope is None else (scope.limiter, scope.account, scope.model)


def tokens_bound(payload: Mapping[str, Any], api: str = "chat_completions") -> int:
    """The tokens a call is reserved in the limiter: the ledger's prompt bound + its caps."""
    fields = ("max_tokens", "max_completion_tokens") if api == "chat_completions" else ()
    caps = [payload.get(f) for f in (*fields, *CAP_FIELDS.get(api, ()))]
    completion = max((c for c in caps if isinstance(c, int) and not isinstance(c, bool)), default=0)
    n = payload.get("n")
    choices = n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1
    return prompt_tokens_bound(payload) + max(0, completion) * choices


def _refused(message: str) -> ProviderResponse:
    return ProviderResponse(
        body=None, error={"class": RATE_LIMITED_ERROR_CLASS, "message": message}
    )


class RateLimitedProvider:
    """A run's provider whose calls pass the shared limiter first (see module doc).

    Args:
        inner: the provider that answers.
        limiter: the submission's limiter.
        account: this episode's waits.
        model: the model asked when a request names none.
    """

    def __init__(
        self,
        inner: ModelProvider,
        limiter: RateLimiter,
        account: WaitAccount,
        *,
        model: str | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.limiter = limiter
        self.account = account
        self.model = model

    def _limited(
        self, payload: Mapping[str, Any], api: str, answer: Callable[[], ProviderResponse]
    ) -> ProviderResponse:
        model = str(payload.get("model") or self.model or "")
        try:
            grant = self.limiter.acquire(model, tokens_bound(payload, api), self.account)
        except WaitRefused as exc:
            log.warning("model_call_rate_limit_refused", model=model, error=str(exc))
            return _refused(str(exc))
        token = _SCOPE.set(_Scope(self.limiter, self.account, model))
        try:
            served = answer()
        finally:
            _SCOPE.reset(token)
        billed = sum(served.tokens()) if served.body is not None else 0
        grant.settle(billed)
        return served

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Pass the limiter, then answer through the inner provider."""
        return self._limited(
            request, "chat_completions", lambda: self.inner.complete(request, role)
        )

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Pass the limiter, then forward a program step's request through the inner provider."""
        return self._limited(call.body, call.api, lambda: self.inner.forward(call))

    def close(self) -> None:
        """Nothing of its own: the inner provider is the submission's, closed by its owner."""
