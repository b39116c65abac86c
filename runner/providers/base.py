"""What every model provider on the host is: the answer of one turn and the provider protocol.

The sandbox asks the host for a model (or simulated-user) turn with a ``model_request``, or a
program step sends a model API request through the gateway; the host answers through a
`ModelProvider` (SPEC.md "Model access"). This module holds the shape of an answer
(`ProviderResponse`) and the ways to build one from a raw body; the providers themselves are
`runner.providers.scripted`, `.replay`, `.deadline`, `.openai`, `.anthropic` and `.gateway`,
built by `runner.providers.factory`.

Invariants:
- a `ProviderResponse` always carries the exact raw body text, and ``model`` is read from the
  body's ``model`` field, never from configuration (None when the body has none);
- a provider failure is a `ProviderResponse` with ``error`` set (handed to the runtime, which
  raises it in the agent step), never an exception out of `ModelProvider.complete`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.providers.apis import ApiCall, summarise
from runner.trace.strictjson import loads as strict_loads


@dataclass(frozen=True)
class ProviderResponse:
    """One answered turn.

    Attributes:
        body: the raw response body, exact text (what the trace records; for a stream the
            raw event stream).
        model: the model id read from the body's ``model`` field, or None.
        usage: ``{"prompt_tokens", "completion_tokens", ...}`` from the body (Responses and
            Messages: ``input_tokens``, ``output_tokens``), or {}.
        error: ``{"class", "message"}`` when the turn failed, else None.
        status: the HTTP status of the answer (program steps' gateway calls; 200 otherwise).
        forwarded: the request body actually sent to the provider (gateway calls), or None.
        content_type: the answer's content type (gateway calls), or None.
        maybe_billed: a failed turn whose request may have reached the provider (a read
            timeout, a connection lost after sending): the provider may bill it, so it is
            charged at its reservation (`runner.providers.metered`) and not tried again.

    """

    body: str | None
    model: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, str] | None = None
    status: int = 200
    forwarded: Mapping[str, Any] | None = None
    content_type: str | None = None
    maybe_billed: bool = False

    def tokens(self) -> tuple[int, int]:
        """Return ``(tokens_in, tokens_out)`` from ``usage`` (0 when absent or malformed).

        Chat Completions counts ``prompt_tokens``/``completion_tokens``; Responses and
        Messages ``input_tokens``/``output_tokens``, Messages' cache reads and writes
        (``cache_read_input_tokens``, ``cache_creation_input_tokens``) counted as input.
        """

        def count(key: str) -> int:
            value = self.usage.get(key, 0)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        tokens_in = count("prompt_tokens") or (
            count("input_tokens")
            + count("cache_read_input_tokens")
            + count("cache_creation_input_tokens")
        )
        return tokens_in, count("completion_tokens") or count("output_tokens")

    @property
    def has_usage(self) -> bool:
        """True when the body stated its token usage."""
        return bool(self.usage)


class ModelProvider(Protocol):
    """What the episode driver needs of a provider."""

    name: str

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Answer one turn for ``role`` (``model`` or ``user``); never raises for a bad turn."""
        ...

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Answer one gateway request of a program step; never raises for a bad request."""
        ...


def response_from_api(
    call: ApiCall, body: str, *, status: int = 200, content_type: str | None = None
) -> ProviderResponse:
    """A gateway answer from a raw body: model id and usage read from it (`summarise`).

    Args:
        call: the call answered (its API, whether it streams, the body forwarded).
        body: the raw body text (an event stream when the call streams).
        status: the HTTP status.
        content_type: the content type (default: JSON, or ``text/event-stream`` for streams).
    """
    model, usage = summarise(call.api, body, call.stream and status < 400)
    return ProviderResponse(
        body=body,
        model=model,
        usage=usage,
        status=status,
        forwarded=dict(call.body),
        content_type=content_type
        or ("text/event-stream" if call.stream and status < 400 else "application/json"),
    )


def unsupported(provider: str, what: str) -> ProviderResponse:
    """The error answer of a provider asked for something it does not serve."""
    return error_response("ProviderError", f"the {provider} provider does not serve {what}")


def response_from_body(body: str) -> ProviderResponse:
    """Build a `ProviderResponse` from a raw body, reading ``model`` and ``usage`` from it.

    A body that is not a JSON object still passes through (the runtime reports it); its
    model is None.
    """
    try:
        parsed = strict_loads(body)  # the one strict decoder: no depth, NaN or duplicate traps
    except ValueError:
        return ProviderResponse(body=body)
    if not isinstance(parsed, dict):
        return ProviderResponse(body=body)
    model = parsed.get("model")
    usage = parsed.get("usage")
    return ProviderResponse(
        body=body,
        model=model if isinstance(model, str) else None,
        usage=usage if isinstance(usage, dict) else {},
    )


def error_response(cls: str, message: str, **fields: Any) -> ProviderResponse:
    """The answer of a failed turn: no body, ``error`` ``{"class": cls, "message": message}``.

    Args:
        cls: the error class the runtime raises in the step (``ProviderError``, ...).
        message: what went wrong.
        fields: further `ProviderResponse` fields (``status``, ``forwarded``, ...).
    """
    return ProviderResponse(body=None, error={"class": cls, "message": message}, **fields)
