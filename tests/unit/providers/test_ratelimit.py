"""Provider rate limits: token buckets on an injected clock, 429 + Retry-After on loopback.

No test waits for real: the limiter's clock and sleep are a fake clock that a sleep advances.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.policy import load_policy
from runner.policy.models import RateLimit, RateLimits
from runner.providers.openai import OpenAIProvider
from runner.providers.ratelimit import (
    RATE_LIMITED_ERROR_CLASS,
    RateLimitedProvider,
    RateLimiter,
    WaitAccount,
    WaitRefused,
    tokens_bound,
)
from runner.providers.retries import retry_after_s
from tests.support.fake_openai import FakeOpenAI, serve

REQUEST = {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hi"}]}


class Clock:
    """A monotonic clock that only a sleep moves (thread-safe)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.slept.append(round(seconds, 6))
            self.now += seconds


def limiter(clock: Clock, **models: RateLimit) -> RateLimiter:
    return RateLimiter(RateLimits(models=models), clock=clock, sleep=clock.sleep)


def test_requests_per_minute_are_served_in_arrival_order() -> None:
    clock = Clock()
    shared = limiter(clock, **{"gpt-*": RateLimit(requests_per_min=2)})
    account = WaitAccount(600, clock)
    # a full bucket holds a minute's allowance: two at once, then one every 30 s
    waits = [shared.reserve("gpt-4.1", 1, max_wait_s=600) for _ in range(4)]
    assert waits == [0.0, 0.0, 30.0, 60.0]
    clock.now += 60.0  # the two reserved ahead were served meanwhile; one more is due at +30
    shared.acquire("gpt-4.1", 1, account)
    assert clock.slept == [30.0] and account.waited_s == 30.0
    # another model is not limited, and no table entry means no bucket
    assert shared.reserve("claude-x", 10**9, max_wait_s=0) == 0.0


def test_tokens_per_minute_reserve_the_bound_and_give_back_what_was_not_billed() -> None:
    clock = Clock()
    shared = limiter(clock, **{"gpt-4.1-mini": RateLimit(tokens_per_min=1000)})
    account = WaitAccount(600, clock)
    grant = shared.acquire("gpt-4.1-mini", 900, account)
    assert clock.slept == []  # 900 of 1000 fit at once
    assert shared.reserve("gpt-4.1-mini", 200, max_wait_s=600) == pytest.approx(6.0)  # 100 short
    shared.give_back("gpt-4.1-mini", 200)  # that one was cancelled, say
    grant.settle(100)  # billed 100 of the 900 reserved: 800 back
    assert shared.reserve("gpt-4.1-mini", 800, max_wait_s=0) == 0.0
    # a call larger than the whole bucket waits for a full bucket (100 left: 900 to go at
    # 1000 a minute), then takes it into debt
    assert shared.reserve("gpt-4.1-mini", 5000, max_wait_s=600) == pytest.approx(54.0)


def test_a_wait_longer_than_the_episode_may_wait_is_refused_and_takes_nothing() -> None:
    clock = Clock()
    shared = limiter(clock, **{"m": RateLimit(requests_per_min=1)})
    account = WaitAccount(45, clock)
    shared.acquire("m", 1, account)
    with pytest.raises(WaitRefused, match=r"rate-limited for 60\.0 s more"):
        shared.acquire("m", 1, account)
    clock.now += 20.0
    shared.acquire("m", 1, account)  # 40 s left to wait: fits
    assert clock.slept == [40.0] and account.waited_s == pytest.approx(40.0)
    assert account.left_s == pytest.approx(5.0)


def test_a_429_pause_holds_every_caller_of_that_model() -> None:
    clock = Clock()
    shared = limiter(clock)
    shared.pause("gpt-4.1", 7.5)
    assert shared.reserve("gpt-4.1", 1, max_wait_s=60) == 7.5
    assert shared.reserve("other", 1, max_wait_s=60) == 0.0


def test_tokens_bound_is_the_ledgers_prompt_bound_plus_the_completion_caps() -> None:
    from runner.ledger.tokens import prompt_tokens_bound

    payload = {**REQUEST, "max_tokens": 100, "n": 2}
    assert tokens_bound(payload) == prompt_tokens_bound(payload) + 200
    body = {"model": "m", "input": "hi", "max_output_tokens": 50}
    assert tokens_bound(body, "responses") == prompt_tokens_bound(body) + 50


def test_retry_after_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after_s({"Retry-After": "7"}) == 7.0
    assert retry_after_s({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert retry_after_s({"Retry-After": date}, now=lambda: 1445412470.0) == 10.0
    for bad in ("soon", "-3", "nan", "inf"):
        assert retry_after_s({"Retry-After": bad}) is None
    assert retry_after_s({}) is None


def test_a_429_with_retry_after_is_honoured_shared_and_charged_to_the_episode() -> None:
    clock = Clock()
    shared = limiter(clock)
    account = WaitAccount(60, clock)
    with serve(FakeOpenAI(rate_limit_first=1, retry_after="7")) as fake:
        inner = OpenAIProvider(fake.url, "k", attempts=3)
        provider = RateLimitedProvider(inner, shared, account, model="gpt-4.1-mini")
        served = provider.complete(REQUEST, "model")
        inner.close()
    assert served.error is None and served.body is not None
    assert len(fake.requests) == 2  # the 429, then the answer after the wait it asked for
    assert clock.slept == [7.0] and account.waited_s == 7.0
    # the pause was shared: another sandbox's call to that model waits out what remains
    clock.now -= 3.0
    assert shared.reserve("gpt-4.1-mini", 1, max_wait_s=60) == pytest.approx(3.0)


def test_a_retry_after_longer_than_the_episode_may_wait_is_a_rate_limited_turn() -> None:
    clock = Clock()
    account = WaitAccount(5, clock)
    with serve(FakeOpenAI(rate_limit_first=5, retry_after="30")) as fake:
        inner = OpenAIProvider(fake.url, "k", attempts=3)
        provider = RateLimitedProvider(inner, limiter(clock), account, model="gpt-4.1-mini")
        served = provider.complete(REQUEST, "model")
        inner.close()
    assert served.error is not None and served.error["class"] == RATE_LIMITED_ERROR_CLASS
    assert "30.0 s rate-limit wait is more than the 5.0 s" in served.error["message"]
    assert len(fake.requests) == 1 and clock.slept == []


def test_program_step_requests_pass_the_limiter_and_429s_too(tmp_path: Path) -> None:
    from runner.providers.apis import ApiCall

    clock = Clock()
    shared = limiter(clock, **{"gpt-*": RateLimit(requests_per_min=1)})
    account = WaitAccount(120, clock)
    shared.reserve("gpt-4.1-mini", 1, max_wait_s=0)  # someone else took this minute's request
    with serve(FakeOpenAI(rate_limit_first=1, retry_after="2")) as fake:
        inner = OpenAIProvider(fake.url, "k", attempts=3)
        provider = RateLimitedProvider(inner, shared, account)
        call = ApiCall("chat_completions", "/v1/chat/completions", REQUEST, dict(REQUEST))
        served = provider.forward(call)
        inner.close()
    assert served.status == 200 and len(fake.requests) == 2
    assert clock.slept == [60.0, 2.0] and account.waited_s == 62.0


def test_the_policy_reads_rate_limits_strictly(tmp_path: Path) -> None:
    assert load_policy("shadow").rate_limits.max_wait_s > 0
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: limited\nmode: shadow\nrate_limits:\n  max_wait_s: 30\n"
        "  models: {'gpt-4.1*': {requests_per_min: 500, tokens_per_min: 30000}}\n"
    )
    limits = load_policy(str(good)).rate_limits
    assert limits.for_model("gpt-4.1-mini") == RateLimit(requests_per_min=500, tokens_per_min=30000)
    assert limits.for_model("o3") is None and limits.max_wait_s == 30
    for bad, field in (
        ("  models: {m: {requests_per_minute: 5}}\n", "requests_per_minute"),
        ("  models: {m: {tokens_per_min: 0}}\n", "tokens_per_min"),
        ("  models: {m: {requests_per_min: 1.5}}\n", "requests_per_min"),
        ("  max_wait_s: -1\n", "max_wait_s"),
    ):
        path = tmp_path / "bad.yaml"
        path.write_text(f"name: limited\nmode: shadow\nrate_limits:\n{bad}")
        with pytest.raises(InputError, match=field):
            load_policy(str(path))
