"""Compare a replayed episode with its recording: the verdict and what differs first.

Pure functions over JSON records (the recorded trace and the replay's trace), no I/O.

`verdict` says ``reproduced`` when the replay ended with the recorded outcome: the same status,
the same failure signature (or both succeeded with the same output), the same call sequence
(tool ids and arguments, in order) and no divergence noted by the runtime (a ``pure`` tool's
other result, a call the trace never saw, a served call without recording). Otherwise
``not_reproduced`` with the *first* difference, by call index:

- a divergence the runtime noted (``unrecorded_call``, ``arguments``, ``pure_result``,
  ``raw_io_result``): index, tool, arguments and the runtime's message;
- a model or user turn the replay provider could not serve: ``message N differs`` with the
  differing part (request vs recording);
- a call whose tool or arguments differ from the recorded call at that index, or a call
  missing on either side;
- otherwise the outcome itself (status, failure).

A *source verdict* (an imported run that its source judged failed, e.g. τ²'s reward 0: failure
``(last call, "workflow", "task_failed")``) is not something the workflow computes: a replay
with the recorded call sequence that ends ``succeeded`` keeps that verdict
(`apply_source_verdict`: ``failed``, failure at the replay's last call), so the signatures
compare; a replay whose calls differ does not inherit it.

What changed in the environment is `runner.reproduce.envdiff`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runner.sdk import canonical_json
from runner.trace.format import episode_exit_code, failure_signature

SOURCE_VERDICT_CLASS = "task_failed"

_MESSAGE_DIFF = re.compile(r"first differing message index (\d+): (.*)$", re.S)
_SHOW = 300
# A message already shows both sides cut around where they differ (runner.trace.excerpt):
# cutting it again at 300 characters dropped the recorded side, the part that differs.
_SHOW_MESSAGE = 1000


def _short(value: Any, limit: int = _SHOW) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key(call: Mapping[str, Any]) -> tuple[str, str]:
    if call.get("tool") in ("model", "user"):
        return str(call.get("tool")), ""
    return str(call.get("tool")), canonical_json(call.get("args") or {})


def _provider_miss(call: Mapping[str, Any]) -> dict[str, Any] | None:
    error = call.get("error")
    if call.get("tool") not in ("model", "user") or not isinstance(error, Mapping):
        return None
    message = str(error.get("message", ""))
    if "differs from its recording" not in message and "unrecorded" not in message:
        return None
    found = _MESSAGE_DIFF.search(message)
    entry: dict[str, Any] = {
        "index": call.get("index"),
        "tool": call.get("tool"),
        "kind": "model_request",
        "message": message,
    }
    if found:
        entry["message_index"] = int(found.group(1))
        entry["differs"] = found.group(2)
        entry["summary"] = (
            f"{call.get('tool')} call #{call.get('index')}: message {found.group(1)} differs: "
            f"{_short(found.group(2), _SHOW_MESSAGE)}"
        )
    else:
        entry["summary"] = (
            f"{call.get('tool')} call #{call.get('index')}: {_short(message, _SHOW_MESSAGE)}"
        )
    return entry


def first_difference(
    recorded_calls: Sequence[Mapping[str, Any]],
    replayed_calls: Sequence[Mapping[str, Any]],
    divergences: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The first unrecorded or differing call, or None when the call sequences agree.

    Returns:
        ``{index, tool, args?, kind, message, summary, ...}``.
    """
    candidates: list[dict[str, Any]] = []
    for note in divergences:
        index = note.get("index")
        entry = {
            "index": index,
            "tool": note.get("tool"),
            "kind": note.get("kind", "divergence"),
            "message": note.get("message", ""),
        }
        if "args" in note:
            entry["args"] = note["args"]
        if note.get("differing"):
            entry["differing"] = note["differing"]
        entry["summary"] = (
            f"call #{index} {note.get('tool')}: {_short(entry['message'], _SHOW_MESSAGE)}"
        )
        candidates.append(entry)
    for call in replayed_calls:
        miss = _provider_miss(call)
        if miss is not None:
            candidates.append(miss)
            break
    recorded = {c.get("index"): c for c in recorded_calls}
    replayed = {c.get("index"): c for c in replayed_calls}
    for index in sorted(i for i in set(recorded) | set(replayed) if isinstance(i, int)):
        mine, theirs = replayed.get(index), recorded.get(index)
        if mine is None or theirs is None or _key(mine) != _key(theirs):
            candidates.append(_sequence_entry(index, mine, theirs))
            break
    if not candidates:
        return None
    return min(candidates, key=lambda c: c["index"] if isinstance(c["index"], int) else 1 << 30)


def _sequence_entry(
    index: int, mine: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None
) -> dict[str, Any]:
    if mine is None:
        assert theirs is not None
        message = (
            f"the replay made no call #{index}; the recording has {theirs.get('tool')} "
            f"{_short(theirs.get('args') or theirs.get('request') or {})}"
        )
        return {
            "index": index,
            "tool": theirs.get("tool"),
            "args": theirs.get("args"),
            "kind": "not_called",
            "message": message,
            "summary": f"call #{index} {theirs.get('tool')}: {message}",
        }
    args = mine.get("args")
    if theirs is None:
        message = "the recording has no call at this index (unrecorded call)"
    else:
        message = (
            f"the recording has {theirs.get('tool')} {_short(theirs.get('args') or {})} "
            "at this index"
        )
    error = mine.get("error")
    if isinstance(error, Mapping):
        message += f"; the replay raised {error.get('class')}: {_short(error.get('message', ''))}"
    return {
        "index": index,
        "tool": mine.get("tool"),
        "args": args,
        "kind": "unrecorded_call" if theirs is None else "different_call",
        "message": message,
        "summary": f"call #{index} {mine.get('tool')} {_short(args or {})}: {message}",
    }


def apply_source_verdict(
    recorded_calls: Sequence[Mapping[str, Any]],
    recorded_end: Mapping[str, Any],
    replayed_calls: Sequence[Mapping[str, Any]],
    replayed_end: Mapping[str, Any],
) -> dict[str, Any]:
    """The replay's end line with the recording's source verdict applied, when it travels.

    It travels when the recorded failure is a source verdict (tool ``workflow``, error class
    ``task_failed``), the replay ended ``succeeded`` and its calls agree with the recording
    (no divergence, same tools and arguments in order). Otherwise ``replayed_end`` unchanged.

    Returns:
        A copy of ``replayed_end``; when the verdict applies: ``status: failed``, the exit code,
        ``failure`` at the replay's last call, its ``failure_signature`` and
        ``source_verdict: true``.
    """
    end = dict(replayed_end)
    failure = recorded_end.get("failure")
    if (
        not isinstance(failure, Mapping)
        or failure.get("tool") != "workflow"
        or failure.get("error_class") != SOURCE_VERDICT_CLASS
        or end.get("status") != "succeeded"
        or first_difference(recorded_calls, replayed_calls, end.get("divergences") or [])
        is not None
    ):
        return end
    code = episode_exit_code("failed")
    last = max((int(c.get("index", -1)) for c in replayed_calls), default=-1)
    end.update(
        status="failed",
        exit_code=code,
        failure={
            "call_index": last,
            "tool": "workflow",
            "error_class": SOURCE_VERDICT_CLASS,
            "exit_code": code,
        },
        failure_signature=failure_signature(last, "workflow", SOURCE_VERDICT_CLASS, code),
        source_verdict=True,
    )
    return end


FAILURE_MESSAGE_CHARS = 500
"""A failure's error message is cut after this many characters (the trace keeps it whole)."""


def outcome_of(
    end: Mapping[str, Any] | None, calls: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """``{status, failure, failure_signature, output}`` of an end line (``{}`` when None).

    Args:
        end: the end line.
        calls: the episode's call lines: the failing call's error message joins ``failure``
            as ``message`` (cut after `FAILURE_MESSAGE_CHARS`, ``message_chars`` then giving
            its length), so a report names the failure by call, tool, error class and message.
    """
    if end is None:
        return {}
    outcome = {k: end.get(k) for k in ("status", "failure", "output")}
    failure = outcome.get("failure")
    if isinstance(failure, Mapping):
        outcome["failure"] = {**failure, **_failure_message(failure, calls)}
    return dict(outcome, failure_signature=signature_of(end))


def _failure_message(
    failure: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``{"message", "message_chars"?}`` of the call whose error ended the run, or ``{}``."""
    for call in calls:
        error = call.get("error")
        if call.get("index") != failure.get("call_index") or not isinstance(error, Mapping):
            continue
        if error.get("class") != failure.get("error_class"):
            return {}
        message = str(error.get("message") or "")
        if len(message) <= FAILURE_MESSAGE_CHARS:
            return {"message": message}
        return {"message": message[:FAILURE_MESSAGE_CHARS], "message_chars": len(message)}
    return {}


def signature_of(end: Mapping[str, Any]) -> str | None:
    """The end line's ``failure_signature``, computed from ``failure`` when it is absent.

    The schema makes the signature optional: an end line with ``failure`` fields but no
    signature still compares (``runner.trace.format.failure_signature``). None when neither
    is usable.
    """
    recorded = end.get("failure_signature")
    if isinstance(recorded, str):
        return recorded
    failure = end.get("failure")
    if not isinstance(failure, Mapping):
        return None
    index, tool, error_class = (failure.get(k) for k in ("call_index", "tool", "error_class"))
    code = failure.get("exit_code", end.get("exit_code"))
    if isinstance(index, bool) or not isinstance(index, int) or not isinstance(code, int):
        return None
    if not (isinstance(tool, str) and isinstance(error_class, str)):
        return None
    return failure_signature(index, tool, error_class, code)


def verdict(
    recorded_calls: Sequence[Mapping[str, Any]],
    recorded_end: Mapping[str, Any],
    replayed_calls: Sequence[Mapping[str, Any]],
    replayed_end: Mapping[str, Any],
) -> tuple[str, dict[str, Any] | None, str]:
    """Decide ``reproduced`` or ``not_reproduced``.

    Returns:
        ``(outcome, first difference or None, one-line reason)``.
    """
    divergences = list(replayed_end.get("divergences") or [])
    difference = first_difference(recorded_calls, replayed_calls, divergences)
    same_status = recorded_end.get("status") == replayed_end.get("status")
    same_signature = signature_of(recorded_end) == signature_of(replayed_end)
    same_output = recorded_end.get("status") != "succeeded" or canonical_json(
        recorded_end.get("output")
    ) == canonical_json(replayed_end.get("output"))
    if difference is None and same_status and same_signature and same_output:
        if recorded_end.get("status") == "succeeded":
            return "reproduced", None, "the same success, the same calls"
        return "reproduced", None, "the same failure signature, the same calls"
    if not same_status or not same_signature:
        outcome = (
            f"recorded {_status_text(recorded_end)}, replay ended {_status_text(replayed_end)}"
        )
    elif not same_output:
        outcome = "the same status, but another output"
    else:
        outcome = "the same outcome, but the calls differ"
    if difference is None:
        return "not_reproduced", None, outcome
    return "not_reproduced", difference, f"{outcome}; first difference: {difference['summary']}"


def _status_text(end: Mapping[str, Any]) -> str:
    failure = _failure_text(end.get("failure"))
    return f"{end.get('status')} {failure}" if failure else str(end.get("status"))


def _failure_text(failure: Any) -> str:
    if not isinstance(failure, Mapping):
        return ""
    return f"(call #{failure.get('call_index')} {failure.get('tool')} {failure.get('error_class')})"
