"""Templating of workflow values: ``${task.x}`` and ``${steps.ID.output[.path]}``.

Standard library only, Python 3.9+ (docs/internals.md, "Normalised workflow"):
- a string that is exactly one reference is replaced by the referenced value (any JSON type);
- inside a longer string a reference is replaced by its text: strings as they are, other values
  as canonical JSON;
- dicts and lists are templated recursively; other values are returned unchanged;
- ``${task.x.y}`` reads ``task.input["x"]["y"]``; a path segment that is a number indexes a
  list; ``${steps.ID.output}`` is the output of step ID, which must have run;
- any other ``${...}`` text is left as it is.

A reference that cannot be resolved raises `WorkflowError` naming the reference and the step.
"""

import re
from typing import Any, Dict, List

from runner.sdk import canonical_json
from runner.wire.errors import WorkflowError

_REF = re.compile(r"\$\{((?:task|steps)(?:\.[^.}]+)*)\}")


def render(value: Any, task_input: Dict[str, Any], outputs: Dict[str, Any]) -> Any:
    """Template ``value`` against the task input and the outputs of the steps that ran.

    Raises:
        WorkflowError: a reference to a missing field, a step that did not run, or a path that
            does not exist.
    """
    if isinstance(value, str):
        return _render_text(value, task_input, outputs)
    if isinstance(value, dict):
        return {k: render(v, task_input, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, task_input, outputs) for v in value]
    return value


def _render_text(text: str, task_input: Dict[str, Any], outputs: Dict[str, Any]) -> Any:
    whole = _REF.fullmatch(text)
    if whole:
        return resolve(whole.group(1), task_input, outputs)

    def replace(match: "re.Match[str]") -> str:
        found = resolve(match.group(1), task_input, outputs)
        return found if isinstance(found, str) else canonical_json(found)

    return _REF.sub(replace, text)


def resolve(reference: str, task_input: Dict[str, Any], outputs: Dict[str, Any]) -> Any:
    """The value of one reference (without ``${`` and ``}``), e.g. ``steps.fetch.output.id``.

    Raises:
        WorkflowError: the reference does not resolve.
    """
    parts = reference.split(".")
    if parts[0] == "task":
        return _walk(task_input, parts[1:], reference)
    if len(parts) < 3 or parts[2] != "output":
        raise WorkflowError(
            "${{{}}}: a step reference reads steps.ID.output[.path]".format(reference),
            reference=reference,
        )
    step_id = parts[1]
    if step_id not in outputs:
        raise WorkflowError(
            "${{{}}}: step {!r} has not run (no output yet)".format(reference, step_id),
            reference=reference,
        )
    return _walk(outputs[step_id], parts[3:], reference)


def _walk(value: Any, path: List[str], reference: str) -> Any:
    for depth, part in enumerate(path):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif (
            isinstance(value, list)
            and part.lstrip("-").isdigit()
            and -len(value) <= int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            where = ".".join(path[:depth]) or "(top)"
            raise WorkflowError(
                "${{{}}}: no {!r} in {} (a {})".format(
                    reference, part, where, type(value).__name__
                ),
                reference=reference,
            )
    return value
