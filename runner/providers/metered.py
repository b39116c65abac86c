"""Model calls of sandboxed runs, reserved and settled under the ``replay`` ceiling.

`MeteredProvider` wraps the provider the episode driver uses (one wrapper per run): before the
host forwards a model (or simulated-user) turn it reserves an upper bound of its spend with the
job's `CeilingGuard`; after the answer it settles the actual tokens and USD (USD from the
policy's price table, model id from the response).

When the reservation does not fit *now* because other calls' reservations are open, the call
waits for them to settle (`CeilingGuard.reserve_when_fits`; the job used to stop at
the first such call). When it could not fit even once they settled, the call is refused (an
error turn of class ``CeilingReached``: the runtime raises it in the agent step, the run ends
``ceiling_reached``), and the job stops only when the smallest call the job reserved could not
fit either: then the shared `StopSignal` is set, so that no new run starts and every further
call of every run is refused too.

What one call may be is bounded before it is estimated: ``n`` at most
`MAX_CHOICES`, the forwarded body at most `MAX_CALL_REQUEST_BYTES`, and a reservation at most
the whole ceiling. A call past these, or naming a model the price table lacks while the USD
ceiling is bounded (the plan refuses undeclared unpriced models before anything runs:
`runner.policy.pricing`), is refused alone: an error to that run (``CallRefused``,
``ModelNotPriced``, HTTP 400 for a program's request), never a job stop, never charged.

A call that may have reached the provider but was never answered (a read timeout, a connection
lost after the request went out: the provider says so with ``maybe_billed``) is charged at its
reservation and marked ``estimated``: the providers do not retry such a call
(`runner.providers.httpcall`), so it is charged once, for its one try.

A model call reserves tokens and USD only, never a run: a run reserved its ``runs=1`` (and its
budget-clock bound of sandbox seconds) before it started. So a stop caused by the runs or
sandbox-seconds ceiling stops dispatch but does not refuse the model calls of runs already
started (`StopSignal.refuses_calls`).

Invariant: the spend forwarded never exceeds what was reserved on a bounded dimension, because
the forwarded request's ``max_tokens`` / ``max_completion_tokens`` are capped at the value the
estimate used, the estimate reserves ``n`` completions of that cap, and the prompt estimate
(`runner.ledger.tokens.prompt_tokens_bound`: bytes of the *whole* forwarded request plus a
per-message overhead) is an upper bound of its tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from runner.errors import CeilingReached, InputError
from runner.hostlog import get_logger
from runner.ledger import (
    Amount,
    CeilingGuard,
    Reservation,
    estimate_usd,
    prompt_tokens_bound,
    request_bytes,
)
from runner.ledger.pricing import call_usd
from runner.providers.apis import CAP_FIELDS, FREE, ApiCall
from runner.providers.base import ModelProvider, ProviderResponse

log = get_logger(__name__)

__all__ = [
    "CALL_REFUSED_CLASS",
    "CEILING_ERROR_CLASS",
    "MAX_CALL_REQUEST_BYTES",
    "MAX_CHOICES",
    "MODEL_UNPRICED_CLASS",
    "MeteredProvider",
    "StopSignal",
]

# The error class of a refused turn; the episode driver classifies such a run ``ceiling_reached``.
CEILING_ERROR_CLASS = "CeilingReached"
# A call refused alone, for what it asks (an error to its run; not a ceiling).
CALL_REFUSED_CLASS = "CallRefused"
MODEL_UNPRICED_CLASS = "ModelNotPriced"
# ``n`` at most: the OpenAI Chat Completions API refuses more than 128 choices ("Invalid 'n':
# integer above maximum value. Expected a value <= 128").
MAX_CHOICES = 128
# A forwarded body at most: about a 1,000,000-token context (the largest of the price table's
# models, GPT-4.1) at 4 bytes a token; an 8 MB body reserved 8 M prompt tokens and stopped a
# job.
MAX_CALL_REQUEST_BYTES = 4 * 1024 * 1024


class _Unpriced(Exception):
    """The model has no price and the USD ceiling is bounded."""


# Request fields that bound one completion's tokens; each is capped at ``max_tokens``.
_CAP_FIELDS = ("max_tokens", "max_completion_tokens")


def _is_count(value: Any) -> bool:
    """True for a non-negative int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
        self._closed = threading.Event()

    def _forwarded(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Return the request to forward: every completion-token cap at most ``max_tokens``.

        ``max_completion_tokens`` (the newer name, which reasoning models require) is capped
        when the request names it; otherwise ``max_tokens`` is capped or added. ``n`` is left as
        asked (the trace records the sandbox's request, so changing it would hide what was
        asked) and `_estimate` reserves ``n`` completions; an ``n`` that is not a positive
        integer is set to 1 so that the provider cannot read it as more.
        """
        payload = dict(request)
        if self.max_tokens is None:
            return payload
        fields = [f for f in _CAP_FIELDS if f in payload] or ["max_tokens"]
        for name in fields:
            asked: Any = payload.get(name)
            if not (_is_count(asked) and int(asked) <= self.max_tokens):
                payload[name] = self.max_tokens
        if "n" in payload and not (_is_count(payload["n"]) and payload["n"] >= 1):
            payload["n"] = 1
        return payload

    def _estimate(self, payload: Mapping[str, Any], tokens_in: int | None = None) -> Amount:
        """The reservation of ``payload``, the request as it will be forwarded.

        Prompt tokens: ``tokens_in`` when given, else `prompt_tokens_bound` of the whole
        request as the provider receives it (the provider adds the variant's model when it
        names none); completion tokens: ``n`` completions of the capped completion tokens.
        """
        model = str(payload.get("model") or self.model or "")
        if tokens_in is None:
            tokens_in = prompt_tokens_bound({**payload, "model": model} if model else payload)
        caps = [int(payload[f]) for f in _CAP_FIELDS if _is_count(payload.get(f))]
        choices = int(payload["n"]) if _is_count(payload.get("n")) else 1
        tokens_out = max(caps, default=0) * max(1, choices)
        try:
            usd = estimate_usd(self.prices, model, tokens_in, tokens_out)
        except InputError:
            # an unpriced model: the USD bound is unknown; only an unbounded USD ceiling may
            # forward it (estimating 0 would let it settle above the ceiling)
            if self.guard.ceiling("replay").usd is not None:
                raise _Unpriced(
                    f"model {model or '<no model id>'!r} has no price (policy prices, or"
                    " --price MODEL=IN/OUT) and the replay USD ceiling is bounded: the call"
                    " cannot be reserved; declare the models a program step calls (models:)"
                    " so that the plan checks their prices before anything runs"
                ) from None
            usd = 0.0
        return Amount(tokens_in=tokens_in, tokens_out=tokens_out, usd=usd)

    def close(self) -> None:
        """The run ended: a call still waiting for room gives up (nobody reads its answer)."""
        self._closed.set()

    def _refuse(self, message: str) -> ProviderResponse:
        self.refused += 1
        return ProviderResponse(body=None, error={"class": CEILING_ERROR_CLASS, "message": message})

    def _refuse_alone(self, cls: str, message: str) -> ProviderResponse:
        """An error to this run only, for what the call asks: HTTP 400, nothing charged."""
        log.warning("model_call_refused", run_key=self.run_key, error_class=cls, reason=message)
        return ProviderResponse(body=None, status=400, error={"class": cls, "message": message})

    def _oversized(self, payload: Mapping[str, Any]) -> str | None:
        """Why ``payload`` is more than one call may be, or None (module docstring)."""
        choices = payload.get("n")
        if isinstance(choices, int) and not isinstance(choices, bool) and choices > MAX_CHOICES:
            return f"n {choices} is more than {MAX_CHOICES} choices"
        size = request_bytes(payload)
        if size > MAX_CALL_REQUEST_BYTES:
            return f"the request is {size} bytes, more than {MAX_CALL_REQUEST_BYTES}"
        return None

    def _more_than_the_ceiling(self, estimate: Amount) -> str | None:
        ceiling = self.guard.ceiling("replay")
        if ceiling.tokens is not None and estimate.tokens > ceiling.tokens:
            return f"{estimate.tokens} tokens, more than the whole ceiling of {ceiling.tokens}"
        if ceiling.usd is not None and estimate.usd > ceiling.usd:
            return f"${estimate.usd:.4f}, more than the whole ceiling of ${ceiling.usd:g}"
        return None

    def _reserve(self, estimate: Amount, model: str) -> Reservation | ProviderResponse:
        """The call's reservation, after waiting for room; else the refusal to answer with."""
        too_much = self._more_than_the_ceiling(estimate)
        if too_much is not None:
            return self._refuse_alone(
                CALL_REFUSED_CLASS, f"this one call would reserve {too_much}: refused alone"
            )
        key = f"{self.run_key}/call/{self.calls}"
        self.calls += 1
        try:
            return self.guard.reserve_when_fits(
                "replay",
                estimate,
                give_up=lambda: self.stop.refuses_calls or self._closed.is_set(),
                key=key,
                kind="model_call",
                variant=self.variant,
                task_id=self.task_id,
                run_key=self.run_key,
                model=model or None,
            )
        except CeilingReached as exc:
            if exc.fields.pop("final", True):
                smallest = self.guard.smallest_call("replay") or estimate
                if not self.guard.could_fit("replay", smallest):  # nothing fits any more
                    self.stop.set("ceiling_reached", str(exc), exc.fields)
            return self._refuse(str(exc))

    def _answered(
        self, reservation: Reservation, estimate: Amount, served: ProviderResponse, actual: Amount
    ) -> ProviderResponse:
        """Settle what ``served`` cost (module docstring: unanswered calls, N10)."""
        if served.error is not None and served.body is None:
            if not served.maybe_billed:
                self.guard.release(reservation)  # it never reached the provider: not billed
                return served
            log.warning("model_call_charged_at_reservation", run_key=self.run_key)
            self.guard.settle(reservation, estimate, estimated=True)
            self.charged = self.charged + estimate
            return served
        self.guard.settle(reservation, actual, model=served.model)
        self.charged = self.charged + actual
        return served

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Reserve (waiting for room), forward, settle; a refusal is an error turn."""
        if self.stop.refuses_calls:
            return self._refuse(f"replay stopped ({self.stop.reason}): {self.stop.message}")
        payload = self._forwarded(request)
        problem = self._oversized(payload)
        if problem is not None:
            return self._refuse_alone(CALL_REFUSED_CLASS, problem)
        try:
            estimate = self._estimate(payload)
        except _Unpriced as exc:  # this call only, the job goes on
            return self._refuse_alone(MODEL_UNPRICED_CLASS, str(exc))
        model = str(payload.get("model") or self.model or "")
        reservation = self._reserve(estimate, model)
        if isinstance(reservation, ProviderResponse):
            return reservation
        try:
            served = self.inner.complete(payload, role)
        except BaseException:
            self.guard.release(reservation)
            raise
        tokens_in, tokens_out = served.tokens()
        usd = response_usd(self.prices, served, model)
        actual = Amount(tokens_in=tokens_in, tokens_out=tokens_out, usd=usd or 0.0)
        return self._answered(reservation, estimate, served, actual)

    # -- program steps' gateway requests ----------------------------------------------------

    def _capped(self, api: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with every output-token cap of ``api`` at most ``max_tokens``."""
        payload = dict(body)
        if self.max_tokens is None:
            return payload
        if api == "chat_completions":
            return self._forwarded(payload)
        for name in CAP_FIELDS.get(api, ()):
            asked: Any = payload.get(name)
            if not (_is_count(asked) and int(asked) <= self.max_tokens):
                payload[name] = self.max_tokens
        return payload

    def _estimate_api(self, api: str, payload: Mapping[str, Any]) -> Amount:
        if api == "chat_completions":
            return self._estimate(payload)
        # an upper bound of the prompt's tokens: the whole forwarded body (`prompt_tokens_bound`)
        tokens_in = prompt_tokens_bound(payload)
        caps = [int(payload[f]) for f in CAP_FIELDS.get(api, ()) if _is_count(payload.get(f))]
        return self._estimate(
            {"model": payload.get("model"), "messages": [], "max_tokens": max(caps, default=0)},
            tokens_in=tokens_in,
        )

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Reserve (waiting for room), forward, settle a program step's request.

        The forwarded body has its output-token cap at most ``max_tokens``. An embeddings
        request is reserved at its prompt bound and no output tokens, settled at the usage it
        states (``prompt_tokens``) and priced like any model; moderations and token counting
        (`runner.providers.apis.FREE`) are forwarded unreserved and charged nothing. A
        successful answer that states no usage (a Chat Completions stream without
        ``include_usage``) is settled at its reservation: never a silent zero. An HTTP error
        answer is settled at the usage it states (usually none).
        """
        if self.stop.refuses_calls:
            return self._refuse(f"replay stopped ({self.stop.reason}): {self.stop.message}")
        payload = self._capped(call.api, call.body)
        problem = self._oversized(payload)
        if problem is not None:
            return self._refuse_alone(CALL_REFUSED_CLASS, problem)
        if call.api in FREE:  # moderations, token counting: never charged, nothing reserved
            return self.inner.forward(call.with_body(payload))
        try:
            estimate = self._estimate_api(call.api, payload)
        except _Unpriced as exc:
            return self._refuse_alone(MODEL_UNPRICED_CLASS, str(exc))
        model = str(payload.get("model") or self.model or "")
        reservation = self._reserve(estimate, model)
        if isinstance(reservation, ProviderResponse):
            return reservation
        try:
            served = self.inner.forward(call.with_body(payload))
        except BaseException:
            self.guard.release(reservation)
            raise
        if served.status < 400 and not served.has_usage:
            actual = estimate
        else:
            tokens_in, tokens_out = served.tokens()
            usd = response_usd(self.prices, served, model)
            actual = Amount(tokens_in=tokens_in, tokens_out=tokens_out, usd=usd or 0.0)
        return self._answered(reservation, estimate, served, actual)


def response_usd(
    prices: Mapping[str, Any], response: ProviderResponse, asked: str | None
) -> float | None:
    """USD of one answered call (`runner.ledger.pricing.call_usd` of its usage and model).

    Args:
        prices: the policy's price table.
        response: the answered call (its ``usage`` and ``model``).
        asked: the model named in the request.
    """
    tokens_in, tokens_out = response.tokens()
    return call_usd(prices, tokens_in, tokens_out, response.model, asked)
