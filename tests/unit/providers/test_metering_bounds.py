"""Model calls forwarded under a bounded replay ceiling never bill more than they reserved.

`MeteredProvider` reserves an upper bound of each call before forwarding it (SPEC.md: "the
total charged never exceeds the ceiling"). These tests forward through a fake provider that
bills the worst case the forwarded request allows, and check the reservation covers it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from runner.ledger import Ceiling, CeilingGuard, Ledger
from runner.providers.base import ProviderResponse
from runner.providers.metered import MODEL_UNPRICED_CLASS, MeteredProvider, StopSignal

PRICES = {"m-1": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 10.0}}


class _WorstCase:
    """Answers every call with the most completion tokens the forwarded request allows."""

    name = "worst-case"

    def __init__(self) -> None:
        self.forwarded: list[dict[str, Any]] = []

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        self.forwarded.append(dict(request))
        caps = [request[f] for f in ("max_tokens", "max_completion_tokens") if f in request]
        per_choice = max(caps) if caps else 100_000
        n = request.get("n", 1)
        return ProviderResponse(
            body="{}",
            model=str(request.get("model")),
            usage={"prompt_tokens": 1, "completion_tokens": per_choice * n},
        )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path)
    led.create_job("job", {}, {})
    yield led
    led.close()


def _metered(ledger: Ledger, inner: _WorstCase, ceiling: Ceiling) -> MeteredProvider:
    guard = CeilingGuard(ledger, "job", {"replay": ceiling})
    return MeteredProvider(
        inner,
        guard,
        StopSignal(),
        PRICES,
        model="m-1",
        variant="v",
        task_id="t",
        run_key="r",
        max_tokens=100,
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"n": 4},
        {"max_completion_tokens": 5000},
        {"n": 3, "max_completion_tokens": 5000, "max_tokens": 50},
    ],
)
def test_a_call_never_settles_above_its_reservation(
    ledger: Ledger, settings: dict[str, Any]
) -> None:
    inner = _WorstCase()
    metered = _metered(ledger, inner, Ceiling(tokens=100_000, usd=100.0))
    request = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}], **settings}
    served = metered.complete(request, "model")
    assert served.error is None
    (row,) = ledger.charges("job")
    assert row.actual is not None
    assert row.actual.tokens_out <= row.estimate.tokens_out
    assert row.actual.usd <= row.estimate.usd
    assert inner.forwarded[0].get("max_completion_tokens", 0) <= 100


def test_a_bad_n_is_forwarded_as_one(ledger: Ledger) -> None:
    inner = _WorstCase()
    metered = _metered(ledger, inner, Ceiling(tokens=100_000))
    metered.complete({"model": "m-1", "messages": [], "n": "4"}, "model")
    assert inner.forwarded[0]["n"] == 1


def test_an_unpriced_model_is_refused_under_a_bounded_usd_ceiling(ledger: Ledger) -> None:
    inner = _WorstCase()
    metered = _metered(ledger, inner, Ceiling(usd=1.0))
    served = metered.complete({"model": "unpriced-9", "messages": []}, "model")
    assert served.error is not None
    # refused alone, an error to that run, never a ceiling_reached
    assert served.error["class"] == MODEL_UNPRICED_CLASS and served.status == 400
    assert "unpriced-9" in served.error["message"]
    assert inner.forwarded == [] and ledger.charges("job") == []
    assert not metered.stop.is_set()


def test_an_unpriced_model_is_forwarded_when_usd_is_unbounded(ledger: Ledger) -> None:
    inner = _WorstCase()
    metered = _metered(ledger, inner, Ceiling(tokens=100_000))
    served = metered.complete({"model": "unpriced-9", "messages": []}, "model")
    assert served.error is None and len(inner.forwarded) == 1
