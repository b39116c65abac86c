"""Routing of a program step's gateway requests to the host's providers.

`GatewayRouter` is the provider of a workflow with program steps (`provider_for_workflow`).
Routing, so that two implementations agree:

- the model spec of a request is its program step's ``model``, else the workflow's; none at
  all: the request is answered with an error (a program with no model configured makes no
  model call leave the host);
- a ``scripted`` spec answers every API: its function receives the body (and the ``api`` and
  ``path`` keywords it declares) and returns the raw response body
  (`runner.providers.scripted`: the one convention; the old envelope is deprecated);
- otherwise the API a request arrives on picks the provider family: the OpenAI endpoints
  (Chat Completions, Responses) go to the ``openai`` provider, Messages to ``anthropic``,
  each built from the host settings on first use (endpoint and key stay on the host); only
  the APIs the spec declares get here (``apis``, default the provider's own: the host
  refuses the others before routing, `runner.episode.gatewayhost`), so a step
  uses the other family's key only when its workflow says so;
- the request's ``model`` is forwarded unless the spec's ``name`` overrides it, for requests
  of the spec's own family (``scripted``: every request) that ask or count for the step's
  model (`runner.providers.apis.NAMED_BY_STEP`: an embeddings or moderation request keeps its
  own model) — `model_override`, applied by `runner.episode.gatewayhost`; the trace keeps
  both (the program's ``request`` and the ``forwarded`` body).

Agent steps of the same workflow are answered by the workflow's own provider (`complete`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.providers.apis import ApiCall
from runner.providers.base import ModelProvider, ProviderResponse, error_response
from runner.providers.factory import provider_for

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = ["GatewayRouter", "model_override"]


def model_override(spec: Mapping[str, Any] | None, api_family: str) -> str | None:
    """The model name a spec forces on requests of ``api_family`` (None: keep the request's).

    Args:
        spec: the program step's (or the workflow's) normalised ``model``, or None.
        api_family: ``openai`` or ``anthropic`` (`runner.providers.apis.FAMILY`).
    """
    if not spec or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    if spec.get("provider") in ("scripted", api_family):
        return str(spec["name"])
    return None


def _error(message: str) -> ProviderResponse:
    return error_response("ProviderError", message)


class GatewayRouter:
    """Answers agent turns with the workflow's provider, program requests by the rules above.

    Args:
        default: the workflow's provider (agent steps), or None.
        default_spec: the workflow's normalised ``model``, or None.
        step_specs: each program step's own normalised ``model`` (None: the workflow's).
        search_paths: where a scripted function's module is looked up.
        settings: host settings for the ``openai`` and ``anthropic`` providers.
    """

    name = "gateway"

    def __init__(
        self,
        default: ModelProvider | None,
        default_spec: Mapping[str, Any] | None,
        step_specs: Mapping[str, Mapping[str, Any] | None],
        search_paths: Sequence[Path],
        settings: Settings | None,
    ) -> None:
        self.default = default
        self.default_spec = dict(default_spec) if default_spec else None
        self.step_specs = {k: dict(v) if v else None for k, v in step_specs.items()}
        self.search_paths = list(search_paths)
        self.settings = settings
        self._built: dict[tuple[str, str], ModelProvider] = {}

    @classmethod
    def for_workflow(
        cls, spec: Any, search_paths: Sequence[Path], settings: Settings | None
    ) -> GatewayRouter:
        """The router of a validated `runner.domain.workflow.Workflow`.

        Every scripted function the workflow names is resolved now, so that a bad reference
        is invalid input before anything runs.

        Raises:
            InputError: a provider that cannot be built (a scripted function that does not
                resolve, an unknown provider).
        """
        default_spec = spec.model.model_dump() if spec.model is not None else None
        default = provider_for(default_spec, search_paths=search_paths, settings=settings)
        steps = {
            step.id: (step.model.model_dump() if step.model is not None else None)
            for step in spec.program_steps()
        }
        router = cls(default, default_spec, steps, search_paths, settings)
        for step_spec in steps.values():
            if step_spec and step_spec.get("provider") == "scripted":
                router._provider(step_spec, "scripted")
        return router

    def spec_of(self, step_id: str | None) -> dict[str, Any] | None:
        """The model spec in force for ``step_id`` (its own, else the workflow's)."""
        own = self.step_specs.get(step_id or "")
        return own if own else self.default_spec

    def _provider(self, spec: Mapping[str, Any], family: str) -> ModelProvider:
        key = (family, str(spec.get("function") or ""))
        found = self._built.get(key)
        if found is None:
            wanted = dict(spec) if family == "scripted" else {"provider": family}
            built = provider_for(wanted, search_paths=self.search_paths, settings=self.settings)
            assert built is not None
            found = self._built[key] = built
        return found

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """An agent step's turn: the workflow's own provider."""
        if self.default is None:
            return _error("the workflow configures no model")
        return self.default.complete(request, role)

    def forward(self, call: ApiCall) -> ProviderResponse:
        """A program step's request, routed as the module docstring says."""
        spec = self.spec_of(call.step_id)
        if spec is None:
            return _error(
                f"program step {call.step_id!r} has no model and the workflow configures none"
            )
        if spec.get("provider") == "replay":
            return _error("a replay model answers only reproduce")
        family = "scripted" if spec.get("provider") == "scripted" else call.family
        return self._provider(spec, family).forward(call)

    def close(self) -> None:
        """Close the providers that hold connections."""
        for provider in [self.default, *self._built.values()]:
            close = getattr(provider, "close", None)
            if callable(close):
                close()
