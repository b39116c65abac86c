"""Model providers on the host, in the OpenAI Chat Completions shape (SPEC.md "Model access").

The sandbox asks the host for a model (or simulated-user) turn; the host answers through a
`ModelProvider`: `ScriptedProvider` (the user's ``module:function``), `ReplayProvider` (a
trace's recorded turns), `OpenAIProvider` (any OpenAI-compatible endpoint, httpx), wrapped in
`DeadlineProvider` (the run's deadline) and `MeteredProvider` (reserve and settle each call
under the ``replay`` ceiling). `provider_for` / `provider_for_workflow` build one from a
workflow's ``model``.

May import: `runner.ledger` (prices, ceilings), `runner.settings`, `runner.sdk`,
`runner.trace`, `runner.errors` and third-party libraries (httpx, tenacity, structlog); never
the episode, submit, reproduce or cli packages.
"""

from runner.providers.base import (
    DeadlineProvider,
    ModelProvider,
    ProviderResponse,
    ReplayProvider,
    ScriptedProvider,
    load_function,
    provider_for,
    provider_for_workflow,
    response_from_body,
)
from runner.providers.metered import CEILING_ERROR_CLASS, MeteredProvider, StopSignal
from runner.providers.openai import OpenAIProvider

__all__ = [
    "CEILING_ERROR_CLASS",
    "DeadlineProvider",
    "MeteredProvider",
    "ModelProvider",
    "OpenAIProvider",
    "ProviderResponse",
    "ReplayProvider",
    "ScriptedProvider",
    "StopSignal",
    "load_function",
    "provider_for",
    "provider_for_workflow",
    "response_from_body",
]
