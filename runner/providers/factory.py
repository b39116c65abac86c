"""The one place a model provider is built from a ``model`` block (`provider_for`).

``scripted``, ``openai`` and ``anthropic`` from the spec, ``replay`` whenever recorded calls are
given. The provider of a whole workflow (which routes program steps' gateway requests) is
`runner.providers.workflows.provider_for_workflow`, built on this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import InputError
from runner.providers.anthropic import AnthropicProvider
from runner.providers.base import ModelProvider
from runner.providers.openai import OpenAIProvider
from runner.providers.replay import ReplayProvider
from runner.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from runner.settings import Settings


def provider_for(
    model_spec: Mapping[str, Any] | None,
    *,
    search_paths: Sequence[Path] = (),
    recorded_calls: Sequence[Mapping[str, Any]] | None = None,
    settings: Settings | None = None,
) -> ModelProvider | None:
    """Return the provider a workflow's ``model`` block asks for (None when the workflow has none).

    Args:
        model_spec: the normalised workflow's ``model`` (``{"provider", "function"?, ...}``).
        search_paths: where a scripted function's module is looked up.
        recorded_calls: when given, a `ReplayProvider` over them, whatever the spec says.
        settings: host settings (`runner.settings.Settings`) for the ``openai`` provider's
            endpoint and key; None reads the host's ``OPENAI_*`` environment.

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve.

    """
    if recorded_calls is not None:
        return ReplayProvider(recorded_calls)
    if model_spec is None:
        return None
    kind = model_spec.get("provider")
    if kind == "scripted":
        function = model_spec.get("function")
        if not isinstance(function, str):
            raise InputError("scripted provider needs 'function: module:func'", field="model")
        return ScriptedProvider(function, search_paths)
    if kind == "openai":
        name = model_spec.get("name")
        return OpenAIProvider.from_settings(settings, model=name if isinstance(name, str) else None)
    if kind == "anthropic":
        return AnthropicProvider.from_settings(settings)
    raise InputError(
        f"model provider {kind!r} is not available here (scripted, replay, openai, anthropic)",
        field="model.provider",
    )
