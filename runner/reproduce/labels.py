"""The divergence label of a first difference: what kind of change the replay ran into.

Pure functions over JSON records, no I/O. `label_of` reads the two calls at the first
difference's index (the recording's and the replay's) and returns one label of `LABELS` with
the rule that gave it (``label_rule``, words a person reads). The rules, first match wins:

==================== =====================================================================
label                rule
==================== =====================================================================
``missing_turn``     the replay made no call at the index; the recording has one there
                     (the run made fewer calls than recorded)
``extra_turn``       the recording has no call at the index; or a model/user turn whose
                     role's recorded turns were all used (the run made more calls)
``different_tool``   both sides called, but another tool (or a model turn against a tool
                     call)
``model_drift``      both are model turns and the request's ``model`` differs
``tool_schema_       both are model turns and the ``tools`` offered in the request differ
changed``
``prompt_changed``   both are model (or user) turns and the rest of the request differs:
                     messages, system, settings
``different_         the same tool with other arguments
arguments``
``environment``      the same call asked the same thing, and the answer differs: a ``pure``
                     tool's result, a raw HTTP body parsed into another value, an error the
                     recording does not have. The code or what it runs on changed (the
                     environment diff lists what differs) or it read something the trace
                     does not pin (the nondeterminism report)
==================== =====================================================================

A model turn's recorded side is the turn the replay provider compared the request with: the
recorded call the miss message names (``(call N)``), else the recorded call at the index.
``model_drift`` is decided on the request (the model a workflow asks for); the response's model
id is the recording's in a replay, served as recorded. SPEC.md's vocabulary has no name for
this; the set is issue 28's ("prompt changed, tool schema changed, different tool, different
arguments, extra or missing turn, model id drift, environment").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runner.sdk import canonical_json

__all__ = ["LABELS", "label_of"]

LABELS = (
    "prompt_changed",
    "tool_schema_changed",
    "different_tool",
    "different_arguments",
    "extra_turn",
    "missing_turn",
    "model_drift",
    "environment",
)
"""Every divergence label, in the order docs/trace-format.md explains them."""

_PROVIDER_ROLES = ("model", "user")
_COMPARED_CALL = re.compile(r"\(call (\d+)\) differs from its recording")
_ALL_USED = "already used"


def _is_turn(call: Mapping[str, Any] | None) -> bool:
    return call is not None and call.get("tool") in _PROVIDER_ROLES


def _compared(
    difference: Mapping[str, Any],
    recorded: Mapping[str, Any] | None,
    recorded_calls: Sequence[Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    """The recorded turn a model-request miss was compared with (see the module)."""
    found = _COMPARED_CALL.search(str(difference.get("message") or ""))
    if found:
        index = int(found.group(1))
        for call in recorded_calls:
            if call.get("index") == index:
                return call
    return recorded


def _request_label(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> tuple[str, str] | None:
    """The label of two model requests that differ (None when they are equal)."""
    if canonical_json(mine.get("model")) != canonical_json(theirs.get("model")):
        return (
            "model_drift",
            f"the request asks for model {mine.get('model')!r}, the recording for "
            f"{theirs.get('model')!r}",
        )
    if canonical_json(mine.get("tools")) != canonical_json(theirs.get("tools")):
        return "tool_schema_changed", "the tools offered in the model request differ"
    keys = (set(mine) | set(theirs)) - {"model", "tools"}
    rest = sorted(k for k in keys if canonical_json(mine.get(k)) != canonical_json(theirs.get(k)))
    if rest:
        return "prompt_changed", f"the model request differs in {', '.join(rest)}"
    return None


def _environment_rule(environment_diff: Sequence[Mapping[str, Any]]) -> str:
    fields = [str(item.get("field")) for item in environment_diff]
    if not fields:
        return (
            "the same call with the same arguments gave another result; the environment diff "
            "is empty: see what the run read that the trace does not pin (nondeterminism)"
        )
    shown = ", ".join(fields[:5]) + (f" and {len(fields) - 5} more" if len(fields) > 5 else "")
    return (
        "the same call with the same arguments gave another result; the environment differs "
        f"in {shown}"
    )


def label_of(
    difference: Mapping[str, Any],
    recorded: Mapping[str, Any] | None,
    replayed: Mapping[str, Any] | None,
    recorded_calls: Sequence[Mapping[str, Any]] = (),
    environment_diff: Sequence[Mapping[str, Any]] = (),
) -> tuple[str, str]:
    """The divergence label of a first difference, by the module's rules.

    Args:
        difference: the first difference (`runner.reproduce.diff.first_difference`): its
            ``kind`` and ``message`` are read.
        recorded: the recorded call at the difference's index (a trace call record), or None.
        replayed: the replayed call at that index, or None.
        recorded_calls: every recorded call (a model-request miss names the turn compared).
        environment_diff: `runner.reproduce.envdiff.environment_diff` (named by
            ``environment``'s rule).

    Returns:
        ``(label, rule)``: a label of `LABELS` and the rule that gave it, in words.
    """
    if replayed is None or difference.get("kind") == "not_called":
        return "missing_turn", "the replay made no call at this index; the recording has one"
    if _is_turn(replayed) and _ALL_USED in str(difference.get("message") or ""):
        return "extra_turn", f"every recorded {replayed.get('tool')} turn was already used"
    if _is_turn(replayed):
        recorded = _compared(difference, recorded, recorded_calls)
    if recorded is None:
        return "extra_turn", "the recording has no call at this index"
    if recorded.get("tool") != replayed.get("tool"):
        return (
            "different_tool",
            f"the replay called {replayed.get('tool')}, the recording {recorded.get('tool')}",
        )
    if _is_turn(replayed):
        mine, theirs = replayed.get("request"), recorded.get("request")
        found = _request_label(
            mine if isinstance(mine, Mapping) else {}, theirs if isinstance(theirs, Mapping) else {}
        )
        if found is not None:
            return found
    elif canonical_json(replayed.get("args") or {}) != canonical_json(recorded.get("args") or {}):
        return "different_arguments", f"{replayed.get('tool')} was called with other arguments"
    return "environment", _environment_rule(environment_diff)
