"""Serving recorded calls: task observations (shadow) and trace call records (reproduce).

Standard library only, Python 3.9+.

Shadow (`ObservationStore`): a call matches an observation on tool id plus canonical arguments
(key order ignored; values, list order and extra keys significant). Repeated identical calls
consume the matching observations in order. A miss raises `UnrecordedCall` naming the tool, the
arguments and the nearest recorded call with the fields that differ; past the recorded count
the message says "matched, but all N recorded occurrences already used". Nothing goes live.

Reproduce (`TraceStore`): the call at index *i* is served by the trace's record with index *i*,
which must be of the same tool with the same arguments (strict); anything else is an
`UnrecordedCall` carrying the index.

`value_of` turns a served record into the tool's return value: the body parsed as JSON (a body
that is not JSON is returned as text), or the recorded error raised again as `RecordedError`
carrying the recorded class.
"""

import json
from typing import Any, Dict, List, Optional, Tuple

from runner.errors import ReplayDivergence
from runner.sdk import canonical_json
from runner.trace.format import decode_body
from runner.wire.errors import RecordedError, UnrecordedCall

_SHOW = 200


def _show(value: Any) -> str:
    try:
        text = canonical_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOW else text[:_SHOW] + "..."


def canonical_args(args: Any) -> str:
    """Canonical JSON of call arguments (the matching key)."""
    try:
        return canonical_json(args)
    except (TypeError, ValueError):
        return repr(args)


def differing_fields(call_args: Any, recorded_args: Any) -> List[str]:
    """Human-readable differences between a call's arguments and a recorded call's.

    Returns:
        One entry per differing top-level key (``"k: 1 (call) != 2 (recorded)"``,
        ``"k: only in the call"``, ``"k: only in the recording"``), or one entry for the whole
        value when either side is not an object.
    """
    if not isinstance(call_args, dict) or not isinstance(recorded_args, dict):
        if canonical_args(call_args) == canonical_args(recorded_args):
            return []
        return [
            "arguments: {} (call) != {} (recorded)".format(_show(call_args), _show(recorded_args))
        ]
    out = []
    for key in sorted(set(call_args) | set(recorded_args)):
        if key not in recorded_args:
            out.append("{}: only in the call".format(key))
        elif key not in call_args:
            out.append("{}: only in the recording".format(key))
        elif canonical_args(call_args[key]) != canonical_args(recorded_args[key]):
            out.append(
                "{}: {} (call) != {} (recorded)".format(
                    key, _show(call_args[key]), _show(recorded_args[key])
                )
            )
    return out


def value_of(record: Dict[str, Any]) -> Any:
    """The return value a recorded call serves.

    Raises:
        RecordedError: the recording is an error (its class and message are kept).
        ReplayDivergence: the recorded body was truncated or cannot be decoded, so it cannot
            be served faithfully.
    """
    error = record.get("error")
    if isinstance(error, dict):
        raise RecordedError(str(error.get("class") or "Exception"), str(error.get("message") or ""))
    if record.get("truncated"):
        raise ReplayDivergence(
            "recorded body of tool {!r} is truncated ({} bytes originally): "
            "it cannot be served".format(record.get("tool"), record.get("original_length"))
        )
    try:
        raw = decode_body(record)
    except ValueError as exc:
        raise ReplayDivergence(
            "recorded body of tool {!r} cannot be decoded: {}".format(record.get("tool"), exc)
        ) from exc
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return raw.decode("utf-8", "surrogateescape")


class ObservationStore:
    """A task's recorded observations, consumed by matching calls (shadow mode).

    Args:
        observations: the task's ``observations`` (call records ``{tool, args, body, ...}``).
    """

    def __init__(self, observations: Optional[List[Dict[str, Any]]]) -> None:
        self._records = [o for o in (observations or []) if isinstance(o, dict)]
        self._by_key: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for record in self._records:
            key = (str(record.get("tool")), canonical_args(record.get("args", {})))
            self._by_key.setdefault(key, []).append(record)
        self._used: Dict[Tuple[str, str], int] = {}

    def serve(self, tool_id: str, args: Any) -> Dict[str, Any]:
        """The next unused observation matching ``tool_id`` and ``args``.

        Raises:
            UnrecordedCall: no observation matches, or all matching ones were used.
        """
        key = (tool_id, canonical_args(args))
        matches = self._by_key.get(key, [])
        used = self._used.get(key, 0)
        if used < len(matches):
            self._used[key] = used + 1
            return matches[used]
        if matches:
            raise UnrecordedCall(
                "unrecorded call: tool {!r} with arguments {}: matched, but {} already used".format(
                    tool_id,
                    _show(args),
                    "all {} recorded occurrences".format(len(matches))
                    if len(matches) != 1
                    else "its one recorded occurrence",
                ),
                tool_id=tool_id,
                args=args,
                nearest=matches[-1],
                differing=[],
                occurrences=len(matches),
            )
        nearest, differing = self._nearest(tool_id, args)
        if nearest is None:
            others = sorted({str(r.get("tool")) for r in self._records})
            detail = "no recorded call of this tool (recorded tools: {})".format(
                ", ".join(others) if others else "none"
            )
        else:
            detail = "nearest recorded call: {} {}; differs in: {}".format(
                tool_id, _show(nearest.get("args", {})), "; ".join(differing)
            )
        raise UnrecordedCall(
            "unrecorded call: tool {!r} with arguments {}: {}".format(tool_id, _show(args), detail),
            tool_id=tool_id,
            args=args,
            nearest=None if nearest is None else {"tool": tool_id, "args": nearest.get("args")},
            differing=differing,
        )

    def _nearest(self, tool_id: str, args: Any) -> Tuple[Optional[Dict[str, Any]], List[str]]:
        best: Optional[Dict[str, Any]] = None
        best_diff: List[str] = []
        for record in self._records:
            if record.get("tool") != tool_id:
                continue
            diff = differing_fields(args, record.get("args", {}))
            if best is None or len(diff) < len(best_diff):
                best, best_diff = record, diff
        return best, best_diff


class TraceStore:
    """A trace's call records, served by position (reproduce mode).

    Args:
        recorded_calls: the trace's ``call`` records (tool and model calls), in order.
    """

    def __init__(self, recorded_calls: Optional[List[Dict[str, Any]]]) -> None:
        self._by_index: Dict[int, Dict[str, Any]] = {}
        for position, record in enumerate(recorded_calls or []):
            if isinstance(record, dict):
                index = record.get("index")
                self._by_index[index if isinstance(index, int) else position] = record

    def at(self, index: int) -> Optional[Dict[str, Any]]:
        """The record with ``index``, or None."""
        return self._by_index.get(index)

    def clock_at(self, index: int) -> Optional[float]:
        """The clock reading recorded for call ``index``, or None."""
        record = self._by_index.get(index)
        value = record.get("clock") if record else None
        return float(value) if isinstance(value, (int, float)) else None

    def serve(self, index: int, tool_id: str, args: Any) -> Dict[str, Any]:
        """The record of call ``index``, which must be ``tool_id`` with ``args``.

        Raises:
            UnrecordedCall: the trace has no call ``index``, or another tool or other
                arguments there; the message names the index, the tool and the arguments.
        """
        record = self._by_index.get(index)
        if record is None:
            raise UnrecordedCall(
                "unrecorded call #{}: tool {!r} with arguments {}: the trace has no call at "
                "this index".format(index, tool_id, _show(args)),
                tool_id=tool_id,
                args=args,
                index=index,
            )
        if record.get("tool") != tool_id:
            raise UnrecordedCall(
                "unrecorded call #{}: tool {!r} with arguments {}: the trace has tool {!r} at "
                "this index".format(index, tool_id, _show(args), record.get("tool")),
                tool_id=tool_id,
                args=args,
                index=index,
                nearest={"tool": record.get("tool"), "args": record.get("args")},
                differing=["tool"],
            )
        differing = differing_fields(args, record.get("args", {}))
        if differing:
            raise UnrecordedCall(
                "unrecorded call #{}: tool {!r} with arguments {}: the recorded call has "
                "other arguments; differs in: {}".format(
                    index, tool_id, _show(args), "; ".join(differing)
                ),
                tool_id=tool_id,
                args=args,
                index=index,
                nearest={"tool": tool_id, "args": record.get("args")},
                differing=differing,
            )
        return record
