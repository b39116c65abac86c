"""An anchored fork's anchor: a recorded trace, K, its prefix and the task it forks.

Shared by ``reproduce --fork-at`` (`runner.reproduce.fork`) and ``submit --anchor``
(`runner.submit`). **K** is the number of recorded calls replayed: the trace's calls with index
``0 .. K-1`` (the trace's own 0-based ``index``, model, simulated-user and tool calls counted
together, as every trace line and every reproduce message numbers them) are the prefix; the
call with index K is the first that runs fresh. K runs from 1 to the trace's number of recorded
calls N (K = N replays the whole recording, its failing call included).

The fork's task is the task ``tasks extract`` would write for the trace
(`runner.tracetools.tasks_extract.task_of`: its input, clock start and its recorded ``read``
calls as observations, which serve the fresh part's reads), and a fork is graded like an episode
of that task, against its expectations (`Anchor.expected_from` says where they come from):

- a task file given with the anchor (``--tasks FILE``): the ``expected`` of the task with the
  trace's task id there (the answer key the user wrote; the id must be in the file);
- else the recorded run's own, when it succeeded: its tool calls in order (``tasks extract``'s
  rule: the recorded output is kept as ``recorded_output`` and never graded, since nobody said
  production's answer was right, and a fix of a wrong answer would score 0 against it);
- else none: a failed recording is no answer key. The fork is then not graded, and its report
  says so; a rubric without expectations would score every success 1.00.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.domain.tasks import Task, load_tasks, parse_task
from runner.errors import InputError, ReplayRefused
from runner.tracetools.reader import NO_RESPONSE, Trace, read_trace
from runner.tracetools.tasks_extract import task_of

__all__ = ["Anchor", "check_fork_at", "load_anchor", "prefix_problems"]


@dataclass(frozen=True)
class Anchor:
    """A trace to fork and where.

    Attributes:
        path: the trace file.
        fork_at: K.
        trace: the whole trace as read.
        prefix: the ``call`` records with index below K, as JSON objects, in order.
        task: the task the fork runs (``expected``: see the module docstring).
        expected_from: where ``task.expected`` comes from (``task file PATH``, ``the recorded
            run's calls``), or None when the task has no expectations.
    """

    path: Path
    fork_at: int
    trace: Trace
    prefix: tuple[dict[str, Any], ...]
    task: Task
    expected_from: str | None = None

    @property
    def prefix_trace(self) -> Trace:
        """The trace with only its prefix's calls (what refusals are checked on)."""
        kept = [
            (call, line)
            for call, line in zip(self.trace.calls, self.trace.call_lines, strict=True)
            if call.index < self.fork_at
        ]
        return replace(
            self.trace,
            calls=tuple(call for call, _ in kept),
            call_lines=tuple(line for _, line in kept),
        )

    def to_json(self) -> dict[str, Any]:
        """``{trace, fork_at, task_id, prefix_calls, expected_from}`` (plan and report)."""
        return {
            "trace": str(self.path),
            "fork_at": self.fork_at,
            "task_id": self.task.task_id,
            "prefix_calls": len(self.prefix),
            "expected_from": self.expected_from,
        }

    def expectations_text(self) -> str:
        """How the fork is graded, in words (the plan and the fork's report say it)."""
        if self.expected_from is not None:
            return f"graded against task {self.task.task_id}'s expectations ({self.expected_from})"
        return (
            f"not graded: task {self.task.task_id} has no expectations to grade against (the"
            " recorded run did not succeed, or called no tool; --tasks FILE takes them from a"
            " task file)"
        )


def check_fork_at(trace: Trace, fork_at: int) -> None:
    """Refuse a K outside ``1 .. N`` (N: the trace's recorded calls).

    Raises:
        InputError: K out of range (field ``--fork-at``, the trace named).
    """
    total = len(trace.calls)
    if total == 0:
        raise InputError(
            "the trace has no recorded calls: there is no prefix to fork from",
            file=trace.file,
            field="--fork-at",
        )
    if not 1 <= fork_at <= total:
        raise InputError(
            f"{fork_at} is out of range: K counts the recorded calls replayed (model and tool"
            f" calls together, trace indices 0..K-1); this trace has {total}, so K is 1 to"
            f" {total}",
            file=trace.file,
            field="--fork-at",
        )


def prefix_problems(trace: Trace, fork_at: int) -> list[str]:
    """Why the prefix (calls below ``fork_at``) cannot be served.

    Returns:
        The trace's problems, and its prefix calls recorded without any response
        (`Trace.unanswered`); empty: it can be served.
    """
    reasons = [f"{p.file}:{p.line}: {p.message}" for p in trace.problems]
    for _line, call in trace.unanswered():
        if call.index < fork_at:
            reasons.append(NO_RESPONSE.format(index=call.index, tool=call.tool))
    return reasons


def load_anchor(path: Path, fork_at: int, *, tasks: Path | None = None) -> Anchor:
    """Read the trace at ``path`` and build the anchor at K = ``fork_at``.

    Args:
        path: the anchor trace.
        fork_at: K.
        tasks: a task file holding the trace's task with the ``expected`` to grade against
            (module docstring); None: the recording's own, if any.

    Raises:
        TraceVersionError: the trace's ``v`` is unknown (reproduce: refused).
        InputError: the trace is unreadable, K is out of range, or a recorded read has no
            response (no observation can serve it); ``tasks`` is unreadable, lacks the task
            or its task has no ``expected`` block.
        ReplayRefused: the prefix cannot be served (`prefix_problems`; exit 5).
    """
    trace = read_trace(path)
    check_fork_at(trace, fork_at)
    problems = prefix_problems(trace, fork_at)
    if problems:
        raise ReplayRefused(
            f"{path}: the prefix cannot be served: " + "; ".join(problems), problems=problems
        )
    record = task_of(trace, trace.run.task_id)
    if not (record.get("expected") or {}).get("tool_calls"):  # no call: nothing to match
        record.pop("expected", None)
    expected_from = "the recorded run's calls" if "expected" in record else None
    if tasks is not None:
        keyed = load_tasks(tasks).get(trace.run.task_id)
        if keyed.expected is None:
            raise InputError(
                f"task {keyed.task_id!r} has no expected block to grade the fork against",
                file=str(tasks),
                line=keyed.line,
                field="expected",
            )
        record["expected"] = dict(keyed.expected)
        expected_from = f"task file {tasks}"
    task = parse_task(record, file=str(path), line=1)
    prefix = tuple(c.to_json() for c in trace.calls if c.index < fork_at)
    return Anchor(path, fork_at, trace, prefix, task, expected_from)
