"""``tasks extract``: recorded runs → shadow-evaluation tasks (the bridge to ``submit``).

For each trace: the task input and the clock start from its ``run`` line; every ``read`` tool
call as an observation (SPEC.md's call record ``{tool, args, body, body_encoding, truncated?,
original_length?, sha256?, error?}``); and, when the run succeeded, ``expected``: the recorded
tool calls in order (``{tool, args}``) and the recorded output kept beside it as
``recorded_output``, for reference only.

The expected answer is not the production output (the rule, and why): a production run that
ended ``succeeded`` only ran to its end; nobody said its answer was right. Made the expected
``output``, it is an answer key in which the version that produced it scores 1.0 and a version
that fixes a wrong answer scores 0: shadow evaluation would rank every fix below the bug it
fixes. So the recorded output is kept as ``recorded_output`` (the rubric never grades it) and
the user writes ``expected.output`` or ``expected.output_contains`` from it where the recorded
answer is known to be right. ``expect_recorded_output`` (``--expect-recorded-output``) takes the
recorded output as ``expected.output`` as before: for a regression suite of runs someone
checked, where "the same answer as production" is the point.

Which traces become tasks: by default only recorded production runs, i.e. purpose ``live``
(``record`` and the importers write it) that were not stopped by a ceiling. A folder of traces
also holds ``replay`` runs (``run``, ``submit``, ``reproduce``) and ``judge`` runs; they are
skipped and counted per reason (``include_all`` takes them too). Two traces of one task id
(case-insensitively) keep the one recorded last (its run line's ``clock.start``; on a tie the
later in the order given): a task recorded again is recorded again because the earlier one was
wrong (a new user's finding: the first was kept, a broken recording with no observations).
The others are listed as duplicates, never renamed.

Invariants: every line written validates with `runner.domain.tasks.parse_task` (it is checked
before the file is written; nothing is written on an error); a raw I/O call (``raw_io: true``)
becomes an observation of its tool-level value (``meta.result``), since shadow serves a read
tool's return value, not its HTTP body.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.domain.ids import collision_key
from runner.domain.tasks import parse_task
from runner.errors import InputError
from runner.trace.format import encode_body
from runner.tracetools.lint import load_well_formed_trace
from runner.tracetools.reader import NO_RESPONSE, CallRecord, Trace

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


def _observed(call: CallRecord) -> bool:
    """A ``read`` call, or an agent SDK's tool recorded without a declared effect class.

    The recorder does not know the policy whose ``map:`` may class such a tool ``read``
    (`runner.sdk.sdktools`; ``meta.sdk.effect_declared`` false): its recorded response is
    kept as an observation, which only a ``read`` tool is ever served from.
    """
    if call.effect == "read":
        return True
    sdk = call.meta.get("sdk") if isinstance(call.meta, dict) else None
    return isinstance(sdk, dict) and sdk.get("effect_declared") is False


def task_of(trace: Trace, task_id: str, *, expect_recorded_output: bool = False) -> dict[str, Any]:
    """The task line of one recorded run (see the module docstring).

    Args:
        trace: the recorded run.
        task_id: its task id.
        expect_recorded_output: a succeeded run's output becomes ``expected.output`` (else it
            is kept as ``recorded_output``, never graded).

    Raises:
        InputError: a ``read`` call recorded with no response at all (no body, no error):
            no observation can serve it, as ``reproduce`` cannot (`Trace.unanswered`; the
            call's line and field named).
    """
    for line, call in trace.unanswered():
        if not call.is_provider_call and call.effect == "read":
            raise InputError(
                NO_RESPONSE.format(index=call.index, tool=call.tool) + " as an observation",
                file=trace.file,
                line=line,
                field="body",
            )
    run = trace.run
    record: dict[str, Any] = {
        "task_id": task_id,
        "input": dict(run.task_input),
        "clock_start": run.clock.start,
        "observations": [
            observation_of(c) for c in trace.calls if not c.is_provider_call and _observed(c)
        ],
    }
    end = trace.end
    if end is not None and end.status == "succeeded":
        expected: dict[str, Any] = {
            "tool_calls": [
                {"tool": c.tool, "args": dict(c.args or {})}
                for c in trace.calls
                if not c.is_provider_call
            ],
        }
        if expect_recorded_output:
            expected = {"output": end.output, **expected}
        elif end.output is not None:
            record["recorded_output"] = end.output
        record["expected"] = expected
    return record


@dataclass
class Extraction:
    """What ``extract_tasks`` wrote and what it left out.

    Attributes:
        tasks: the task records written, in order.
        skipped: reason (``with purpose replay``, ``stopped by a ceiling``, ``cut by a policy
            limit``) -> the traces skipped.
        duplicates: ``(trace, task id, trace kept)`` for each trace of a task id left out.
    """

    tasks: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, list[Path]] = field(default_factory=dict)
    duplicates: list[tuple[Path, str, Path]] = field(default_factory=list)


def skip_reason(trace: Trace) -> str | None:
    """Why a trace is no recorded production run (None: it is one)."""
    if trace.run.purpose != "live":
        return f"with purpose {trace.run.purpose}"
    if trace.end is not None and trace.end.status == "ceiling_reached":
        return "stopped by a ceiling"
    if trace.end is not None and trace.end.status == "limit_exceeded":
        return "cut by a policy limit"  # its calls after the cut were never recorded
    return None


def extract_tasks(
    traces: Sequence[Path],
    output: Path,
    *,
    include_all: bool = False,
    expect_recorded_output: bool = False,
) -> Extraction:
    """Write the tasks of ``traces`` to ``output`` (JSONL, one task a line).

    Args:
        traces: trace files, in order (of two traces of a task id the one recorded last wins).
        output: the task file to write.
        include_all: take every trace, not only recorded production runs.
        expect_recorded_output: a succeeded run's output is the task's ``expected.output``
            (default: kept as ``recorded_output``; the module docstring says why).

    Returns:
        The tasks written, the traces skipped and the duplicates left out.

    Raises:
        InputError: an unreadable or incomplete trace, one with an unknown ``v`` or a field
            `lint` calls malformed (file, line, field named; `load_well_formed_trace`), a
            task that does not validate, or no trace left to take; nothing is written then.
    """
    result = Extraction()
    taken: dict[str, tuple[float, int, Path, Any]] = {}  # task key -> the trace that wins
    for order, path in enumerate(traces):
        trace = load_well_formed_trace(path)  # lint's reader and rules: malformed is invalid
        reason = None if include_all else skip_reason(trace)
        if reason is not None:
            result.skipped.setdefault(reason, []).append(path)
            continue
        key = collision_key(trace.run.task_id)
        mine = (float(trace.run.clock.start), order, path, trace)
        held = taken.get(key)
        if held is None:
            taken[key] = mine
            continue
        newer, older = (mine, held) if mine[:2] > held[:2] else (held, mine)
        taken[key] = newer
        result.duplicates.append((older[2], older[3].run.task_id, newer[2]))
    for _start, _order, path, trace in sorted(taken.values(), key=lambda t: t[1]):
        task = task_of(trace, trace.run.task_id, expect_recorded_output=expect_recorded_output)
        parse_task(json.loads(json.dumps(task)), file=str(path), line=1)
        result.tasks.append(task)
    if not result.tasks:
        skipped = sum(len(paths) for paths in result.skipped.values())
        raise InputError(
            f"no recorded production run among {len(traces)} trace(s) ({skipped} skipped: "
            f"{', '.join(result.skipped)}); pass --all to take them anyway"
        )
    tasks = result.tasks
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
    return result


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
