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

`environment_diff` lists what changed between the recorded and the replayed environment
manifest: python, platform, tool schema hashes, workflow hash, model ids, and the packages that
matter (on both sides with another version, or imported by the tool modules); the many packages
only one side has (a host virtualenv against a sandbox image) are one summary line.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from runner.sdk import canonical_json
from runner.trace.format import episode_exit_code, failure_signature

SOURCE_VERDICT_CLASS = "task_failed"

_MESSAGE_DIFF = re.compile(r"first differing message index (\d+): (.*)$", re.S)
_SHOW = 300
_NON_ALNUM = re.compile(r"[-_.]+")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 3] + "..."


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
            f"{_short(found.group(2))}"
        )
    else:
        entry["summary"] = f"{call.get('tool')} call #{call.get('index')}: {_short(message)}"
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
        entry["summary"] = f"call #{index} {note.get('tool')}: {_short(entry['message'])}"
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


def outcome_of(end: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{status, failure, failure_signature, output}`` of an end line (``{}`` when None)."""
    if end is None:
        return {}
    outcome = {k: end.get(k) for k in ("status", "failure", "output")}
    return dict(outcome, failure_signature=signature_of(end))


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


def _model_ids(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(c["model"]) for c in calls if c.get("tool") == "model" and c.get("model")})


def environment_diff(
    recorded_env: Mapping[str, Any],
    replayed_env: Mapping[str, Any],
    recorded_workflow_hash: str,
    replayed_workflow_hash: str,
    recorded_calls: Sequence[Mapping[str, Any]],
    replayed_calls: Sequence[Mapping[str, Any]],
    imports: Collection[str] = (),
) -> list[dict[str, Any]]:
    """What differs between the two environment manifests.

    Args:
        recorded_env: the recording's environment manifest.
        replayed_env: the replay's.
        recorded_workflow_hash: the recorded workflow's content hash.
        replayed_workflow_hash: the replayed one's.
        recorded_calls: the recording's call records (model ids).
        replayed_calls: the replay's.
        imports: distribution or import names the tool modules import (`packages_diff`).

    Returns:
        ``[{field, recorded, now}]`` for python, platform, workflow hash, model ids, each tool
        schema hash that changed (``tools.<id>``), packages that matter (``packages.<name>``)
        and one ``packages`` line summarising the rest (`packages_diff`).
    """
    diff: list[dict[str, Any]] = []
    for field in ("python", "platform"):
        if recorded_env.get(field) != replayed_env.get(field):
            diff.append(
                {
                    "field": field,
                    "recorded": recorded_env.get(field),
                    "now": replayed_env.get(field),
                }
            )
    if recorded_workflow_hash != replayed_workflow_hash:
        diff.append(
            {
                "field": "workflow.hash",
                "recorded": recorded_workflow_hash,
                "now": replayed_workflow_hash,
            }
        )
    models_then, models_now = _model_ids(recorded_calls), _model_ids(replayed_calls)
    if models_then != models_now:
        diff.append({"field": "model", "recorded": models_then, "now": models_now})
    tools_then = recorded_env.get("tools") or {}
    tools_now = replayed_env.get("tools") or {}
    for tool_id in sorted(set(tools_then) | set(tools_now)):
        if tools_then.get(tool_id) != tools_now.get(tool_id):
            diff.append(
                {
                    "field": f"tools.{tool_id}",
                    "recorded": tools_then.get(tool_id),
                    "now": tools_now.get(tool_id),
                }
            )
    diff.extend(packages_diff(recorded_env.get("packages"), replayed_env.get("packages"), imports))
    return diff


def normalise_package(name: str) -> str:
    """PEP 503 form of a package or import name: ``Pydantic_Settings`` is ``pydantic-settings``."""
    return _NON_ALNUM.sub("-", name).lower()


def packages_diff(
    recorded: Mapping[str, Any] | None,
    replayed: Mapping[str, Any] | None,
    imports: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The packages part of the environment diff: what matters named, the rest in one line.

    A recording made on a host (its virtualenv) and a replay in a sandbox image list very
    different package sets; most of that says nothing about the run. Named one by one
    (``packages.<name>``, with ``why``): a package on both sides whose version differs, and a
    package the tool modules import (``imports``) that is missing on one side or differs.
    Everything else (only on one side, not imported by the tools) is counted in one ``packages``
    entry with a ``summary`` line. Names compare in PEP 503 form (``pydantic_settings`` and
    ``pydantic-settings`` are one package).

    Args:
        recorded: the recording's ``{name: version}``.
        replayed: the replay's ``{name: version}``.
        imports: distribution or import names of the modules the tool modules import.
    """
    then = {normalise_package(k): (k, v) for k, v in (recorded or {}).items()}
    now = {normalise_package(k): (k, v) for k, v in (replayed or {}).items()}
    wanted = {normalise_package(i) for i in imports}
    diff: list[dict[str, Any]] = []
    only_then = only_now = 0
    for key in sorted(set(then) | set(now)):
        old, new = then.get(key), now.get(key)
        if old is not None and new is not None and old[1] == new[1]:
            continue
        if key in wanted:
            why = "imported by the tools"
        elif old is not None and new is not None:
            why = "on both sides"
        else:
            only_then += 1 if new is None else 0
            only_now += 1 if old is None else 0
            continue
        name = (old or new or (key, None))[0]
        diff.append(
            {
                "field": f"packages.{name}",
                "recorded": old[1] if old else None,
                "now": new[1] if new else None,
                "why": why,
            }
        )
    if only_then or only_now:
        diff.append(
            {
                "field": "packages",
                "recorded": f"{len(then)} packages",
                "now": f"{len(now)} packages",
                "recorded_count": len(then),
                "now_count": len(now),
                "only_recorded": only_then,
                "only_now": only_now,
                "summary": (
                    f"{only_then} only in the recording, {only_now} only in the replay; none of"
                    " them imported by the tool modules"
                ),
            }
        )
    return diff
