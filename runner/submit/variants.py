"""The variants of a submission: one workflow version each, with its model and its turn budget.

`make_variants` names each admitted workflow (``name@version`` unless the job file names it) and
reads from its steps the model it asks and how many model (and simulated-user) turns one run
makes at most, the figure the plan's upper-bound estimate starts from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import InputError
from runner.policy.pricing import ModelUse, Recorded, models_of

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

__all__ = ["Variant", "make_variants"]


@dataclass(frozen=True)
class Variant:
    """One workflow version taking part.

    Attributes:
        name: the variant's name in the ledger and the report (default ``name@version``).
        path: the workflow file.
        workflow: the loaded workflow (`runner.domain.workflow.WorkflowFile`).
        registry: its capability-filtered registry.
        provider: the model provider kind (``scripted``, ``openai``), or None without a model.
        model: the model asked in requests (``name``, else the provider kind), or None.
        max_model_calls: model (and simulated-user) turns of one run at most: agent steps'
            ``max_turns``, plus program steps' calls per run from recorded traces.
        uses: the models each model-calling step calls (`runner.policy.pricing.models_of`).
        image: the sandbox image the workflow names (its top-level ``image:``), or None:
            the submission's image (``--image``, else ``SANDBOX_REPLAY_IMAGE``).
    """

    name: str
    path: Path
    workflow: Any
    registry: Any
    provider: str | None
    model: str | None
    max_model_calls: int
    uses: tuple[ModelUse, ...] = ()
    image: str | None = None

    @property
    def models(self) -> tuple[str, ...]:
        """Every model id its steps call, first seen first (the plan names these)."""
        return tuple(dict.fromkeys(m for use in self.uses for m in use.models))

    @property
    def calls_unknown(self) -> bool:
        """True when a program step's calls per run are unknown (no recorded trace)."""
        return any(u.calls_per_run is None for u in self.uses if u.source != "none")

    def to_json(self) -> dict[str, Any]:
        """Name, file, workflow name and version, provider, model, model calls per run."""
        spec = self.workflow.spec
        return {
            "name": self.name,
            "path": str(self.path),
            "workflow": spec.name,
            "version": spec.version,
            "content_hash": self.workflow.content_hash,
            "provider": self.provider,
            "model": self.model,
            "models": list(self.models),
            "model_steps": [
                {
                    "step": u.step,
                    "models": list(u.models),
                    "source": u.source,
                    "calls_per_run": u.calls_per_run,
                }
                for u in self.uses
            ],
            "max_model_calls_per_run": self.max_model_calls,
            "image": self.image,
        }


def _model_of(workflow: WorkflowFile) -> tuple[str | None, str | None, int]:
    spec = workflow.spec
    model = spec.model
    calls = 0
    for step in spec.steps:
        agent = getattr(step, "agent", None)
        if agent is not None:
            calls += agent.max_turns * (2 if agent.user else 1)
    if model is None:  # a program step's own model names the variant's model
        model = next((s.model for s in spec.steps if getattr(s, "model", None)), None)
    if model is None:
        return None, None, calls
    asked = model.name or model.settings.get("model") or model.provider
    return model.provider, str(asked), calls


def make_variants(
    checks: Sequence[tuple[Path, str | None, Any, Any]],
    recorded: Callable[[Any], Recorded | None] = lambda _: None,
) -> tuple[Variant, ...]:
    """Build variants from admitted ``(path, name or None, workflow, registry)``.

    ``recorded`` tells what recorded traces of a workflow say of its model calls
    (`runner.policy.pricing.recorded_models`): a program step's models and calls per run.

    Raises:
        InputError: two variants end up with the same name (field ``variants``).
    """
    variants: list[Variant] = []
    seen: dict[str, Path] = {}
    for path, name, workflow, registry in checks:
        chosen = name or f"{workflow.spec.name}@{workflow.spec.version}"
        if chosen in seen:
            raise InputError(
                f"variants {seen[chosen]} and {path} are both named {chosen!r}; give them"
                " different versions or names (job file: {name, workflow})",
                field="variants",
            )
        seen[chosen] = path
        provider, model, calls = _model_of(workflow)
        uses = tuple(models_of(workflow, recorded))
        programs = {s.id for s in workflow.spec.steps if getattr(s, "program", None)}
        calls += sum(u.calls_per_run or 0 for u in uses if u.step in programs)
        image = getattr(workflow.spec, "image", None)
        variants.append(
            Variant(chosen, path, workflow, registry, provider, model, calls, uses, image)
        )
    return tuple(variants)
