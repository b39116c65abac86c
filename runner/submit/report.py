"""The report of a submission: grading, per-pair outcomes, pairs not run, spend, exit code.

`grade_job` builds one group per task and repeat from the job's latest episode of each
(variant, task, repeat) (earlier attempts of a resumed job included) and grades them
(`runner.grading.grade`); `build_report` assembles the `JobReport` (``report.json``);
`runner.cli.render.report.render_report` prints it as rich tables and
`runner.cli.render.html` writes it as one HTML file (rendering lives in the CLI only).

Report shape (``report.json``, ``--json``)::

    {"job_id", "status": complete|ceiling_reached|interrupted, "exit_code", "resumed",
     "policy", "plan": {"runs", "formula", ...}, "ceilings": {purpose: {dim: {value, source}}},
     "limits": {name: {value, source}} (per-run limits in effect: policy, setting or default),
     "ceiling_reached": {purpose, limit, ceiling, used, requested, message} | null,
     "runs_by_status": {status: n},
     "pairs": [{variant, task_id, repeat, status, attempt, trace, rate_limit_wait_s?,
                turn_usd?}] (turn_usd: USD of each model turn as charged),
     "not_run": [{variant, task_id, repeat, reason}],
     "stopped_by_ceiling": [{variant, task_id, repeat}],
     "incomplete": [{variant?, task_id, repeat, status, reason}] (runs cut by a ceiling, an
        infrastructure error or an interruption; groups the judge failed on: never scored),
     "spend": {purpose: totals}, "grading": {...} | null,
     "unrecorded": {variant: {"count", "calls": [{task_id, repeat, index, tool, args}]}},
     "scores": {"level", "spread", "methods", "k", "variants": [{"variant", "mean",
        "interval": [low, high], "pass_rate", "pass_interval", ...}]} | null
        (`runner.grading.scores`),
     "gate": {"baseline", "rule", "exit_code", "verdicts": [{"variant", "verdict":
        PASS|FAIL|INCONCLUSIVE, "reason", "borderline", ...}], "flaky", "confirm"?} | null
        (`runner.grading.gate`; ``confirm``: the confirm-on-retry, `runner.submit.confirm`),
     "verdict": {"winner", "leader", "runner_up", "difference", "how_sure", "win_rate",
        "text"} | null (`runner.grading.headline`)}

With ``--baseline``, the gate's exit code joins the job's (worst wins): 1 for a FAIL, 7 for an
INCONCLUSIVE; a job with no scores to compare (nothing graded) is INCONCLUSIVE.

``grading.tasks[].ranking[]`` carries each variant's ``score`` and ``grading.tasks[].detail``
the judge's ``reasons``; ``unrecorded`` counts, per variant, the reads no recording served
(the task's observations had no answer: the call failed ``UnrecordedCall``). Rendering:
`runner.cli.render.report`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import (
    EXIT_CEILING,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    GradingError,
    InputError,
    worst_exit_code,
)
from runner.grading import Group, Result, grade, make_judge, parse_judge
from runner.grading.gate import gate as gate_verdicts
from runner.grading.headline import headline
from runner.hostlog import get_logger
from runner.inputfile import open_input
from runner.ledger import CeilingGuard, Ledger, Reservation, RunRecord
from runner.ledger.records import CUT_SHORT_STATUSES, FINISHED_STATUSES
from runner.providers.factory import provider_for
from runner.providers.metered import StopSignal
from runner.settings import Settings
from runner.submit.jobreport import JobReport
from runner.submit.plan import Plan
from runner.submit.scheduler import PairOutcome
from runner.trace.strictjson import loads as strict_loads
from runner.wire.errors import UnrecordedCall, class_name

if TYPE_CHECKING:
    from runner.grading.tournament import TournamentReport

log = get_logger(__name__)

__all__ = ["build_report", "grade_job", "latest_runs", "write_report"]

# A run a ceiling cut short (``ceiling_reached``), an infrastructure error (``infra_error``) or
# an interruption is not graded: it did not lose, it was stopped (honest partial
# runs). It is listed under ``incomplete`` (and ``stopped_by_ceiling``), its task under
# ``ungraded`` when fewer than two results remain, and every verdict counts it in its
# denominator as an unknown outcome (`runner.grading.uncertainty.count_incomplete`). A run cut
# by a policy limit (``limit_exceeded``) is graded: its own calls or trace passed the limit, as
# a run that times out.
GRADABLE = FINISHED_STATUSES  # an episode that ended on its own terms is graded
INCOMPLETE = CUT_SHORT_STATUSES  # cut short by a ceiling, the infrastructure or an interruption
# The class string traces record for a read no recording served: the qualified name that
# `runner.wire.errors.error_class_name` writes (``runner.wire.errors.UnrecordedCall``).
UNRECORDED = class_name(UnrecordedCall)
# Misses listed per variant (the count is exact; the list shows the first ones).
MAX_LISTED_MISSES = 100


def latest_runs(ledger: Ledger, job_id: str) -> dict[tuple[str, str, int], RunRecord]:
    """The latest replay run of each (variant, task, repeat) of a job."""
    latest: dict[tuple[str, str, int], RunRecord] = {}
    for run in ledger.runs(job_id):
        if run.purpose != "replay":
            continue
        episode = (run.variant, run.task_id, run.repeat)
        if episode not in latest or run.attempt > latest[episode].attempt:
            latest[episode] = run
    return latest


def _records(path: str) -> Iterator[dict[str, Any]]:
    """The lines of a trace the job wrote, one at a time (a trace is never held whole).

    Read through the bounded reader and decoded by the strict decoder (a job folder may be
    anyone's).

    Raises:
        OSError: the file cannot be read.
        InputError: not a regular file, or larger than the trace limit.
        ValueError: a line is not strict JSON, or not an object.
    """
    with open_input(path, "trace") as handle:
        for line in handle:
            if line.strip():
                record = strict_loads(line)
                if not isinstance(record, dict):
                    raise ValueError(f"{path}: a trace line is not a JSON object")
                yield record


def grade_job(
    plan: Plan,
    ledger: Ledger,
    guard: CeilingGuard,
    settings: Settings,
    cwd: Path,
    *,
    confirm_tasks: Collection[str] = (),
) -> Any:
    """Grade every task's group of episodes; judge model calls are charged to ``judge``.

    Args:
        plan: the job's plan (its tasks, repeats, variants, judge, seed).
        ledger: the job's ledger (the latest run of each episode, its trace).
        guard: the judge ceiling's guard.
        settings: host settings (a model judge's endpoint).
        cwd: where a ``module:function`` judge is looked for.
        confirm_tasks: tasks the gate ran once more (`runner.submit.confirm`): their extra
            repeat (index ``plan.repeats``) is graded too; with ``plan.repeats`` 1 the scores
            stay over tasks (a task's score the mean of its episodes).

    Returns:
        The `runner.grading.TournamentReport`.

    Raises:
        InputError: the judge cannot be built (a bad spec or import).
    """
    spec = parse_judge(plan.judge)
    # A model judge asks in the Chat Completions shape: the ``openai`` provider (any
    # OpenAI-compatible endpoint of the settings), built by the provider factory like any model.
    provider = (
        provider_for({"provider": "openai", "name": spec.target}, settings=settings)
        if spec.asks_a_model
        else None
    )
    judge = make_judge(
        spec,
        provider=(lambda request: provider.complete(request, "model")) if provider else None,
        guard=guard,
        prices=plan.policy.prices,
        search_paths=[cwd],
    )
    latest = latest_runs(ledger, plan.job_id)
    groups = []
    for task in plan.tasks:
        extra = 1 if task.task_id in confirm_tasks else 0
        for repeat in range(plan.repeats + extra):
            results = []
            incomplete: dict[str, str] = {}
            for variant in plan.variants:
                run = latest.get((variant.name, task.task_id, repeat))
                if run is None and repeat >= plan.repeats:
                    continue  # a confirm runs only the gated variants: the others have no run
                if run is None or run.status not in GRADABLE or not run.trace_path:
                    incomplete[variant.name] = "not_run" if run is None else run.status
                    continue
                try:
                    result = Result.from_trace(variant.name, _records(run.trace_path))
                except (OSError, ValueError, InputError, GradingError) as exc:
                    log.warning("trace_unreadable", trace=run.trace_path, error=str(exc))
                    incomplete[variant.name] = "unreadable"
                    continue
                results.append(replace(result, status=run.status))
            groups.append(
                Group(
                    task.task_id,
                    tuple(results),
                    expected=task.expected,
                    task_input=task.input,
                    repeat=repeat,
                    incomplete=incomplete,
                )
            )
    try:
        return grade(
            groups,
            judge,
            variants=[v.name for v in plan.variants],
            seed=plan.seed,
            repeats=plan.repeats,
            spread="tasks" if plan.repeats == 1 else None,
        )
    finally:
        close = getattr(provider, "close", None)  # an HTTP provider holds a client
        if callable(close):
            close()


def unrecorded_reads(pairs: Sequence[PairOutcome]) -> dict[str, dict[str, Any]]:
    """Per variant, the calls of its episodes that failed because no recording served them.

    Args:
        pairs: the report's pairs (``variant``, ``task_id``, ``trace``).

    Returns:
        ``{variant: {"count": n, "calls": [{task_id, repeat, index, tool, args}]}}``, only variants
        with at least one such call; ``count`` is exact, ``calls`` the first
        `MAX_LISTED_MISSES`. Traces are read line by line; unreadable ones are skipped (logged).
    """
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        trace = pair.trace
        if not trace:
            continue
        try:
            for record in _records(str(trace)):
                error = record.get("error")
                if record.get("type") != "call" or not isinstance(error, dict):
                    continue
                if error.get("class") != UNRECORDED:
                    continue
                entry = out.setdefault(pair.variant, {"count": 0, "calls": []})
                entry["count"] += 1
                if len(entry["calls"]) < MAX_LISTED_MISSES:
                    entry["calls"].append(
                        {
                            "task_id": pair.task_id,
                            "repeat": pair.repeat,
                            "index": record.get("index"),
                            "tool": record.get("tool"),
                            "args": record.get("args"),
                        }
                    )
        except (OSError, ValueError, InputError) as exc:
            log.warning("trace_unreadable", trace=trace, error=str(exc))
            continue
    return out


def build_report(
    plan: Plan,
    ledger: Ledger,
    outcomes: Sequence[PairOutcome],
    *,
    skipped: Collection[tuple[str, str, int]],
    stop: StopSignal,
    interrupted: bool,
    grading: TournamentReport | None,
    resumed: bool,
    waits: Mapping[str, float] | None = None,
    confirm: Mapping[str, Any] | None = None,
) -> JobReport:
    """Assemble the report and compute the exit code (SPEC.md worst-wins).

    ``waits`` (run key -> seconds) is each run of this session's rate-limit wait
    (``rate_limit_wait_s`` on its pair, and their sum on the report). Each pair that ran
    carries the USD of its model turns as the ledger charged them (``turn_usd``), so that
    nothing that shows the report opens the ledger. ``confirm``: what the gate's
    confirm-on-retry ran and changed (`runner.submit.confirm.confirm_record`), kept as the
    gate's ``confirm``; ``grading`` is then the grading of the combined data.
    """
    waits = waits or {}
    latest = latest_runs(ledger, plan.job_id)
    turn_usd = usd_by_run_key(ledger.charges(plan.job_id))
    session = {(o.variant, o.task_id, o.repeat): o for o in outcomes}
    pairs: list[PairOutcome] = []
    not_run: list[dict[str, Any]] = []
    stopped: list[dict[str, Any]] = []
    incomplete: list[dict[str, Any]] = []
    by_status: dict[str, int] = {}
    for episode in plan.episodes:
        variant, task_id, repeat = episode
        where = {"variant": variant, "task_id": task_id, "repeat": repeat}
        run = latest.get(episode)
        outcome = session.get(episode)
        dispatched = outcome is not None and outcome.key != ""
        if run is not None and (dispatched or episode in skipped):
            status = run.status
            waited = waits.get(outcome.key) if outcome is not None else None
            pairs.append(
                PairOutcome(
                    variant,
                    task_id,
                    repeat,
                    status=status,
                    attempt=run.attempt,
                    key=run.key,
                    trace=run.trace_path,
                    rate_limit_wait_s=round(waited, 3) if waited is not None else None,
                    turn_usd=tuple(turn_usd.get(run.key, ())),
                )
            )
            if status == "ceiling_reached":
                stopped.append(where)
            if status in INCOMPLETE:
                why = (outcome.reason if outcome is not None else None) or _run_reason(run)
                incomplete.append({**where, "status": status, "reason": why})
        else:
            status = "not_run"
            reason = (outcome.reason if outcome else None) or stop.message or "not started"
            if stop.reason and reason == f"{stop.reason}: {stop.message}":
                reason = stop.message  # "interrupted (Ctrl-C)", "replay ceiling reached: ..."
            pairs.append(PairOutcome(variant, task_id, repeat, status=status, reason=reason))
            not_run.append({**where, "reason": reason})
        by_status[status] = by_status.get(status, 0) + 1
    grading_data = grading.to_dict() if grading is not None else None
    for group in grading_data["ungraded"] if grading_data is not None else ():
        if group.get("reason") in ("judge_error", "ceiling_reached"):  # the judge's failure
            incomplete.append(
                {
                    "task_id": group["task_id"],
                    "repeat": group.get("repeat", 0),
                    "status": "judge_error"
                    if group["reason"] == "judge_error"
                    else "judge_ceiling_reached",
                    "reason": group.get("message") or group["reason"],
                }
            )
    ceiling = None
    if stop.reason == "ceiling_reached":
        ceiling = {**stop.fields, "message": stop.message}
    elif grading is not None and grading.ceiling_reached:
        ceiling = dict(grading.ceiling_reached)
    codes = [EXIT_OK]
    if interrupted:
        codes.append(EXIT_INTERRUPTED)
    if by_status.get("infra_error"):
        codes.append(EXIT_INFRA)
    if ceiling is not None or stopped or (not_run and not interrupted):
        codes.append(EXIT_CEILING)
    scores = grading.scores if grading is not None else None
    gate = None
    if plan.baseline is not None:
        gate = gate_verdicts(scores or _unscored(plan), plan.baseline)
        if confirm is not None:
            gate["confirm"] = dict(confirm)
        codes.append(int(gate["exit_code"]))
    exit_code = worst_exit_code(*codes)
    status = (
        "interrupted"
        if interrupted
        else "ceiling_reached"
        if exit_code == EXIT_CEILING or ceiling is not None
        else "complete"
    )
    plan_json = plan.to_json()
    return JobReport(
        job_id=plan.job_id,
        status=status,
        exit_code=exit_code,
        resumed=resumed,
        policy=plan_json["policy"],
        plan={
            k: plan_json[k]
            for k in (
                "runs",
                "repeats",
                "seed",
                "formula",
                "tasks",
                "variants",
                "judge",
                "concurrency",
                "backend",
                "estimate",
            )
        },
        ceilings=plan_json["ceilings"],
        limits=plan_json.get("limits") or {},
        ceiling_reached=ceiling,
        runs_by_status=dict(sorted(by_status.items())),
        pairs=tuple(pairs),
        not_run=tuple(not_run),
        stopped_by_ceiling=tuple(stopped),
        incomplete=tuple(incomplete),
        spend={p: t.to_dict() for p, t in ledger.totals(plan.job_id).items()},
        rate_limit_wait_s=round(sum(waits.values()), 3),
        grading=grading_data,
        unrecorded=unrecorded_reads(pairs),
        scores=scores,
        gate=gate,
        verdict=_verdict(grading),
    )


def _verdict(grading: TournamentReport | None) -> dict[str, Any] | None:
    """Who wins, by how much, how sure (`runner.grading.headline`); None when not graded."""
    if grading is None:
        return None
    return headline(
        grading.scores,
        grading.verdicts,
        [s.variant for s in grading.standings],
        (grading.uncertainty or {}).get("win_rates"),
    )


def _unscored(plan: Plan) -> dict[str, Any]:
    """A scores block with nothing scored (the job was not graded): every gate INCONCLUSIVE."""
    return {"variants": [{"variant": v.name, "mean": None} for v in plan.variants]}


def usd_by_run_key(charges: Sequence[Reservation]) -> dict[str, list[float | None]]:
    """Per run key, the USD of each settled model call in order (the ledger's charges)."""
    out: dict[str, list[float | None]] = {}
    for charge in charges:
        if charge.kind != "model_call" or not charge.run_key:
            continue
        usd = charge.actual.usd if charge.actual is not None else None
        out.setdefault(charge.run_key, []).append(usd)
    return out


def _run_reason(run: RunRecord) -> str | None:
    """The reason an earlier session's run ended as it did, from its trace's end line."""
    if not run.trace_path:
        return None
    try:
        for record in _records(run.trace_path):
            if record.get("type") == "end":
                reason = record.get("reason")
                return str(reason)[:500] if reason else None
    except (OSError, ValueError, InputError) as exc:
        log.warning("trace_unreadable", trace=run.trace_path, error=str(exc))
    return None


def write_report(folder: Path, report: JobReport) -> Path:
    """Write ``report.json`` into the job folder (atomically); return its path."""
    path = folder / "report.json"
    tmp = folder / "report.json.tmp"
    tmp.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)
    return path
