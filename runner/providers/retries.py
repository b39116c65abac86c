"""The model providers' retries: transient failures, and HTTP 429 with its ``Retry-After``.

`provider_retrying` is the one retry policy of the HTTP providers (`runner.providers.openai`,
`runner.providers.httpcall`): tenacity, ``attempts`` tries; between tries a 429 answer's
``Retry-After`` (or ``retry-after-ms``) is honoured, anything else backs off exponentially.
Only failures known not to have been billed are tried again: an HTTP answer of a transient
status, or a transport failure before the request left (`may_have_reached`); a POST that may
have reached the provider (a read timeout) is never retried (`MaybeBilled`: it
was retried four times, each billed by the provider, and charged 0).
The sleep is `retry_sleep`: inside a `runner.providers.ratelimit.RateLimitedProvider` call a
429's wait pauses the model in the shared limiter (every sandbox waits, not only the one told)
and is charged to the episode's `WaitAccount` (refused past what it may still wait).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import tenacity

from runner.hostlog import get_logger
from runner.providers.ratelimit import current_scope

log = get_logger(__name__)

__all__ = [
    "MAX_RETRY_AFTER_S",
    "MaybeBilled",
    "may_have_reached",
    "provider_retrying",
    "retry_after_s",
    "retry_sleep",
]

# The longest ``Retry-After`` honoured outside an episode (a judge call, say): a provider's
# answer must not hold the host for ever. Inside an episode its account bounds the wait.
MAX_RETRY_AFTER_S = 120.0


# Transport failures that happen before a request leaves this host: no connection was made
# (refused, unresolvable, timed out while connecting, no pooled connection free), so the
# provider saw nothing and a retry cannot bill twice.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class MaybeBilled(Exception):
    """A POST failed after it may have reached the provider: never retried."""


def may_have_reached(exc: Exception) -> bool:
    """True when a transport failure ``exc`` may have come after the provider got the request.

    A read timeout, a connection reset or closed mid-answer, a write that failed part-way:
    the provider may have run (and billed) the call. Only failures before a connection
    existed (`_NOT_SENT`) are known not to have reached it.
    """
    return not isinstance(exc, _NOT_SENT)


def retry_sleep(seconds: float, *, rate_limited: bool) -> None:
    """The sleep between a provider's tries (tenacity's ``sleep``).

    Inside a `RateLimitedProvider` call and for a 429 answer, the model is paused for every
    sandbox and the wait is charged to the episode (refused past its allowance); otherwise a
    plain sleep.

    Raises:
        WaitRefused: the episode may not wait that long (the provider stops retrying).
    """
    scope = current_scope()
    if scope is None:
        time.sleep(seconds)
        return
    limiter, account, model = scope
    if not rate_limited:
        limiter.sleep(seconds)
        return
    limiter.pause(model, seconds)
    with account.waiting(seconds):
        limiter.sleep(seconds)


def provider_retrying(
    retry_on: type[BaseException], attempts: int, *, event: str, **fields: Any
) -> tenacity.Retrying:
    """The providers' retry policy: ``attempts`` tries of ``retry_on`` failures.

    Between tries: a 429 answer's ``Retry-After`` (the exception's ``retry_after_s``, at
    most `MAX_RETRY_AFTER_S`), else exponential backoff (0.2 s doubling, at most 5 s); the
    sleep is `retry_sleep`, so a 429's wait pauses the model for every sandbox and is charged
    to the episode. Each retry is logged as ``event`` with ``fields``.

    Args:
        retry_on: the transient failure's class (``status`` and ``retry_after_s`` attributes
            when it carries an HTTP answer).
        attempts: tries at most (>= 1).
        event: the log event of a retry.
        fields: more log fields.
    """
    backoff = tenacity.wait_exponential(multiplier=0.2, max=5.0)
    last = {"rate_limited": False}

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after_s", None)
        last["rate_limited"] = getattr(exc, "status", None) == 429
        if last["rate_limited"] and isinstance(after, float):
            return min(after, MAX_RETRY_AFTER_S)
        return float(backoff(state))

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(retry_on),
        stop=tenacity.stop_after_attempt(attempts),
        wait=wait,
        sleep=lambda seconds: retry_sleep(seconds, rate_limited=last["rate_limited"]),
        before_sleep=lambda state: log.warning(
            event,
            attempt=state.attempt_number,
            error=str(state.outcome.exception()) if state.outcome else None,
            **fields,
        ),
        reraise=True,
    )


def retry_after_s(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds a ``Retry-After`` (or OpenAI's ``retry-after-ms``) header asks to wait, or None.

    ``Retry-After`` is delta-seconds or an HTTP-date (RFC 9110 section 10.2.3); a value that
    is neither, negative or not finite is ignored.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    text = lowered.get("retry-after")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            value = parsedate_to_datetime(text).timestamp() - now()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        return max(0.0, value)
    return value if math.isfinite(value) and value >= 0 else None
