"""The ``rubric`` judge: compare each episode with the task's ``expected`` block.

Vocabulary (SPEC.md "Task file"): ``output`` (the output equals it, as JSON), ``output_contains``
(a string, or a list of strings, each a substring of the output; a non-string output is matched
as its canonical JSON text), ``tool_calls`` (expected calls ``[{tool, args?}]`` that must appear
in this order among the episode's calls, other calls in between allowed; ``args`` compared as a
JSON subset).

Score of an episode, in [0, 1]:
- an episode that did not succeed scores 0 (a failed run did not do the task);
- with no ``expected`` block, a succeeded episode scores 1;
- otherwise the mean over the criteria present of: ``output`` 1 or 0; ``output_contains`` the
  fraction of substrings found; ``tool_calls`` the largest number of expected calls matched in
  order (a longest common subsequence), divided by the number expected.
Ranks follow scores; equal scores tie. The ranking's ``detail.reasons`` says, per variant, what
fell short (`reasons`): the status, the substrings not found, the expected calls matched in
order and the expected tools never called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runner.errors import InputError
from runner.grading.model import Group, Ranking, Result, ToolCall, ranks_from_scores

NAME = "rubric"
_KEYS = frozenset({"output", "output_contains", "tool_calls"})


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality: ``1 == 1.0`` but ``True != 1``, objects by key, arrays in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def json_subset(expected: Any, actual: Any) -> bool:
    """True when ``expected`` is a JSON subset of ``actual``.

    Objects: every expected key is present in ``actual`` with a subset value (extra keys in
    ``actual`` are fine). Arrays: same length, element-wise subsets. Scalars: `json_equal`.
    """
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and json_subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(expected) == len(actual)
            and all(json_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return json_equal(expected, actual)


def _call_matches(expected: Mapping[str, Any], actual: ToolCall) -> bool:
    if expected.get("tool") != actual.tool:
        return False
    return "args" not in expected or json_subset(expected["args"], dict(actual.args))


def matched_in_order(expected: Sequence[Mapping[str, Any]], actual: Sequence[ToolCall]) -> int:
    """Return how many expected calls appear in order among ``actual`` (an LCS length)."""
    prev = [0] * (len(actual) + 1)
    for exp in expected:
        row = [0] * (len(actual) + 1)
        for j, call in enumerate(actual, start=1):
            row[j] = prev[j - 1] + 1 if _call_matches(exp, call) else max(prev[j], row[j - 1])
        prev = row
    return prev[-1]


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check_expected(expected: Mapping[str, Any], task_id: str) -> None:
    """Validate an ``expected`` block.

    Raises:
        InputError: an unknown key or a value of the wrong shape (field ``expected.KEY``).
    """
    unknown = sorted(set(expected) - _KEYS)
    if unknown:
        raise InputError(
            f"task {task_id!r}: unknown key(s) {unknown}; allowed: {sorted(_KEYS)}",
            field="expected",
        )
    contains = expected.get("output_contains")
    if contains is not None and not (
        isinstance(contains, str)
        or (isinstance(contains, list) and all(isinstance(c, str) for c in contains))
    ):
        raise InputError(
            f"task {task_id!r}: must be a string or a list of strings",
            field="expected.output_contains",
        )
    calls = expected.get("tool_calls")
    if calls is not None and not (
        isinstance(calls, list)
        and all(
            isinstance(c, Mapping) and isinstance(c.get("tool"), str) and set(c) <= {"tool", "args"}
            for c in calls
        )
    ):
        raise InputError(
            f"task {task_id!r}: must be a list of {{tool, args?}} objects",
            field="expected.tool_calls",
        )


def score(result: Result, expected: Mapping[str, Any] | None) -> float:
    """Score one episode against ``expected`` (see the module docstring), in [0, 1]."""
    if result.status != "succeeded":
        return 0.0
    if not expected:
        return 1.0
    parts: list[float] = []
    if "output" in expected:
        parts.append(1.0 if json_equal(expected["output"], result.output) else 0.0)
    if "output_contains" in expected:
        wanted = expected["output_contains"]
        needles = [wanted] if isinstance(wanted, str) else list(wanted)
        text = _output_text(result.output) if result.output is not None else ""
        parts.append(sum(1 for n in needles if n in text) / len(needles) if needles else 1.0)
    if "tool_calls" in expected:
        calls = list(expected["tool_calls"])
        found = matched_in_order(calls, result.tool_calls)
        parts.append(found / len(calls) if calls else 1.0)
    return sum(parts) / len(parts) if parts else 1.0


def _call_text(expected: Mapping[str, Any]) -> str:
    args = expected.get("args")
    if not args:
        return str(expected.get("tool"))
    return f"{expected.get('tool')}({json.dumps(args, sort_keys=True, ensure_ascii=False)})"


def reasons(result: Result, expected: Mapping[str, Any] | None) -> list[str]:
    """Why an episode scored below 1: one short text per criterion that fell short."""
    if result.status != "succeeded":
        return [f"episode {result.status}: scores 0"]
    if not expected:
        return []
    out: list[str] = []
    if "output" in expected and not json_equal(expected["output"], result.output):
        out.append("output differs from the expected output")
    if "output_contains" in expected:
        wanted = expected["output_contains"]
        needles = [wanted] if isinstance(wanted, str) else list(wanted)
        text = _output_text(result.output) if result.output is not None else ""
        absent = [n for n in needles if n not in text]
        if absent:
            shown = "; ".join(repr(n if len(n) <= 60 else n[:57] + "...") for n in absent)
            out.append(f"output lacks {len(absent)}/{len(needles)} expected text(s): {shown}")
    if expected.get("tool_calls"):
        calls = list(expected["tool_calls"])
        found = matched_in_order(calls, result.tool_calls)
        if found < len(calls):
            missing = [c for c in calls if not any(_call_matches(c, a) for a in result.tool_calls)]
            text = f"expected calls {found}/{len(calls)} in order"
            if missing:
                text += "; never made: " + ", ".join(_call_text(c) for c in missing)
            out.append(text)
    return out


def rubric_judge(group: Group) -> Ranking:
    """Rank a group by rubric score; equal scores tie.

    Raises:
        InputError: the task's ``expected`` block is malformed.
    """
    if group.expected is not None:
        check_expected(group.expected, group.task_id)
    scores = {r.variant: score(r, group.expected) for r in group.results}
    why = {r.variant: reasons(r, group.expected) for r in group.results}
    return Ranking(
        group.task_id, ranks_from_scores(scores), scores, judge=NAME, detail={"reasons": why}
    )
