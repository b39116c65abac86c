"""``tasks extract``: recorded runs → shadow-evaluation tasks (the bridge to ``submit``).

For each trace: the task input and the clock start from its ``run`` line; every ``read`` tool
call as an observation (SPEC.md's call record ``{tool, args, body, body_encoding, truncated?,
original_length?, sha256?, error?}``); and, when the run succeeded, ``expected``: the recorded
output and the recorded tool calls in order (``{tool, args}``).

Invariants: every line written validates with `runner.domain.tasks.parse_task` (it is checked
before the file is written; nothing is written on an error); a raw I/O call (``raw_io: true``)
becomes an observation of its tool-level value (``meta.result``), since shadow serves a read
tool's return value, not its HTTP body; two traces of one task id give ids ``ID``, ``ID-2``, ...
(case-insensitively distinct).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.domain.ids import collision_key
from runner.domain.tasks import parse_task
from runner.domain.trace import CallRecord, Trace, load_trace
from runner.traceformat import encode_body

_OBSERVATION_BODY = ("body", "body_encoding", "truncated", "original_length", "sha256")


def observation_of(call: CallRecord) -> dict[str, Any]:
    """The observation a recorded ``read`` call becomes."""
    record = call.to_json()
    observation: dict[str, Any] = {"tool": call.tool, "args": dict(call.args or {})}
    meta = record.get("meta")
    result = meta.get("result") if call.raw_io and isinstance(meta, dict) else None
    if isinstance(result, str):
        observation.update(encode_body(result))
    else:
        observation.update({k: record[k] for k in _OBSERVATION_BODY if k in record})
    if call.error is not None:
        observation["error"] = {"class": call.error.class_, "message": call.error.message}
    return observation


def task_of(trace: Trace, task_id: str) -> dict[str, Any]:
    """The task line of one recorded run (see the module docstring)."""
    run = trace.run
    record: dict[str, Any] = {
        "task_id": task_id,
        "input": dict(run.task_input),
        "clock_start": run.clock.start,
        "observations": [
            observation_of(c) for c in trace.calls if not c.is_provider_call and c.effect == "read"
        ],
    }
    end = trace.end
    if end is not None and end.status == "succeeded":
        record["expected"] = {
            "output": end.output,
            "tool_calls": [
                {"tool": c.tool, "args": dict(c.args or {})}
                for c in trace.calls
                if not c.is_provider_call
            ],
        }
    return record


def extract_tasks(traces: Sequence[Path], output: Path) -> list[dict[str, Any]]:
    """Write the tasks of ``traces`` to ``output`` (JSONL, one task a line).

    Returns:
        The task records written, in order.

    Raises:
        InputError: an unreadable or incomplete trace (file, line, field named) or a task
            that does not validate; nothing is written then.
    """
    tasks: list[dict[str, Any]] = []
    used: set[str] = set()
    for path in traces:
        trace = load_trace(path)
        base = trace.run.task_id
        task_id, n = base, 1
        while collision_key(task_id) in used:
            n += 1
            task_id = f"{base}-{n}"
        used.add(collision_key(task_id))
        task = task_of(trace, task_id)
        parse_task(json.loads(json.dumps(task)), file=str(path), line=1)
        tasks.append(task)
    output.parent.mkdir(parents=True, exist_ok=True)
    part = output.with_name(output.name + ".part")
    with open(part, "w", encoding="utf-8") as handle:
        for task in tasks:
            text = json.dumps(task, ensure_ascii=False)
            if not text.isascii() and _has_surrogate(text):
                # a lone surrogate recorded from a sandbox (\udcff in the trace) has no UTF-8
                # form: keep it as the same JSON escape rather than fail half-way
                text = json.dumps(task, ensure_ascii=True)
            handle.write(text + "\n")
    part.replace(output)
    return tasks


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
