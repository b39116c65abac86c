"""The anchored fork: a recorded prefix replayed strictly, then a new version continues fresh.

``reproduce TRACE --fork-at K --workflow NEW`` answers "would the fixed version have recovered
from this exact state?". **K** is the number of recorded calls replayed (trace indices
``0 .. K-1``, model, simulated-user and tool calls counted together; 1 <= K <= the trace's
number of calls; `runner.tracetools.anchor` holds the rule, shared with ``submit --anchor``).

How one fork runs (one sandbox, the ``shadow`` policy: write tools are denied at load time,
``check``'s rule, and absent from the sandbox's registry):

- the new workflow is loaded and admitted as ``run`` admits it, by the same code
  (`runner.admission.onerun`: the load gate, the engine's limits, its registry described in
  a sandbox) and run as ``run`` runs (one ledger job, ``replay``); a recorded tool of the
  prefix missing from it or with another schema hash refuses the fork (exit 5), as
  reproduce refuses;
- the prefix is served and verified as reproduce does, call by call (the runtime,
  `runner.runtime.replay.calls`, mode ``shadow`` with ``fork_at``): ``read`` tools from the
  trace by position (same tool, same arguments, strict), model and user turns by the replay
  provider outside the meter (same messages, tools and settings,
  `runner.providers.fork.ForkProvider`, put in by `runner.episode.metered_run`), the
  clock readings the trace's. ``pure`` and ``local`` tools execute, as the shadow policy says
  (so the sandbox's scratch state is rebuilt, not skipped), and their result is compared with
  the recording like reproduce compares a ``pure`` tool's. A prefix that diverges stops the
  fork: no later call runs, and the host checks the written prefix against the recording
  (`runner.reproduce.diff.first_difference`) before it believes it;
- from call K on the run is a fresh shadow run: model turns from the new workflow's own
  provider (scripted, or a gateway per its model block, charged under ``replay``), ``read``
  tools from the anchor's recorded read calls as the task's observations
  (`runner.tracetools.tasks_extract.task_of`, the task ``tasks extract`` would write), other
  tools executed in the sandbox;
- the episode is graded like an episode of its task: the ``rubric`` judge
  (`runner.grading.rubric`) against the task's expectations, from ``--tasks FILE`` or the
  recorded run's calls when it succeeded (`runner.tracetools.anchor` says which and why).
  With none (a failed recording and no task file) it is not graded: the report says so, with
  no score, where a rubric without expectations would give every success 1.00.

Outcomes (`FORK_EXIT_OF`): ``recovered`` (0: prefix verified, the fresh part succeeded),
``not_recovered`` (1: prefix verified, the fresh part ended otherwise), ``diverged`` (1: the
prefix differs from the recording before K; the fork did not continue), ``refused`` (5: an
unknown trace version, a prefix that cannot be served, a recorded tool missing or changed),
``infra_error`` (6). K out of range or an unreadable trace is invalid input, raised (exit 2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission.onerun import read_for_one_run
from runner.domain.ids import timestamped_ids
from runner.errors import (
    EXIT_INFRA,
    EXIT_NEGATIVE,
    EXIT_OK,
    EXIT_REFUSED,
    InfrastructureError,
    InputError,
    ReplayRefused,
)
from runner.grading.model import Result
from runner.grading.rubric import NAME as RUBRIC
from runner.grading.rubric import reasons, score
from runner.reproduce.diff import first_difference, outcome_of
from runner.tracetools.anchor import Anchor, load_anchor
from runner.tracetools.reader import Trace, TraceVersionError, read_trace
from runner.tracetools.registrycheck import registry_refusals

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = ["FORK_EXIT_OF", "ForkReport", "fork_trace", "judge_fork"]

FORK_EXIT_OF = {
    "recovered": EXIT_OK,
    "not_recovered": EXIT_NEGATIVE,
    "diverged": EXIT_NEGATIVE,
    "refused": EXIT_REFUSED,
    "infra_error": EXIT_INFRA,
}


@dataclass(frozen=True)
class ForkReport:
    """The result of one anchored fork (also its ``--json`` object).

    Attributes:
        input: the anchor trace as given.
        outcome: one of `FORK_EXIT_OF`'s keys.
        reason: one line saying why.
        fork_at: K, the number of recorded calls replayed (indices ``0 .. K-1``).
        workflow: ``{name, version, content_hash, path}`` of the new version.
        prefix: ``{calls: K, verified: bool, first_difference: {...} | None}``.
        fresh: ``{status, failure, failure_signature, output, calls}`` of the fork's episode
            (``calls``: those at index K and later); None when it did not run.
        grade: ``{judge: "rubric", score, reasons, expected_from}``: ``score`` None and one
            reason saying why when the task has no expectations (``expected_from`` None);
            None when the fork did not complete.
        fork_trace: the fork's own trace file, when it ran.
        refusals: every reason the fork would not start (refused only).
    """

    input: str
    outcome: str
    reason: str
    fork_at: int
    workflow: dict[str, Any] = field(default_factory=dict)
    prefix: dict[str, Any] = field(default_factory=dict)
    fresh: dict[str, Any] | None = None
    grade: dict[str, Any] | None = None
    fork_trace: str | None = None
    refusals: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The outcome's exit code (SPEC.md scheme)."""
        return FORK_EXIT_OF[self.outcome]

    def to_json(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict, ``exit_code`` included."""
        return {**asdict(self), "exit_code": self.exit_code}


def _fresh_part(trace: Trace, fork_at: int) -> dict[str, Any]:
    calls = [c.to_json() for c in trace.calls]
    end = trace.end.to_json() if trace.end is not None else None
    outcome = outcome_of(end, calls)
    outcome["calls"] = [
        {k: c[k] for k in ("index", "tool", "error") if k in c}
        for c in calls
        if isinstance(c.get("index"), int) and c["index"] >= fork_at
    ]
    return outcome


def fork_trace(
    path: Path,
    fork_at: int,
    workflow_path: Path,
    settings: Settings,
    *,
    backend_factory: Any,
    image: str | None = None,
    policy_name: str = "shadow",
    cwd: Path | None = None,
    tasks: Path | None = None,
) -> ForkReport:
    """Fork the recorded run at ``path`` at call K under the workflow ``workflow_path``.

    Args:
        path: the anchor trace (a ``.jsonl`` file).
        fork_at: K (module docstring).
        workflow_path: the new version.
        settings: host settings.
        backend_factory: makes the backend (made after the inputs loaded; closed here).
        image: ``--image``: the sandbox image when the workflow names none (its own ``image``
            wins), else the settings'.
        policy_name: the fresh part's policy (default ``shadow``).
        cwd: where a scripted model module is searched besides the workflow's folder.
        tasks: ``--tasks FILE``: the task file whose task of the trace's id holds the
            expectations to grade against (`runner.tracetools.anchor.load_anchor`).

    Returns:
        The report (an unknown trace version or a prefix that cannot be served: ``refused``).

    Raises:
        InputError: an unreadable trace, K out of range, a bad workflow or policy, a task file
            without the trace's task or its ``expected`` (exit 2).
        IneligibleError: the new workflow calls a denied or unknown tool (exit 3).
    """
    name = str(path)
    try:
        anchor = load_anchor(path, fork_at, tasks=tasks)
    except TraceVersionError as exc:
        return ForkReport(name, "refused", str(exc), fork_at, refusals=[str(exc)])
    except ReplayRefused as exc:
        return _refused(name, fork_at, list(exc.fields.get("problems") or [str(exc)]))
    one = read_for_one_run(
        settings,
        workflow_path,
        policy_name=policy_name,
        image=image,
        exclude=[path] if tasks is None else [path, tasks],  # never in the sandbox's snapshot
        cwd=cwd,
    )
    workflow = one.workflow
    described = {
        "name": workflow.spec.name,
        "version": workflow.spec.version,
        "content_hash": workflow.content_hash,
        "path": str(workflow_path),
    }
    backend = backend_factory()
    try:
        registry = one.admit(backend)
        reasons_ = registry_refusals(anchor.prefix_trace, registry)
        if reasons_:
            return _refused(name, fork_at, reasons_, described)
        prefix = list(anchor.prefix)
        # the workflow's own provider answers behind the prefix's turns (`metered_episode`)
        result = one.run(
            registry,
            anchor.task,
            backend=backend,
            command="fork",
            id_factory=timestamped_ids(prefix="fork"),
            recorded_calls=prefix,
            fork_at=fork_at,
            clock_start=anchor.trace.run.clock.start,
        )
    except InfrastructureError as exc:
        return ForkReport(name, "infra_error", str(exc), fork_at, described)
    finally:
        close = getattr(backend, "close", None)
        if callable(close):
            close()
    return judge_fork(name, prefix, fork_at, described, result.trace_path, anchor=anchor)


def _refused(
    name: str, fork_at: int, reasons_: list[str], described: dict[str, Any] | None = None
) -> ForkReport:
    return ForkReport(
        name,
        "refused",
        "the fork would not start: " + "; ".join(reasons_),
        fork_at,
        described or {},
        refusals=reasons_,
    )


def judge_fork(
    name: str,
    prefix: list[dict[str, Any]],
    fork_at: int,
    described: dict[str, Any],
    fork_trace_path: Path,
    *,
    anchor: Anchor,
) -> ForkReport:
    """The report of a fork that ran: its prefix checked against the recording, then graded.

    Args:
        name: the anchor as given.
        prefix: the anchor's recorded calls with index below K.
        fork_at: K.
        described: the new version (`ForkReport.workflow`).
        fork_trace_path: the fork's own trace.
        anchor: the anchor (its task's expectations grade the fork).

    Returns:
        ``diverged`` when the fork's calls below K differ from ``prefix`` (the first
        difference named), else ``recovered`` / ``not_recovered`` by the fresh part's status,
        graded by the rubric against the task's expectations, or said ungraded without any.
    """
    try:
        ran = read_trace(fork_trace_path)
    except InputError as exc:
        return ForkReport(name, "infra_error", f"the fork's trace is unreadable: {exc}", fork_at)
    calls = [c.to_json() for c in ran.calls]
    end = ran.end.to_json() if ran.end is not None else {}
    notes = [d for d in end.get("divergences") or [] if _below(d.get("index"), fork_at)]
    replayed = [c for c in calls if _below(c.get("index"), fork_at)]
    difference = first_difference(prefix, replayed, notes)
    fresh = _fresh_part(ran, fork_at)
    trace_name = str(fork_trace_path)
    if difference is not None:
        return ForkReport(
            name,
            "diverged",
            f"the prefix diverged before call {fork_at}: {difference['summary']}; the fork did"
            " not continue",
            fork_at,
            described,
            prefix={"calls": fork_at, "verified": False, "first_difference": difference},
            fresh=fresh,
            fork_trace=trace_name,
        )
    result = Result.from_trace(str(described.get("name")), [*calls, {**end, "type": "end"}])
    grade = _grade(result, anchor)
    status = fresh.get("status")
    recovered = status == "succeeded"
    return ForkReport(
        name,
        "recovered" if recovered else "not_recovered",
        f"prefix verified ({fork_at} call{'s' if fork_at != 1 else ''}); the fresh part ended"
        f" {status}",
        fork_at,
        described,
        prefix={"calls": fork_at, "verified": True, "first_difference": None},
        fresh=fresh,
        grade=grade,
        fork_trace=trace_name,
    )


def _grade(result: Result, anchor: Anchor) -> dict[str, Any]:
    """The rubric's grade against the anchor task's expectations, or why there is none."""
    expected = anchor.task.expected
    if not expected:  # no answer key: no score (the rubric would give a success 1.00)
        why = [anchor.expectations_text()]
        return {"judge": RUBRIC, "score": None, "reasons": why, "expected_from": None}
    return {
        "judge": RUBRIC,
        "score": score(result, expected),
        "reasons": reasons(result, expected),
        "expected_from": anchor.expected_from,
    }


def _below(index: Any, fork_at: int) -> bool:
    return isinstance(index, int) and not isinstance(index, bool) and index < fork_at
