"""The model HTTP APIs a program step's gateway speaks, as the host sees them.

A program running in the sandbox calls the gateway of the runtime (`runner.runtime.steps.gateway`)
with the official SDKs' requests; each arrives here as an `ApiCall`: which API (``api``), the
path it was sent to, the program's request body (what the trace keeps and ``reproduce``
matches) and the body to forward (the request with the step's model name and the token caps
applied). The APIs and the provider family each one is routed to:

- ``chat_completions`` (``/v1/chat/completions``) and ``responses`` (``/v1/responses``): the
  ``openai`` family; usage ``prompt_tokens``/``completion_tokens`` (Responses:
  ``input_tokens``/``output_tokens``);
- ``messages`` (``/v1/messages``): the ``anthropic`` family; usage ``input_tokens`` (plus the
  cache counts) and ``output_tokens``.

Besides the model calls, four requests an agent's SDK makes next to them (recorded and served
like model calls: a ``call`` line with ``tool: model`` and the ``api``):

- ``embeddings`` (``POST /v1/embeddings``, ``openai``): a model call for budgets, reserved and
  settled like any (usage ``prompt_tokens``, no output tokens; USD from the price table);
- ``moderations`` (``POST /v1/moderations``, ``openai``) and ``count_tokens`` (``POST
  /v1/messages/count_tokens``, ``anthropic``): forwarded and recorded, never charged (`FREE`:
  both vendors document them as free, "The moderations endpoint is free to use" and "Token
  counting is free to use"; rate limits still apply);
- ``responses_retrieve`` (``GET /v1/responses/{id}``, request ``{"response_id"}``): never
  forwarded (`SERVED_FROM_RUN`): answered from the responses the same run received earlier
  (`runner.providers.retrieval`), in reproduce from its recording; every Responses request is
  forwarded with ``store: false``, so the provider would not have it anyway.

`summarise` reads the model id and the usage from a raw response body, a JSON object or, for
``stream: true``, the raw server-sent event stream (Chat Completions ``chat.completion.chunk``
events closed by ``data: [DONE]``; Responses ``response.created`` ... ``response.completed``;
Messages ``message_start`` ... ``message_delta`` ... ``message_stop``).

Invariant: nothing here changes a body; the raw text is what the trace records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

# one reading of event streams and bodies for the recorder and the host (sandbox-side, stdlib)
from runner.trace.modelapi import sse_events, summarise

__all__ = [
    "APIS",
    "FAMILY",
    "FREE",
    "MODEL_APIS",
    "NAMED_BY_STEP",
    "SERVED_FROM_RUN",
    "ApiCall",
    "sse_events",
    "summarise",
]

# The APIs that ask a model for a completion (what an agent step's turn is too).
MODEL_APIS = ("chat_completions", "responses", "messages")
APIS = (*MODEL_APIS, "embeddings", "moderations", "count_tokens", "responses_retrieve")
FAMILY = {
    "chat_completions": "openai",
    "responses": "openai",
    "messages": "anthropic",
    "embeddings": "openai",
    "moderations": "openai",
    "count_tokens": "anthropic",
    "responses_retrieve": "openai",
}
# The APIs whose ``model`` a step's model ``name`` replaces (`runner.providers.gateway.
# model_override`): those that ask, or count for, the step's chat model. An embeddings or
# moderation request names a model of another kind and keeps it.
NAMED_BY_STEP = frozenset({"chat_completions", "responses", "messages", "count_tokens"})
# Forwarded and recorded, never charged (the module docstring says why).
FREE = frozenset({"moderations", "count_tokens"})
# Never forwarded: answered from the run's own earlier answers (`runner.providers.retrieval`).
SERVED_FROM_RUN = frozenset({"responses_retrieve"})
# The endpoint of each forwarded API under its provider's base URL (OpenAI's ends in /v1,
# Anthropic's not).
ENDPOINT = {
    "chat_completions": "/chat/completions",
    "responses": "/responses",
    "messages": "/v1/messages",
    "embeddings": "/embeddings",
    "moderations": "/moderations",
    "count_tokens": "/v1/messages/count_tokens",
}
# Request fields that bound one completion's output tokens, per API.
CAP_FIELDS = {
    "chat_completions": ("max_tokens", "max_completion_tokens"),
    "responses": ("max_output_tokens",),
    "messages": ("max_tokens",),
}
MAX_EVENTS = 100_000


@dataclass(frozen=True)
class ApiCall:
    """One model request of a program step, on its way to a provider.

    Attributes:
        api: one of `APIS`.
        path: the path the program sent it to (e.g. ``/v1/chat/completions``; the retrieval's
            ``GET /v1/responses/{id}``).
        request: the program's request body as it arrived (the trace's ``request``).
        body: the body to forward (``request`` with the step's model and the caps applied).
        step_id: the program step that made it.
        headers: the program's version headers (``anthropic-version``; ``anthropic-beta`` and
            ``openai-beta`` are refused by the allow-list), lower-case names.
    """

    api: str
    path: str
    request: Mapping[str, Any]
    body: Mapping[str, Any]
    step_id: str | None = None
    headers: Mapping[str, str] | None = None

    @property
    def stream(self) -> bool:
        """True when the program asked for a server-sent event stream."""
        return self.body.get("stream") is True

    @property
    def family(self) -> str:
        """``openai`` or ``anthropic``: the provider family the API is routed to."""
        return FAMILY[self.api]

    def with_body(self, body: Mapping[str, Any]) -> ApiCall:
        """The same call forwarding ``body`` instead."""
        return replace(self, body=dict(body))
