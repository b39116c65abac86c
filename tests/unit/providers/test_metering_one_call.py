"""What one model call may cost and waiting for room.

- N05: one request whose own reservation is more than one call may take (``n: 10**9``, an
  8 MB body, more than the whole ceiling) is refused alone, an error to its run; on main it
  stopped the whole job at no cost (18 of 20 pairs not run, exit 4).
- N10: a call that may have reached the provider (a read timeout) is tried once and charged at
  its reservation, marked estimated; on main it was tried 4 times, each billed by the provider,
  and charged 0.
- A call whose reservation does not fit now, because other calls hold theirs, waits
  for them to settle; on main it stopped the job.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.base import ProviderResponse
from runner.providers.metered import MAX_CHOICES, MeteredProvider, StopSignal
from runner.providers.openai import OpenAIProvider
from runner.submit.scheduler import Scheduler

PRICES = {"m-*": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0}}
REQUEST = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}


class _Answer:
    name = "answer"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.forwarded: list[dict[str, Any]] = []
        self.gate = gate

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        self.forwarded.append(dict(request))
        if self.gate is not None:
            assert self.gate.wait(10)
        return ProviderResponse(
            body="{}", model="m-1", usage={"prompt_tokens": 10, "completion_tokens": 5}
        )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.for_state_dir(tmp_path) as led:
        led.create_job("job", {}, {})
        yield led


def _metered(guard: CeilingGuard, stop: StopSignal, inner: Any, run: str) -> MeteredProvider:
    return MeteredProvider(
        inner, guard, stop, PRICES, model="m-1", variant="v", task_id=run,
        run_key=f"run/{run}", max_tokens=100,
    )  # fmt: skip


@pytest.mark.parametrize(
    "oversized",
    [
        {"n": 10**9},
        {"n": MAX_CHOICES + 1},
        {"messages": [{"role": "user", "content": "x" * (8 * 1024 * 1024)}]},
        {"messages": [{"role": "user", "content": "x" * 200_000}]},  # > the whole ceiling
    ],
    ids=["n-1e9", "n-129", "8MB-body", "more-than-the-ceiling"],
)
def test_one_oversized_call_is_refused_alone_and_the_job_goes_on(
    ledger: Ledger, oversized: dict[str, Any]
) -> None:
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(tokens=100_000)})
    stop = StopSignal()
    inner = _Answer()
    refused = _metered(guard, stop, inner, "bad").complete({**REQUEST, **oversized}, "model")
    assert refused.error is not None and refused.error["class"] == "CallRefused"
    assert refused.status == 400 and inner.forwarded == []
    assert not stop.is_set() and ledger.charges("job") == []  # never a job stop, never charged
    honest = _metered(guard, stop, inner, "good").complete(REQUEST, "model")
    assert honest.error is None and len(inner.forwarded) == 1


def test_an_oversized_call_in_one_variant_leaves_every_other_pair_running(
    ledger: Ledger,
) -> None:
    """The review's N05 job: 2 variants x 10 tasks, one variant asks n: 10**9."""
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(tokens=100_000)})
    stop = StopSignal()
    inner = _Answer()

    def run_pair(variant: str, task_id: str, key: str) -> tuple[str, str | None, Amount]:
        provider = _metered(guard, stop, inner, key)
        request = {**REQUEST, "n": 10**9} if variant == "greedy" else REQUEST
        reply = provider.complete(request, "model")
        return ("succeeded" if reply.error is None else "failed"), None, Amount()

    pairs = [(v, f"t{i}") for i in range(10) for v in ("honest", "greedy")]
    outcomes = Scheduler(ledger, guard, "job", run_pair, concurrency=4, stop=stop).run(pairs)
    assert not stop.is_set()
    assert [o.status for o in outcomes if o.variant == "honest"] == ["succeeded"] * 10
    assert [o.status for o in outcomes if o.variant == "greedy"] == ["failed"] * 10


def test_a_call_that_does_not_fit_now_waits_for_the_calls_in_flight(ledger: Ledger) -> None:
    # one call reserves 200 tokens (its request's bytes and overheads, 100 completion tokens):
    # room for two at once, not three
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(tokens=500)})
    stop = StopSignal()
    gate = threading.Event()
    inner = _Answer(gate)
    replies: list[ProviderResponse] = []
    threads = [
        threading.Thread(
            target=lambda i=i: replies.append(_metered(guard, stop, inner, f"r{i}").complete(
                REQUEST, "model"
            ))
        )
        for i in range(3)
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        for _ in range(100):
            if len(inner.forwarded) == 2:
                break
            threading.Event().wait(0.05)
        estimate = guard.smallest_call("replay")
        assert estimate is not None and 2 * estimate.tokens <= 500 < 3 * estimate.tokens
        threading.Event().wait(0.3)
        assert len(inner.forwarded) == 2 and not stop.is_set()  # the third waits; no stop
    finally:
        gate.set()
        for thread in threads:
            thread.join(10)
    assert [r.error for r in replies] == [None, None, None] and len(inner.forwarded) == 3
    assert ledger.totals("job")["replay"].charged.tokens == 45


def _provider(handler: Any) -> OpenAIProvider:
    return OpenAIProvider(
        "http://127.0.0.1:9/v1", "k", model="m-1", attempts=4,
        transport=httpx.MockTransport(handler),
    )  # fmt: skip


def test_a_read_timeout_is_tried_once_and_charged_at_its_reservation(ledger: Ledger) -> None:
    tries: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        tries.append(1)
        raise httpx.ReadTimeout("the provider did not answer in time", request=request)

    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(tokens=100_000)})
    metered = _metered(guard, StopSignal(), _provider(handler), "r1")
    reply = metered.complete(REQUEST, "model")
    assert reply.error is not None and reply.error["class"] == "ProviderUnavailable"
    assert reply.maybe_billed and len(tries) == 1  # never tried again: it may have been billed
    (charge,) = ledger.charges("job")
    assert charge.state == "settled" and charge.estimated
    assert charge.actual == charge.estimate and charge.actual.tokens > 0
    assert metered.charged == charge.estimate


def test_a_connection_refused_is_retried_and_not_charged(ledger: Ledger) -> None:
    tries: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        tries.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(tokens=100_000)})
    reply = _metered(guard, StopSignal(), _provider(handler), "r1").complete(REQUEST, "model")
    assert reply.error is not None and not reply.maybe_billed
    assert len(tries) == 4  # it never reached the provider: safe to try again
    assert [c.state for c in ledger.charges("job")] == ["released"]
