"""The provider of a loaded workflow, and the gate ``check`` and ``submit`` share.

A workflow with program steps gets a `GatewayRouter` (its steps' gateway requests routed by
their own ``model``); any other its ``model`` block's provider (`runner.providers.factory`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import InputError

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile
    from runner.providers.base import ModelProvider
    from runner.settings import Settings


def provider_for_workflow(
    workflow: WorkflowFile, *, cwd: Path, settings: Settings | None = None
) -> ModelProvider | None:
    """The provider of a loaded workflow's ``model`` block (None when it has none).

    A scripted function is looked up in the workflow's folder, then ``cwd`` (SPEC.md's
    resolution rule for the workflow's modules).

    Args:
        workflow: a `runner.domain.workflow.WorkflowFile`.
        cwd: the current directory of the command.
        settings: host settings for the ``openai`` provider; see `provider_for`.

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve.
    """
    model = workflow.spec.model
    if model is None and not workflow.spec.program_steps():
        return None  # no model block: nothing to build (`provider_for(None)` says the same)
    # imported on use, not at module top: start-up speed (`check` of a workflow without a model,
    # or of a scripted one read from source, builds no provider: no httpx, no model APIs)
    from runner.providers.factory import provider_for
    from runner.providers.gateway import GatewayRouter

    spec = model.model_dump() if model is not None else None
    search_paths = [workflow.folder, cwd]
    if workflow.spec.program_steps():
        return GatewayRouter.for_workflow(workflow.spec, search_paths, settings)
    return provider_for(spec, search_paths=search_paths, settings=settings)


def check_provider(workflow: WorkflowFile, *, cwd: Path, settings: Settings | None = None) -> None:
    """Build a loaded workflow's model provider once and close it (``check`` and ``submit``).

    One gate for both commands, so that ``check`` never calls eligible what ``submit`` refuses.

    Args:
        workflow: a `runner.domain.workflow.WorkflowFile`.
        cwd: the current directory of the command.
        settings: host settings for the ``openai`` provider; see `provider_for`.

    A ``replay`` provider has nothing to build: it is served from a trace (``reproduce``);
    ``submit`` refuses it on its own (fresh runs need a model).

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve (file,
            line and field ``model.function`` named).
    """
    model = workflow.spec.model
    if model is not None and model.provider == "replay":
        return
    try:
        provider = provider_for_workflow(workflow, cwd=cwd, settings=settings)
    except InputError as exc:
        raise located_model_error(workflow, exc) from exc
    close = getattr(provider, "close", None)
    if callable(close):
        close()


def located_model_error(workflow: WorkflowFile, exc: InputError) -> InputError:
    """``exc`` about a workflow's ``model`` block, with the workflow file and line named."""
    field = str(exc.fields.get("field") or "model")
    message = exc.message.removeprefix(f"{field}: ")
    line = workflow.line_of(tuple(field.split("."))) or workflow.line_of(("model",))
    return InputError(message, file=str(workflow.path), line=line, field=field)
