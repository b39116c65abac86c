"""A price for every model before anything runs.

Which models a workflow calls, and the plan-time refusal of one the price table lacks while a
USD ceiling is set.

A model call is reserved at its model's price before it is forwarded
(`runner.providers.metered`); a model with no price cannot be reserved under a USD ceiling.
That used to be found at the first call, the run reported ``ceiling_reached`` while ``check``
had said eligible. Now ``check``, ``submit`` and ``submit --dry-run`` refuse it first (exit 2),
naming the model, the step, the file and the three fixes: a price in the policy's ``prices:``
section, ``--price MODEL=IN/OUT`` (USD per million input / output tokens), or no USD ceiling.

Which models (`models_of`), per step:
- an agent step: the workflow's model as a request names it (``name``, else
  ``settings.model``, else the provider kind: a ``scripted`` function's turns are asked as
  ``scripted``, which the default price table prices at 0);
- a program step: its model's ``name`` when set (the gateway puts it on every chat request of
  that provider's family) with the models the step declares (``models:``: an embeddings or
  moderation request keeps its own model, `runner.providers.apis.NAMED_BY_STEP`), else the
  models the step declares, else the models its
  requests named in recorded traces of that workflow (runs of ``name@version`` in the
  ledger, their traces read with the bounded reader: `recorded_models`); else the step's
  models are *unknown*, which under a USD ceiling is refused like an unpriced model;
- a step without any model (no ``model:`` on the step or the workflow) calls none, and a
  ``replay`` model's turns are served from a trace: nothing to price.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import InputError
from runner.hostlog import get_logger
from runner.policy.loader import Policy, policy_from_spec
from runner.policy.models import Price

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

log = get_logger(__name__)

__all__ = [
    "ModelUse",
    "check_prices",
    "models_of",
    "parse_price",
    "recorded_models",
    "unpriced",
    "with_prices",
]

# ``--price MODEL=IN/OUT``: a model id or glob, then two non-negative decimal numbers.
_PRICE = re.compile(
    r"^(?P<model>[^=\s]{1,256})=(?P<input>[0-9.eE+-]{1,32})/(?P<output>[0-9.eE+-]{1,32})\Z"
)
# Recorded traces read per workflow, newest first, and call lines read per trace.
MAX_TRACES = 20
MAX_CALL_LINES = 10_000


@dataclass(frozen=True)
class ModelUse:
    """The models one step calls, and how that is known.

    Attributes:
        step: the step id.
        models: model ids (empty when unknown or when the step calls none).
        source: ``workflow model``, ``step model``, ``models:``, ``recorded traces``,
            ``unknown`` or ``none``.
        calls_per_run: model calls of the step per run (mean over recorded traces, rounded
            up; an agent step's ``max_turns`` bound), or None when unknown.
    """

    step: str
    models: tuple[str, ...]
    source: str
    calls_per_run: int | None = None


@dataclass(frozen=True)
class Recorded:
    """What recorded traces of one workflow say of its model calls.

    Attributes:
        traces: traces read.
        models: model ids the requests named (first seen first).
        calls: model calls in those traces, in all.
    """

    traces: int
    models: tuple[str, ...] = ()
    calls: int = 0

    @property
    def calls_per_run(self) -> int | None:
        """Mean model calls per trace, rounded up (None without traces)."""
        return math.ceil(self.calls / self.traces) if self.traces else None


def parse_price(text: str) -> tuple[str, Price]:
    """Read ``MODEL=IN/OUT`` (USD per million input / output tokens).

    Raises:
        InputError: not of that form, or a price that is negative or not finite (field
            ``--price``).
    """
    match = _PRICE.match(text.strip())
    if match is None:
        raise InputError(
            f"--price {text!r}: expected MODEL=IN/OUT, USD per million input and output"
            " tokens (e.g. gpt-4.1-mini=0.4/1.6)",
            field="--price",
        )
    try:
        values = float(match["input"]), float(match["output"])
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError("a price is a finite number >= 0")
        price = Price(input_usd_per_mtok=values[0], output_usd_per_mtok=values[1])
    except ValueError as exc:
        raise InputError(f"--price {text!r}: {exc}", field="--price") from None
    return match["model"], price


def with_prices(policy: Policy, prices: Iterable[str]) -> Policy:
    """``policy`` with the ``--price`` values added (they win over the policy's for a model).

    The policy's hash changes with them: the prices in force are part of what a job ran under.

    Raises:
        InputError: a bad ``--price`` value.
    """
    extra = dict(parse_price(text) for text in prices)
    if not extra:
        return policy
    spec = policy.spec.model_copy(update={"prices": {**policy.spec.prices, **extra}})
    source = f"{policy.source} + --price {', '.join(sorted(extra))}"
    return policy_from_spec(spec, source, policy.path)


def _asked(model: Any) -> str | None:
    """The model an agent step's requests name (None: unknown at plan time).

    A scripted function's turns are asked as ``scripted``; None when the host's settings would
    choose the model (``OPENAI_MODEL``).
    """
    named = model.name or model.settings.get("model")
    if named:
        return str(named)
    return "scripted" if model.provider == "scripted" else None


def models_of(
    workflow: WorkflowFile, recorded: Callable[[Any], Recorded | None] = lambda _: None
) -> list[ModelUse]:
    """The models each model-calling step of ``workflow`` calls (module docstring).

    Args:
        workflow: a loaded `runner.domain.workflow.WorkflowFile`.
        recorded: what recorded traces of the workflow say (`recorded_models`), or None.
    """
    spec = workflow.spec
    out: list[ModelUse] = []
    traces: Recorded | None = None
    for step in spec.steps:
        agent = getattr(step, "agent", None)
        if agent is not None:
            if spec.model is None:
                continue
            if spec.model.provider == "replay":  # served from a trace: never billed
                out.append(ModelUse(step.id, (), "none", 0))
                continue
            turns = agent.max_turns * (2 if agent.user else 1)
            asked = _asked(spec.model)
            if asked is None:
                out.append(ModelUse(step.id, (), "unknown", turns))
            else:
                out.append(ModelUse(step.id, (asked,), "workflow model", turns))
            continue
        if getattr(step, "program", None) is None:
            continue
        model = step.model or spec.model
        if model is None or model.provider == "replay":  # no model, or served from a trace
            out.append(ModelUse(step.id, (), "none", 0))
            continue
        if traces is None:
            traces = recorded(workflow) or Recorded(0)
        source = "step model" if step.model is not None else "workflow model"
        if model.name:  # plus what the name does not replace: embeddings, the other family
            named = tuple(dict.fromkeys([str(model.name), *(step.models or [])]))
            out.append(ModelUse(step.id, named, source, traces.calls_per_run))
        elif step.models:
            out.append(ModelUse(step.id, tuple(step.models), "models:", traces.calls_per_run))
        elif traces.models:
            out.append(ModelUse(step.id, traces.models, "recorded traces", traces.calls_per_run))
        else:
            out.append(ModelUse(step.id, (), "unknown"))
    return out


def unpriced(policy: Policy, uses: Sequence[ModelUse]) -> list[tuple[ModelUse, str]]:
    """``(use, model)`` for every model of ``uses`` without a price (model ``""``: unknown).

    The lookup is the policy's (`runner.policy.models.PolicySpec.price_for`: an exact key,
    else the longest matching glob), the rule `runner.ledger.price_of` applies at call time.
    """
    missing: list[tuple[ModelUse, str]] = []
    for use in uses:
        if use.source == "unknown":
            missing.append((use, ""))
        missing.extend((use, model) for model in use.models if policy.spec.price_for(model) is None)
    return missing


@dataclass
class _Problems:
    lines: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


def check_prices(
    policy: Policy,
    workflows: Sequence[tuple[str, Any]],
    *,
    usd_ceiling: float | None,
    ceiling_source: str,
    recorded: Callable[[Any], Recorded | None] = lambda _: None,
) -> None:
    """Refuse, before anything runs, a model without a price while a USD ceiling is set.

    Args:
        policy: the policy (``--price`` values added: `with_prices`).
        workflows: ``(file, loaded workflow)`` of every workflow.
        usd_ceiling: the replay USD ceiling in effect, None when unbounded (nothing refused).
        ceiling_source: where the ceiling comes from (``policy shadow``, ``--ceiling-usd``).
        recorded: what recorded traces say of a workflow (`recorded_models`).

    Raises:
        InputError: one line per unpriced or unknown model (file, step and model named),
            then the fixes; field ``prices``.
    """
    if usd_ceiling is None:
        return
    problems = _Problems()
    for path, workflow in workflows:
        for use, model in unpriced(policy, models_of(workflow, recorded)):
            if model:
                problems.models.append(model)
                problems.lines.append(
                    f"{path}: step {use.step!r}: model {model!r} ({use.source}) has no price"
                )
            else:
                problems.lines.append(
                    f"{path}: step {use.step!r}: the models this step calls are unknown (its"
                    " model names none"
                    + (
                        ", the step declares no models:, and no recorded trace of this"
                        " workflow names one)"
                        if use.calls_per_run is None
                        else "; name it: model: {provider, name})"
                    )
                )
    if not problems.lines:
        return
    example = problems.models[0] if problems.models else "MODEL"
    raise InputError(
        "\n".join(problems.lines)
        + f"\nthe replay USD ceiling ({usd_ceiling:g}, {ceiling_source}) needs a price for every"
        " model before anything runs; fix one of: add the model to the policy's prices:"
        f" section (its pricing, USD per million tokens), pass --price {example}=IN/OUT (USD"
        " per million input/output tokens), declare a program step's models: [ID, ...], or"
        " run without a USD ceiling",
        field="prices",
        models=sorted(set(problems.models)) or None,
    )


def recorded_models(state_dir: Path) -> Callable[[Any], Recorded | None]:
    """What recorded traces of a workflow say of its model calls, from ``state_dir``'s ledger.

    The runs of the workflow's ``name@version`` (``record``, ``run``, and ``submit``'s default
    variant names), newest first, at most `MAX_TRACES` whose trace files exist; each trace read
    with the bounded reader and the strict decoder, its header's workflow name and version
    checked, the model each model call line's request named (the forwarded one when the host
    replaced it) collected. A trace that cannot be read is skipped (logged). No ledger: nothing.
    """
    from runner.inputfile import open_input
    from runner.ledger import LEDGER_FILENAME, Ledger
    from runner.trace.strictjson import loads as strict_loads

    path = Path(state_dir) / LEDGER_FILENAME

    def read(workflow: Any) -> Recorded | None:
        if not path.exists():
            return None
        spec = workflow.spec
        variant = f"{spec.name}@{spec.version}"
        with Ledger(path) as ledger:
            runs = [r for r in ledger.runs() if r.variant == variant and r.trace_path]
        runs.sort(key=lambda r: r.started or 0.0, reverse=True)
        models: dict[str, None] = {}
        traces = calls = 0
        for run in runs:
            if traces >= MAX_TRACES:
                break
            trace = str(run.trace_path)
            if not Path(trace).is_file():
                continue
            try:
                found = _trace_models(open_input(trace, "trace"), strict_loads, spec)
            except (OSError, ValueError, InputError) as exc:
                log.warning("trace_unreadable", trace=trace, error=str(exc))
                continue
            if found is None:
                continue
            traces += 1
            calls += len(found)
            models.update(dict.fromkeys(m for m in found if m))
        return Recorded(traces, tuple(models), calls)

    return read


def _trace_models(handle: Any, loads: Callable[[Any], Any], spec: Any) -> list[str] | None:
    """The model of each model call line of one trace; None when it is another workflow's."""
    found: list[str] = []
    with handle:
        for number, line in enumerate(handle):
            if number > MAX_CALL_LINES:
                break
            if not line.strip():
                continue
            record = loads(line)
            if not isinstance(record, dict):
                continue
            if record.get("type") == "run":
                workflow = record.get("workflow") or {}
                if not isinstance(workflow, dict) or (
                    workflow.get("name"),
                    str(workflow.get("version")),
                ) != (spec.name, str(spec.version)):
                    return None
            elif record.get("type") == "call" and record.get("tool") == "model":
                found.append(_call_model(record))
    return found


def _call_model(record: Mapping[str, Any]) -> str:
    for key in ("forwarded", "request", "args"):
        value = record.get(key)
        if isinstance(value, dict) and isinstance(value.get("model"), str):
            return str(value["model"])[:256]
    model = record.get("model")
    return str(model)[:256] if isinstance(model, str) else ""
