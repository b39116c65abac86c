"""Model providers on the host, in the OpenAI Chat Completions shape (SPEC.md "Model access").

The sandbox asks the host for a model (or simulated-user) turn; the host answers through a
`ModelProvider` (``base``: the answer and the protocol): `ScriptedProvider` (``scripted``: the
user's ``module:function``), `ReplayProvider` (``replay``: a trace's recorded turns),
`OpenAIProvider` and ``AnthropicProvider`` (``openai``, ``anthropic``: HTTP endpoints, httpx,
through ``httpcall``: the endpoint, its key and client, one POST), ``GatewayRouter``
(``gateway``: program steps' requests), wrapped in
`DeadlineProvider` (``deadline``: the run's deadline) and `MeteredProvider` (``metered``:
reserve and settle each call under the ``replay`` ceiling). `provider_for` (``factory``) builds
one from a ``model`` block, `provider_for_workflow` (``workflows``) the one of a workflow.

May import: `runner.ledger` (prices, ceilings), `runner.domain` (a workflow's model blocks),
`runner.settings`, `runner.sdk`,
`runner.trace`, `runner.errors` and third-party libraries (httpx, tenacity, structlog); never
the episode, submit, reproduce or cli packages.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562), for start-up speed: importing
# one module of this package must not load the others (`check`, `--help`).
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.providers.base import ModelProvider, ProviderResponse, response_from_body
    from runner.providers.deadline import DeadlineProvider
    from runner.providers.factory import provider_for
    from runner.providers.metered import CEILING_ERROR_CLASS, MeteredProvider, StopSignal
    from runner.providers.openai import OpenAIProvider
    from runner.providers.replay import ReplayProvider
    from runner.providers.scripted import ScriptedProvider
    from runner.providers.workflows import provider_for_workflow

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
    "provider_for",
    "provider_for_workflow",
    "response_from_body",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CEILING_ERROR_CLASS": "runner.providers.metered",
        "DeadlineProvider": "runner.providers.deadline",
        "MeteredProvider": "runner.providers.metered",
        "ModelProvider": "runner.providers.base",
        "OpenAIProvider": "runner.providers.openai",
        "ProviderResponse": "runner.providers.base",
        "ReplayProvider": "runner.providers.replay",
        "ScriptedProvider": "runner.providers.scripted",
        "StopSignal": "runner.providers.metered",
        "provider_for": "runner.providers.factory",
        "provider_for_workflow": "runner.providers.workflows",
        "response_from_body": "runner.providers.base",
    },
)
