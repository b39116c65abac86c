"""The task file: JSONL, one task a line (SPEC.md "Task file").

Each line is ``{"task_id", "input": {...}, "clock_start"?, "observations"?: [call records],
"expected"?: {"output"?, "output_contains"?, "tool_calls"?: [{"tool", "args"?}]},
"recorded_output"?: any JSON}`` (``output_contains``: a string, or a list of strings that must
all be in the output; ``recorded_output``: what the recorded run answered, kept by ``tasks
extract`` for the user to write ``expected`` from, never graded).

Invariants:
- a bad line never stops the others from loading: it becomes an `InputError` naming the file,
  the 1-based line number and the field, collected in `TaskFile.errors`;
- unknown keys are errors (a typo is never silently ignored), and so are duplicate keys,
  NaN and infinities (a trace could not record them as they ran);
- task ids follow `runner.domain.ids` (no ``.``/``..``, no separators, no case-insensitive
  collisions within one file);
- ``clock_start`` is normalised to epoch seconds (float); an ISO-8601 string without a zone
  is UTC.

What each command does with bad lines (one decision, SPEC.md: bad lines are reported with their
line number and the others still load):
- ``submit`` runs every task of the file, so a bad line is an input error (exit 2) before
  anything starts: the plan would silently miss a task otherwise;
- ``run`` and ``record`` run one task (``--task ID``): each bad line is printed on stderr as a
  warning naming file and line, and the asked task runs when *its* line loaded (exit as the run
  goes). When it did not load, `TaskFile.get` fails (exit 2) and says which lines were
  rejected, so a task on an unreadable line is never reported as merely unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet, validate_id
from runner.errors import InputError
from runner.inputfile import read_input
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads

_TASK_KEYS = frozenset(
    {"task_id", "input", "clock_start", "observations", "expected", "recorded_output"}
)
_OBSERVATION_KEYS = frozenset(
    {"tool", "args", "body", "body_encoding", "truncated", "original_length", "sha256", "error"}
)
_EXPECTED_KEYS = frozenset({"output", "output_contains", "tool_calls"})
MAX_OUTPUT_CONTAINS = 1000
"""The most strings one ``expected.output_contains`` list may hold."""


@dataclass(frozen=True)
class Task:
    """One task.

    Attributes:
        task_id: the validated id.
        input: the task input (``${task.x}`` in a workflow means ``input["x"]``).
        clock_start: epoch seconds the run's clock starts at, or None (the runner's default).
        observations: recorded call records ``{tool, args, body, body_encoding, truncated?,
            error?}`` serving ``read`` tools, in file order.
        expected: ``{output?, output_contains?, tool_calls?}`` or None.
        line: 1-based line number in the file.
        recorded_output: the output of the run the task was extracted from (reference only:
            no judge reads it), or None.

    """

    task_id: str
    input: Mapping[str, Any]
    clock_start: float | None = None
    observations: tuple[Mapping[str, Any], ...] = ()
    expected: Mapping[str, Any] | None = None
    line: int = 0
    recorded_output: Any = None

    def record(self) -> dict[str, Any]:
        """Return the task as a JSON object (a task line, ``clock_start`` normalised)."""
        out: dict[str, Any] = {"task_id": self.task_id, "input": dict(self.input)}
        if self.clock_start is not None:
            out["clock_start"] = self.clock_start
        out["observations"] = [dict(o) for o in self.observations]
        if self.expected is not None:
            out["expected"] = dict(self.expected)
        if self.recorded_output is not None:
            out["recorded_output"] = self.recorded_output
        return out


@dataclass
class TaskFile:
    """A loaded task file: the good tasks by id and one error per bad line.

    Attributes:
        path: the file.
        tasks: valid tasks keyed by task id, in file order.
        errors: one `InputError` per rejected line (file, line and field named).

    """

    path: Path
    tasks: dict[str, Task] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)

    def get(self, task_id: str) -> Task:
        """Return the task with this id.

        Raises:
            InputError: no valid task has this id (the message says whether a line with that
                id was rejected, and why).

        """
        task = self.tasks.get(task_id)
        if task is not None:
            return task
        for error in self.errors:
            if error.fields.get("task_id") == task_id:
                raise InputError(f"task {task_id!r} is invalid: {error}", file=str(self.path))
        known = ", ".join(list(self.tasks)[:10]) or "none"
        rejected = ""
        if self.errors:  # the task may be on a line that could not be read
            lines = ", ".join(str(e.fields.get("line")) for e in self.errors[:10])
            rejected = f"; {len(self.errors)} line(s) could not be read (line {lines})"
        raise InputError(
            f"no task {task_id!r} (valid tasks: {known}){rejected}", file=str(self.path)
        )


def parse_clock_start(value: Any) -> float:
    """Epoch seconds from a number or an ISO-8601 string (no zone means UTC).

    Raises:
        ValueError: not a finite number, a boolean, or an unparsable string.

    """
    if isinstance(value, bool):
        raise ValueError("must be epoch seconds or an ISO-8601 string, not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 date-time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise ValueError(f"must be epoch seconds or an ISO-8601 string, not {type(value).__name__}")


def _check_observation(obs: Any, where: str) -> None:
    if not isinstance(obs, dict):
        raise _Bad(where, "must be an object (a call record)")
    unknown = sorted(set(obs) - _OBSERVATION_KEYS)
    if unknown:
        raise _Bad(f"{where}.{unknown[0]}", "unknown key")
    if not isinstance(obs.get("tool"), str) or not obs["tool"]:
        raise _Bad(f"{where}.tool", "required, a tool id string")
    if not isinstance(obs.get("args", {}), dict):
        raise _Bad(f"{where}.args", "must be an object")
    if "body" in obs and obs["body"] is not None and not isinstance(obs["body"], str):
        raise _Bad(f"{where}.body", "must be a string (the raw body) or null")
    if obs.get("body_encoding", "text") not in ("text", "base64"):
        raise _Bad(f"{where}.body_encoding", "must be 'text' or 'base64'")
    if "body" not in obs and "error" not in obs:
        raise _Bad(where, "needs a 'body' or an 'error'")
    error = obs.get("error")
    if error is not None and (
        not isinstance(error, dict)
        or not isinstance(error.get("class"), str)
        or not isinstance(error.get("message", ""), str)
    ):
        raise _Bad(f"{where}.error", "must be {class: str, message: str}")


def _check_expected(expected: Any) -> None:
    if not isinstance(expected, dict):
        raise _Bad("expected", "must be an object")
    unknown = sorted(set(expected) - _EXPECTED_KEYS)
    if unknown:
        raise _Bad(f"expected.{unknown[0]}", "unknown key")
    contains = expected.get("output_contains", "")
    if isinstance(contains, list):  # every one of them must be in the output (the rubric)
        if not contains or len(contains) > MAX_OUTPUT_CONTAINS:
            raise _Bad(
                "expected.output_contains",
                f"a list must hold 1 to {MAX_OUTPUT_CONTAINS} strings",
            )
        for i, needle in enumerate(contains):
            if not isinstance(needle, str):
                raise _Bad(f"expected.output_contains[{i}]", "must be a string")
    elif not isinstance(contains, str):
        raise _Bad("expected.output_contains", "must be a string or a list of strings")
    calls = expected.get("tool_calls", [])
    if not isinstance(calls, list):
        raise _Bad("expected.tool_calls", "must be a list")
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
            raise _Bad(f"expected.tool_calls[{i}]", "must be {tool: str, args?: object}")
        if set(call) - {"tool", "args"}:
            raise _Bad(
                f"expected.tool_calls[{i}].{sorted(set(call) - {'tool', 'args'})[0]}", "unknown key"
            )
        if not isinstance(call.get("args", {}), dict):
            raise _Bad(f"expected.tool_calls[{i}].args", "must be an object")


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def parse_task(record: Any, *, file: str = "<tasks>", line: int = 0) -> Task:
    """Validate one decoded task line.

    Raises:
        InputError: naming ``file``, ``line`` and the offending field; ``fields["task_id"]``
            holds the task id when the line had a string one.

    """
    task_id = record.get("task_id") if isinstance(record, dict) else None
    tid = task_id if isinstance(task_id, str) else None
    try:
        if not isinstance(record, dict):
            raise _Bad("task", f"a task line must be a JSON object, not {type(record).__name__}")
        unknown = sorted(set(record) - _TASK_KEYS)
        if unknown:
            raise _Bad(
                unknown[0],
                "unknown key (expected task_id, input, clock_start, observations, expected,"
                " recorded_output)",
            )
        if "task_id" not in record:
            raise _Bad("task_id", "required")
        validate_id(record["task_id"], kind="task id", file=file, line=line, field="task_id")
        if not isinstance(record.get("input"), dict):
            raise _Bad("input", "required, an object")
        clock: float | None = None
        if record.get("clock_start") is not None:
            try:
                clock = parse_clock_start(record["clock_start"])
            except ValueError as exc:
                raise _Bad("clock_start", str(exc)) from None
        observations = record.get("observations") or []
        if not isinstance(observations, list):
            raise _Bad("observations", "must be a list of call records")
        for i, obs in enumerate(observations):
            _check_observation(obs, f"observations[{i}]")
        # a body's encoding defaults to text here, so the call records served from it (and the
        # trace they are written to) carry it as every trace reader requires
        observations = [
            {**obs, "body_encoding": "text"}
            if isinstance(obs.get("body"), str) and "body_encoding" not in obs
            else obs
            for obs in observations
        ]
        expected = record.get("expected")
        if expected is not None:
            _check_expected(expected)
    except _Bad as bad:
        raise InputError(bad.message, file=file, line=line, field=bad.field, task_id=tid) from None
    except InputError as exc:
        exc.fields["task_id"] = tid
        raise
    return Task(
        task_id=record["task_id"],
        input=record["input"],
        clock_start=clock,
        observations=tuple(observations),
        expected=expected,
        line=line,
        recorded_output=record.get("recorded_output"),
    )


def load_tasks(path: Path | str) -> TaskFile:
    """Load a task file; bad lines are collected, the others load.

    Blank lines are skipped. Duplicate ids and ids differing only in case are errors on the
    later line.

    Lines are decoded by the one strict decoder (`runner.trace.strictjson`: no NaN, no duplicate
    keys, nesting at most `runner.trace.strictjson.MAX_DEPTH`); the file is read by the one bounded
    reader (`runner.inputfile`: a regular file of at most ``LIMITS["task file"]`` bytes).

    Raises:
        InputError: the file cannot be read at all (missing, a folder, a FIFO or a device,
            over the size limit).

    """
    path = Path(path)
    name = str(path)
    raw = read_input(path, "task file")  # regular files only, at most LIMITS["task file"]
    result = TaskFile(path=path)
    ids = IdSet("task id")
    for number, line_bytes in enumerate(raw.split(b"\n"), start=1):
        if not line_bytes.strip():
            continue
        try:
            record = strict_loads(line_bytes)
        except StrictJSONError as exc:  # not UTF-8, too deep, NaN, a duplicate key, not JSON
            reason = exc.reason if exc.kind == "utf8" else f"invalid JSON: {exc.detail}"
            if exc.kind == "syntax":  # a task pasted over several lines, most often
                reason += " (a task file is JSON Lines: one whole task a line)"
            result.errors.append(InputError(reason, file=name, line=number, field=exc.field))
            continue
        try:
            task = parse_task(record, file=name, line=number)
            ids.add(task.task_id, f"line {number}")
        except InputError as exc:
            if "file" not in exc.fields:
                exc = InputError(
                    exc.message,
                    file=name,
                    line=number,
                    field="task_id",
                    task_id=record.get("task_id"),
                )
            result.errors.append(exc)
            continue
        result.tasks[task.task_id] = task
    return result
