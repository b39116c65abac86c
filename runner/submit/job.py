"""``submit``: shadow evaluation of N variants × M tasks, metered, ceilinged and graded.

Sequence (`prepare` then `execute`):

1. Load time, before anything starts: the policy, every variant through the eligibility check
   over its tool modules read from source (`runner.admission.gate.read_gate`:
   nothing of them is imported on the host; any variant it finds ineligible rejects the whole
   submission, exit 3, with no backend call and no ledger row), the tasks, the judge; then the
   `Plan`.
2. The caller prints the plan; ``--dry-run`` stops there (what the reading could not decide
   is left to step 3).
3. The tool snapshot (`runner.tools.snapshot`): the variants' declared tool code and
   data files, copied once; every run of the job mounts it (``--resume`` mounts the job's own
   again, whatever changed in the source files since). The backend is made and each variant's
   registry is described inside a sandbox from the snapshot, then checked again
   (`runner.admission.gate.sandbox_gate`; kept by the snapshot's digest, so a
   resumed job starts no describing sandbox again): the runs use that registry, and an ineligible
   variant still stops everything before a job exists. The job: a ledger row and
   ``<state_dir>/jobs/<job_id>/`` (`runner.submit.jobfolder`; ``job.json``: the options, the
   owner process and the tool snapshot, so ``--resume`` can continue; ``plan.json``;
   ``report.json`` at the end).
4. The reaper removes sandboxes of dead owners and charges their runs the seconds the engine
   recorded (`runner.episode.reaping`); a resumed job's remaining open rows are closed at
   their reservation, marked ``estimated`` (`Ledger.close_orphans`), and its finished pairs
   are skipped.
5. `Scheduler` runs the pairs under the replay ceiling, each sandbox with a deadline from the
   job's budget clock (`runner.submit.budgetclock`); model calls go through
   `MeteredProvider`. Ctrl-C (SIGINT) or SIGTERM stops cleanly: sandboxes killed and removed,
   the job marked ``interrupted``, exit 130.
6. Grading (not after an interruption): every task's episodes form one group for the judge,
   charged to ``judge``; openskill ratings across tasks (`runner.grading.grade`).
7. The report (`runner.submit.report`), and the exit code by SPEC.md's worst-wins rule:
   130 interrupted, 6 an episode ended ``infra_error``, 4 a ceiling stopped a run, a model
   call or the judge, else 0. Episode statuses are data, not exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission import gate as admission
from runner.admission.eligibility import EligibilityReport, WorkflowCheck
from runner.backends.base import Backend
from runner.backends.capacity import starts_at_once
from runner.domain.ids import timestamped_ids
from runner.domain.tasks import Task, load_tasks
from runner.episode.images import ImageUse, image_source, require_images, workflow_image_source
from runner.episode.limits import check_engine_limits, limits_in_effect
from runner.episode.metered_run import call_cap, run_sandbox_s
from runner.episode.poolbindings import PoolBindings
from runner.episode.reaping import ledger_id, settle_reaped
from runner.errors import InputError, ReplayRefused
from runner.grading import make_judge, parse_judge
from runner.hostlog import get_logger
from runner.ledger import LEDGER_FILENAME, CeilingGuard, Ledger, RunHistory
from runner.policy import load_policy
from runner.policy.pricing import check_prices, recorded_models, with_prices
from runner.settings import Settings
from runner.submit.budgetclock import BudgetClock
from runner.submit.ceilings import ceiling_in_effect
from runner.submit.concurrency import admit_concurrency, engine_cpus, readmit
from runner.submit.confirm import confirm_on_retry
from runner.submit.interrupts import Interrupts, handled_signals
from runner.submit.jobfolder import (
    check_unchanged,
    job_dir,
    resumed_snapshot,
    write_job,
)
from runner.submit.jobreport import JobReport
from runner.submit.options import SubmitOptions, grading_seed, resolve_baseline
from runner.submit.pairs import PairRunner
from runner.submit.plan import Plan, build_plan
from runner.submit.report import build_report, grade_job, write_report
from runner.submit.scheduler import PairOutcome, Scheduler, TrackingBackend
from runner.submit.variants import make_variants
from runner.tools.snapshot.sources import project_snapshot
from runner.tools.snapshot.toolsnapshot import ToolSnapshot
from runner.tracetools.anchor import load_anchor
from runner.tracetools.registrycheck import registry_refusals

if TYPE_CHECKING:
    from runner.backends.base import Backend

log = get_logger(__name__)

__all__ = ["SubmitResult", "check_images", "execute", "prepare"]


@dataclass
class SubmitResult:
    """The outcome of a submission.

    Attributes:
        plan: the plan.
        report: the report (what ``report.json`` holds), None after ``--dry-run``.
        exit_code: SPEC.md's exit code.
    """

    plan: Plan
    report: JobReport | None
    exit_code: int


def _tasks(path: Path) -> tuple[Task, ...]:
    task_file = load_tasks(path)
    if task_file.errors:
        raise task_file.errors[0]
    if not task_file.tasks:
        raise InputError("no tasks", file=str(path))
    return tuple(task_file.tasks.values())


def prepare(
    options: SubmitOptions,
    settings: Settings,
    *,
    job_id: str | None = None,
    engine: Backend | None = None,
    dry_run: bool = False,
) -> Plan:
    """Load and check everything and build the plan; nothing runs, nothing is written.

    ``engine`` (a backend, or None) is asked for its memory, the concurrency's budget
    (`runner.submit.concurrency`); without one the job weighs it when its backend exists.
    ``dry_run``: the plan is all that will happen, so what reading the tools could not decide
    is refused as ``check`` refuses it (fail closed: ``check`` said 3 and
    ``--dry-run`` 0 on the same input); a real submission has a sandbox describe them.

    Raises:
        InputError: a bad policy, workflow, task file, judge or flag, or a model without a
            price under a USD ceiling (exit 2).
        IneligibleError: a variant calls a denied or unknown tool (exit 3; every problem named).
    """
    policy = with_prices(load_policy(options.policy), options.prices)
    # the tools read from source, and each variant's model provider built (a scripted function
    # that does not import is exit 2, now); the sandbox's description follows in `execute`
    report = admission.read_gate(
        options.variants, policy, cwd=options.cwd, settings=settings, decided_only=not dry_run
    )
    for check in report.workflows:
        model = check.workflow.spec.model if check.workflow is not None else None
        if model is not None and model.provider == "replay" and check.workflow is not None:
            raise InputError(
                "a replay provider serves a recorded trace (reproduce); a shadow evaluation runs"
                " fresh model turns: use provider scripted or openai",
                file=check.path,
                line=check.workflow.line_of(("model", "provider")),
                field="model.provider",
            )
    ceilings = {
        "replay": ceiling_in_effect("replay", policy, options.replay_ceiling),
        "judge": ceiling_in_effect("judge", policy, options.judge_ceiling),
    }
    recorded = recorded_models(settings.state_dir)
    # a price for every model before anything runs: exit 2, the model named
    check_prices(
        policy,
        [(check.path, check.workflow) for check in report.workflows if check.workflow],
        usd_ceiling=ceilings["replay"].ceiling.usd,
        ceiling_source=ceilings["replay"].sources.get("usd", ""),
        recorded=recorded,
    )
    variants = make_variants(
        [
            (path, name, check.workflow, check.registry)
            for path, name, check in zip(
                options.variants, options.names, report.workflows, strict=True
            )
        ],
        recorded,
    )
    anchor = None
    if options.fork_at is not None:  # every variant forks the anchor's task at call K
        anchor = load_anchor(options.tasks, options.fork_at)
        tasks: tuple[Task, ...] = (anchor.task,)
    else:
        tasks = _tasks(options.tasks)
    judge = parse_judge(options.judge)  # an unknown judge: exit 2, now
    if judge.kind == "function":
        make_judge(judge, search_paths=[options.cwd])  # import errors: exit 2, now
    # runs wait on models, not CPUs: the bound is memory, pids, threads, fds (backends.capacity);
    # the sandbox-seconds ceiling is shared by the budget clock, not a bound on runs at once
    capacity = admit_concurrency(
        options.concurrency or settings.concurrency, policy, settings, engine=engine
    )
    history: dict[str, RunHistory] = {}
    ledger_path = settings.state_dir / LEDGER_FILENAME
    if ledger_path.exists():  # never create the ledger just to plan
        with Ledger(ledger_path) as ledger:  # each variant its own: another's runs say nothing
            known = ledger.per_run_history_by_variant("replay")
        history = {v.name: known[v.name] for v in variants if v.name in known}
    job_id = job_id or timestamped_ids(prefix="job")()
    return build_plan(
        job_id,
        policy,
        variants,
        tasks,
        judge=options.judge,
        concurrency=capacity.admitted,
        capacity=capacity,
        ceilings=ceilings,
        history=history,
        limits=limits_in_effect(policy, settings),
        repeats=options.repeats,
        seed=grading_seed(options, job_id),
        # --baseline FILE: the variant whose workflow file it is
        baseline=resolve_baseline(options.baseline, [(v.name, v.path) for v in variants]),
        anchor=anchor,
    )


def check_images(
    plan: Plan, *, backend: Backend, settings: Settings, image: str | None = None
) -> None:
    """Every variant's image exists on ``backend``'s engine, each image asked once.

    A variant runs in its workflow's ``image:``, else in ``image`` (default: the settings',
    ``SANDBOX_REPLAY_IMAGE``) -- the rule of `described_plan` and the runs.

    Raises:
        InputError: an image is missing (exit 2): each variant that needs it named, with where
            the image was named and ``sandbox-replay image build --tag NAME``
            (`runner.episode.images.require_images`).
        InfrastructureError: the engine could not be asked (exit 6).
    """
    default = image or settings.image
    require_images(
        backend,
        [
            ImageUse(
                variant.image or default,
                f"variant {variant.name}",
                workflow_image_source(variant.path, variant.workflow)
                if variant.image
                else image_source(settings, "--image" if image else None),
            )
            for variant in plan.variants
        ],
    )


def described_plan(
    plan: Plan, *, backend: Backend, settings: Settings, image: str, snapshot: ToolSnapshot
) -> Plan:
    """``submit``'s plan with each variant's registry as a sandbox describes it.

    The registries come from `runner.admission.gate.sandbox_gate` over the
    command's tool snapshot, each in the image its variant runs in (its own ``image:``, else
    ``image``).

    Raises:
        InputError: a module fails to import in the sandbox (exit 2).
        IneligibleError: a variant calls a tool the sandbox's registry denies (exit 3).
        InfrastructureError: the backend failed.
    """
    registries: dict[str, Any] = {}
    images = dict.fromkeys(v.image or image for v in plan.variants)
    for each in images:  # each variant described in the image it runs in
        chosen = [v for v in plan.variants if (v.image or image) == each]
        report = EligibilityReport(
            plan.policy,
            tuple(WorkflowCheck(str(v.path), v.workflow, v.registry, ()) for v in chosen),
        )
        described = admission.sandbox_gate(
            report, backend=backend, settings=settings, image=each, snapshot=snapshot
        )
        for variant, check in zip(chosen, described.workflows, strict=True):
            registries[variant.name] = check.registry
    variants = tuple(replace(v, registry=registries[v.name]) for v in plan.variants)
    return replace(plan, variants=variants)


def check_anchor(plan: Plan) -> None:
    """Refuse an anchored submission whose prefix a variant's registry cannot serve.

    As ``reproduce`` refuses (`runner.tracetools.registrycheck`): a tool the prefix recorded
    that a variant's described registry lacks, or whose schema hash changed since.

    Raises:
        ReplayRefused: every reason, per variant (exit 5); nothing was run or written.
    """
    if plan.anchor is None:
        return
    reasons = [
        f"variant {variant.name}: {reason}"
        for variant in plan.variants
        for reason in registry_refusals(plan.anchor.prefix_trace, variant.registry)
    ]
    if reasons:
        raise ReplayRefused(
            f"{plan.anchor.path}: the anchored fork would not start: " + "; ".join(reasons),
            field="--anchor",
        )


def execute(
    plan: Plan,
    options: SubmitOptions,
    settings: Settings,
    *,
    backend_factory: Callable[[], Backend],
    resume: bool = False,
    on_change: Callable[[Sequence[PairOutcome]], None] = lambda _: None,
    image: str | None = None,
    handle_signals: bool = True,
    images_checked: bool = False,
) -> SubmitResult:
    """Run the plan's pairs, grade, write the report.

    Args:
        plan: from `prepare`.
        options: the options (stored in ``job.json``).
        settings: host settings.
        backend_factory: makes the backend (connects to its engine); called after the plan.
        resume: continue ``plan.job_id`` (skip finished pairs, close orphans).
        on_change: progress callback with every pair's outcome so far.
        image: the sandbox image (default: the settings').
        handle_signals: install the SIGINT/SIGTERM handlers (main thread).
        images_checked: `check_images` passed on this backend's engine already (before the
            plan was shown); else it runs here, before anything of the job is written.

    Raises:
        InputError: a variant's image does not exist on the engine (exit 2; no job written).
        InfrastructureError: the backend is unusable (exit 6).
    """
    folder = job_dir(settings, plan.job_id)
    snapshot = None
    if resume:
        check_unchanged(plan, folder)
        snapshot = resumed_snapshot(settings, folder)
    if snapshot is None:  # before anything of the job is written: a bad glob leaves nothing
        snapshot = project_snapshot(
            [v.workflow for v in plan.variants],
            state_dir=settings.state_dir,
            exclude=[options.tasks],
        )
    inner = backend_factory()  # Docker unusable: exit 6, no job row yet
    try:
        check_engine_limits(inner, plan.policy, settings)  # cpus above the engine's: exit 2
        if not images_checked:  # an image the engine lacks: exit 2, before the job exists
            check_images(plan, backend=inner, settings=settings, image=image)
        plan = readmit(plan, inner, settings)  # the engine's memory, when the plan had none
        plan = described_plan(
            plan, backend=inner, settings=settings, image=image or settings.image, snapshot=snapshot
        )
        check_anchor(plan)  # a prefix tool missing or changed: exit 5, before any run
        write_job(folder, plan, options, snapshot, resume=resume)
    except BaseException:
        inner.close()
        raise
    interrupts = Interrupts()
    # One handler from here until the report is written: a Ctrl-C (a second one too) never
    # raises, so the job always ends with its report and, after an interruption, the hint.
    with handled_signals(interrupts, enabled=handle_signals):
        report = _run_job(
            plan,
            options,
            settings,
            inner=inner,
            resume=resume,
            on_change=on_change,
            image=image,
            interrupts=interrupts,
            snapshot=snapshot,
        )
        write_report(folder, report)
    return SubmitResult(plan, report, report.exit_code)


def _run_job(
    plan: Plan,
    options: SubmitOptions,
    settings: Settings,
    *,
    inner: Backend,
    resume: bool,
    on_change: Callable[[Sequence[PairOutcome]], None],
    image: str | None,
    interrupts: Interrupts,
    snapshot: ToolSnapshot,
) -> JobReport:
    """The body of `execute` under its signal handler: run, grade, build the report."""
    # the warm pool (SANDBOX_REPLAY_POOL=0: off; a backend without one returns itself),
    # drained in ``finally`` below
    bindings = PoolBindings(settings.state_dir)
    pooled = inner.with_pool(
        # the spares the concurrency bound counted beside the runs (backends.capacity)
        size=plan.capacity.spares if plan.capacity is not None and settings.pool else 0,
        idle_cap_s=settings.pool_idle_s,
        on_assign=bindings.bind,
        on_release=bindings.release,
    )
    backend = TrackingBackend(pooled, starts=starts_at_once(engine_cpus(inner)))
    runner: PairRunner | None = None
    try:
        with Ledger.for_state_dir(settings.state_dir) as ledger:
            ceilings = {p: c.ceiling for p, c in plan.ceilings.items()}
            ledger.create_job(
                plan.job_id, plan.to_json(), {p: c.to_dict() for p, c in ceilings.items()}
            )
            ledger.set_job_status(plan.job_id, "running")
            try:
                reaped = backend.reap(ledger=ledger_id(settings.state_dir))
                if reaped:  # runs of dead owners: charged what the engine measured
                    log.info("reaped_leftovers", count=len(reaped))
                    settle_reaped(ledger, bindings.settled(reaped))
                if resume:  # what nothing measured: charged at the reservation, estimated
                    ledger.close_orphans(plan.job_id)
                guard = CeilingGuard(ledger, plan.job_id, ceilings)  # type: ignore[arg-type]
                done = ledger.finished_episodes(plan.job_id)
                pending = [episode for episode in plan.episodes if episode not in done]
                # one sandbox per episode: a warm pool makes none only to be drained
                backend.expect_runs(len(pending))
                replay = ceilings["replay"]
                clock = BudgetClock(
                    guard,
                    run_s=run_sandbox_s(plan.policy, settings),
                    typical_s=plan.typical_sandbox_s,
                )
                runner = PairRunner(
                    plan,
                    settings,
                    backend,
                    guard,
                    image=image or settings.image,
                    search_root=options.cwd,
                    snapshot=snapshot,
                    max_tokens=call_cap(replay),
                    clock=clock,
                )
                scheduler = Scheduler(
                    ledger,
                    guard,
                    plan.job_id,
                    runner.run_pair,
                    concurrency=plan.concurrency,
                    stop=runner.stop,
                    backend=backend,
                    clock=clock,
                    on_change=on_change,
                )
                interrupts.attach(scheduler)
                outcomes = scheduler.run(pending)
                grading, confirm = None, None
                if not scheduler.interrupted.is_set():
                    grading = grade_job(plan, ledger, guard, settings, options.cwd)
                    grading, confirm = confirm_on_retry(  # a borderline FAIL runs once more
                        plan,
                        grading,
                        run=scheduler.run,
                        grade_again=lambda tasks: grade_job(
                            plan, ledger, guard, settings, options.cwd, confirm_tasks=tasks
                        ),
                        interrupted=scheduler.interrupted.is_set,
                        finished=done,
                    )
                interrupted = scheduler.interrupted.is_set()
            except BaseException:
                ledger.set_job_status(plan.job_id, "interrupted")  # never left "running"
                raise
            report = build_report(
                plan,
                ledger,
                outcomes,
                skipped=done,
                stop=runner.stop,
                interrupted=interrupted,
                grading=grading,
                resumed=resume,
                waits=runner.waits,
                confirm=confirm,
            )
            ledger.set_job_status(plan.job_id, report.status)
    finally:
        backend.close()  # kills what still runs, then drains the pool and closes the engine
        if runner is not None:
            runner.close()
    return report
