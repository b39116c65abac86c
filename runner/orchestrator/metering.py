"""Model calls of sandboxed runs, reserved and settled under the ``replay`` ceiling.

`MeteredProvider` wraps the provider the episode driver uses (one wrapper per run): before the
host forwards a model (or simulated-user) turn it reserves an upper bound of its spend with the
job's `CeilingGuard`; after the answer it settles the actual tokens and USD (USD from the
policy's price table, model id from the response). When the reservation would exceed the
ceiling, the call is refused (an error turn of class ``CeilingReached``: the runtime raises it in
the agent step) and the shared `StopSignal` is set, so that no new run starts and every further
call of every run is refused too.

A model call reserves tokens and USD only, never a run: a run reserved its ``runs=1`` (and its
sandbox seconds) before it started. So a stop caused by the runs or sandbox-seconds ceiling (the
scheduler could not start the next run) stops dispatch but does not refuse the model calls of
runs already started: they fit and finish. Calls are refused after an interruption or a tokens
or USD stop (`StopSignal.refuses_calls`).

Invariant: the spend forwarded never exceeds what was reserved on a bounded dimension, because
the forwarded request's ``max_tokens`` is capped at the value the estimate used, and the prompt
estimate (bytes of the canonical request) is an upper bound of its tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import structlog

from runner.errors import CeilingReached
from runner.ledger import Amount, CeilingGuard, estimate_usd
from runner.orchestrator.openai_provider import response_usd
from runner.orchestrator.providers import ModelProvider, ProviderResponse
from runner.sdk import canonical_json

log = structlog.get_logger(__name__)

__all__ = ["CEILING_ERROR_CLASS", "MeteredProvider", "StopSignal"]

# The error class of a refused turn; the episode driver classifies such a run ``ceiling_reached``.
CEILING_ERROR_CLASS = "CeilingReached"


class StopSignal:
    """Set once when replay must stop (a ceiling, or an interruption); thread-safe.

    Attributes:
        reason: ``ceiling_reached`` or ``interrupted`` once set.
        fields: the `CeilingReached` fields (purpose, limit, ceiling, used, requested).
        message: the first stop's message.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.reason: str | None = None
        self.fields: dict[str, Any] = {}
        self.message = ""

    def set(self, reason: str, message: str = "", fields: Mapping[str, Any] | None = None) -> None:
        """Stop (the first reason wins)."""
        with self._lock:
            if self.reason is None:
                self.reason, self.message, self.fields = reason, message, dict(fields or {})
                # info: the report prints the stop once, in words (no duplicate warning)
                log.info("replay_stopping", reason=reason, message=message)
            self._event.set()

    def is_set(self) -> bool:
        """True once stopped."""
        return self._event.is_set()

    @property
    def refuses_calls(self) -> bool:
        """True when model calls of runs already started must be refused too.

        False for a stop by the runs or sandbox-seconds ceiling: those bound runs, which were
        reserved before they started, not the calls inside them.
        """
        if not self._event.is_set():
            return False
        with self._lock:
            return not (
                self.reason == "ceiling_reached"
                and self.fields.get("limit") in ("runs", "sandbox_s")
            )


class MeteredProvider:
    """A provider whose every call is reserved and settled under ``replay`` (see module doc).

    Args:
        inner: the provider that answers (scripted, openai).
        guard: the job's ceiling guard.
        stop: the job's stop signal.
        prices: the policy's price table.
        model: the model the variant asks for (estimate when the request names none).
        variant: attribution on the ledger rows.
        task_id: attribution on the ledger rows.
        run_key: the run's idempotency key; call keys are ``{run_key}/call/{n}``.
        max_tokens: the completion-token cap; None forwards requests unchanged (no ceiling
            bounds tokens or USD, so no bound is needed).
    """

    def __init__(
        self,
        inner: ModelProvider,
        guard: CeilingGuard,
        stop: StopSignal,
        prices: Mapping[str, Any],
        *,
        model: str | None,
        variant: str,
        task_id: str,
        run_key: str,
        max_tokens: int | None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.guard = guard
        self.stop = stop
        self.prices = prices
        self.model = model
        self.variant = variant
        self.task_id = task_id
        self.run_key = run_key
        self.max_tokens = max_tokens
        self.calls = 0
        self.refused = 0
        self.charged = Amount()

    def _forwarded(self, request: Mapping[str, Any]) -> dict[str, Any]:
        payload = dict(request)
        if self.max_tokens is not None:
            asked = payload.get("max_tokens")
            if not isinstance(asked, int) or isinstance(asked, bool) or asked > self.max_tokens:
                payload["max_tokens"] = self.max_tokens
        return payload

    def _estimate(self, payload: Mapping[str, Any]) -> Amount:
        prompt = {"messages": payload.get("messages"), "tools": payload.get("tools")}
        tokens_in = len(canonical_json(prompt).encode("utf-8")) + 8 * len(
            payload.get("messages") or []
        )
        tokens_out = int(payload.get("max_tokens") or 0)
        model = str(payload.get("model") or self.model or "")
        try:
            usd = estimate_usd(self.prices, model, tokens_in, tokens_out)
        except Exception:  # an unpriced model: the plan named it; the USD bound is unknown
            usd = 0.0
        return Amount(tokens_in=tokens_in, tokens_out=tokens_out, usd=usd)

    def _refuse(self, message: str) -> ProviderResponse:
        self.refused += 1
        return ProviderResponse(body=None, error={"class": CEILING_ERROR_CLASS, "message": message})

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Reserve, forward, settle; a refused reservation is a ``CeilingReached`` error turn."""
        if self.stop.refuses_calls:
            return self._refuse(f"replay stopped ({self.stop.reason}): {self.stop.message}")
        payload = self._forwarded(request)
        key = f"{self.run_key}/call/{self.calls}"
        self.calls += 1
        try:
            reservation = self.guard.reserve(
                "replay",
                self._estimate(payload),
                key=key,
                kind="model_call",
                variant=self.variant,
                task_id=self.task_id,
                run_key=self.run_key,
                model=str(payload.get("model") or self.model or "") or None,
            )
        except CeilingReached as exc:
            self.stop.set("ceiling_reached", str(exc), exc.fields)
            return self._refuse(str(exc))
        try:
            served = self.inner.complete(payload, role)
        except BaseException:
            self.guard.release(reservation)
            raise
        if served.error is not None and served.body is None:
            self.guard.release(reservation)  # nothing answered, nothing billed
            return served
        tokens_in, tokens_out = served.tokens()
        usd = response_usd(self.prices, served, str(payload.get("model") or self.model or ""))
        actual = Amount(tokens_in=tokens_in, tokens_out=tokens_out, usd=usd or 0.0)
        self.guard.settle(reservation, actual, model=served.model)
        self.charged = self.charged + actual
        return served
