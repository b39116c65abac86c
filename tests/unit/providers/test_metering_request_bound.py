"""The token reservation of a model call covers the whole forwarded request.

The reservation estimated only ``messages`` and ``tools``: a 20 kB ``response_format`` in
``model.settings`` was forwarded unreserved and 60,000 tokens of ceiling became 66,029 spent.
Now the reservation is never below the UTF-8 bytes of the whole forwarded request (canonical
JSON) plus `PER_MESSAGE_OVERHEAD_TOKENS` per message, plus the capped completion tokens
(`runner.ledger.tokens.prompt_tokens_bound`). The provider here is the real `openai`
provider talking to the fake OpenAI server on loopback (tests/support/fake_openai.py), billing each
request its own bound: the most an honest provider could bill under the rule.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.ledger import Ceiling, CeilingGuard, Ledger, request_bytes
from runner.ledger.tokens import PER_MESSAGE_OVERHEAD_TOKENS
from runner.providers.metered import MeteredProvider, StopSignal
from runner.providers.openai import OpenAIProvider
from tests.support.fake_openai import MODEL_ID, FakeOpenAI, serve

PRICES = {"gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6}}
MAX_TOKENS = 64


def _bill(request: dict[str, Any]) -> tuple[int, int]:
    """What the fake provider bills: the request's bytes and messages, the completion cap."""
    prompt = request_bytes(request) + 3 * len(request.get("messages") or [])  # cookbook: 3
    return prompt, int(request.get("max_tokens") or 0)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path)
    led.create_job("job", {}, {})
    yield led
    led.close()


def _metered(ledger: Ledger, url: str, ceiling: Ceiling, model: str | None) -> MeteredProvider:
    return MeteredProvider(
        OpenAIProvider(url, "sk-fake", model="gpt-4.1-mini", attempts=1),
        CeilingGuard(ledger, "job", {"replay": ceiling}),
        StopSignal(),
        PRICES,
        model=model,
        variant="v",
        task_id="t",
        run_key="r",
        max_tokens=MAX_TOKENS,
    )


def _schema(size: int) -> dict[str, Any]:
    """A JSON-schema response format of about ``size`` bytes."""
    props = {
        f"field_{i:04d}": {"type": "string", "description": "d" * 40} for i in range(size // 80)
    }
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object", "properties": props}},
    }


def test_a_large_response_format_never_passes_the_token_ceiling(ledger: Ledger) -> None:
    settings = {"temperature": 0, "response_format": _schema(20_000)}  # model.settings
    assert len(json.dumps(settings)) > 20_000
    with serve(FakeOpenAI(usage=_bill)) as fake:
        metered = _metered(ledger, fake.url, Ceiling(tokens=60_000), model="gpt-4.1-mini")
        answered = 0
        for turn in range(10):
            request = {
                "messages": [
                    {"role": "system", "content": "answer in the schema"},
                    {"role": "user", "content": f"question {turn}"},
                ],
                **settings,
            }
            served = metered.complete(request, "model")
            if served.error is not None:
                assert served.error["class"] == "CeilingReached"
                break
            answered += 1
            assert served.model == MODEL_ID
        metered.inner.close()  # type: ignore[attr-defined]
    committed = ledger.committed("job", "replay")
    assert answered >= 2  # calls were forwarded, then refused before the ceiling
    assert committed.tokens <= 60_000, f"{committed.tokens} tokens spent of a 60,000 ceiling"
    for row in ledger.charges("job"):
        assert row.actual is not None and row.actual.tokens_in <= row.estimate.tokens_in


def _text(rng: random.Random) -> str:
    alphabet = 'abc xyz 0123\n\t"\\/é€😀\u0000\u2028\udcff'  # a lone surrogate too
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 6 if depth < 3 else 3)
    if kind == 0:
        return _text(rng)
    if kind == 1:
        return rng.randint(-(10**6), 10**6)
    if kind == 2:
        return rng.random()
    if kind == 3:
        return rng.choice([True, False, None])
    if kind in (4, 5):
        return {_text(rng)[:12]: _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _request(rng: random.Random) -> dict[str, Any]:
    request: dict[str, Any] = {
        "messages": [
            {"role": rng.choice(["system", "user", "assistant", "tool"]), "content": _text(rng)}
            for _ in range(rng.randint(0, 8))
        ]
    }
    if rng.random() < 0.5:
        request["tools"] = [
            {"type": "function", "function": {"name": _text(rng)[:10], "parameters": _value(rng)}}
        ]
    for _ in range(rng.randint(0, 5)):  # settings: anything the workflow's model.settings holds
        request[rng.choice(["response_format", "temperature", "seed", "stop", _text(rng)])] = (
            _value(rng)
        )
    if rng.random() < 0.5:
        request["model"] = rng.choice(["gpt-4.1-mini", "gpt-4.1-mini-2025-04-14"])
    for cap in ("max_tokens", "max_completion_tokens", "n"):
        if rng.random() < 0.3:
            request[cap] = rng.choice([0, 1, 5, 10_000, "9", -3, True, 2.5])
    return request


def test_the_reservation_is_never_below_the_bytes_of_the_forwarded_request(
    ledger: Ledger,
) -> None:
    rng = random.Random(10_05)  # fixed seed: the same 500 requests every run
    metered = _metered(
        ledger, "http://127.0.0.1:9/v1", Ceiling(tokens=10**12), model="gpt-4.1-mini"
    )
    for _ in range(500):
        request = _request(rng)
        forwarded = metered._forwarded(request)
        sent = {"model": "gpt-4.1-mini", **forwarded}  # the provider fills a missing model
        estimate = metered._estimate(forwarded)
        messages = len(forwarded.get("messages") or [])
        floor = request_bytes(sent) + PER_MESSAGE_OVERHEAD_TOKENS * messages
        assert estimate.tokens_in >= floor, request
        caps = [forwarded.get(f) for f in ("max_tokens", "max_completion_tokens")]
        assert all(isinstance(c, int) and 0 <= c <= MAX_TOKENS for c in caps if c is not None)
        n = forwarded.get("n", 1)
        assert estimate.tokens_out >= max(c for c in caps if c is not None) * n
    metered.inner.close()  # type: ignore[attr-defined]


def test_a_judge_call_reserves_its_whole_request_too(ledger: Ledger) -> None:
    from runner.grading import Group, Result
    from runner.grading.modeljudge import ModelJudge

    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(tokens=10**9)})
    judge = ModelJudge(
        "gpt-4.1-mini",
        lambda request: {},
        guard,
        PRICES,
        settings={"response_format": _schema(20_000)},
    )
    group = Group("t1", (Result("a", "succeeded", "x"), Result("b", "failed", None)))
    request = judge.request(group)
    messages = len(request["messages"])
    floor = request_bytes(request) + PER_MESSAGE_OVERHEAD_TOKENS * messages
    assert judge._estimate(request).tokens_in >= floor > 20_000
