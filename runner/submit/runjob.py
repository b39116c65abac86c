"""The ``submit`` use case whole: probe, plan, resume count, run, report, page, egress gate.

`run_job` is everything ``submit`` does between its flags and its exit code; the command parses
the flags (or the job file) and hands a `JobView` that prints. The order, and why:

1. the engine is probed before the plan (``probe``: a local engine), so that the printed plan
   weighs its memory and every variant's image is known to exist (`check_images`: a missing
   one is exit 2 naming the variant, ``--dry-run`` too, and no plan is shown); an unusable
   engine is None there (``--dry-run`` still prints) and the job makes the backend again
   (exit 6; the images are then checked there, before the job is written);
2. the plan is shown first, always; a resumed job's plan says how many runs are left (the
   pairs its ledger holds finished); ``--dry-run`` stops there and creates no job (the plan
   then names no job id);
3. the job runs with a progress view; a Ctrl-C before the job's own handler is installed (or
   after it) returns 130 with the command that continues it; an error after the plan named
   the job (the engine, the describing sandbox, the ledger) is recorded in the job folder
   (`runner.submit.jobfolder.write_failure`: ``jobs`` lists the job with it) and raised;
4. the report is shown, then the HTML page is written beside ``report.json`` (a page that fails
   never changes the exit code: ``report.json`` is the record), then the egress gate runs
   over the episodes' traces (`runner.policy.egress_gate`); a Ctrl-C while the report is shown
   still ends with the hint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runner.backends import registry
from runner.errors import EXIT_INTERRUPTED, SandboxReplayError, worst_exit_code
from runner.ledger import LEDGER_FILENAME, Ledger
from runner.policy.egress_gate import check_egress, egress_of_trace
from runner.submit.concurrency import close_backend, probe_engine
from runner.submit.job import check_images, execute, prepare
from runner.submit.jobfolder import FAILURE_FILE, job_dir, load_resume, write_failure

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.settings import Settings
    from runner.submit.jobreport import JobReport
    from runner.submit.options import SubmitOptions
    from runner.submit.scheduler import PairOutcome

__all__ = ["JobView", "run_job"]


class JobView(Protocol):
    """What a job shows while it runs: the CLI's terminal (or JSON) output."""

    def plan(self, lines: Sequence[str]) -> None:
        """Show the plan's lines (first, always)."""

    def dry_run(self, plan: dict[str, Any]) -> None:
        """Show a dry run's plan as data (``Plan.to_json`` with ``dry_run: true``)."""

    def progress(
        self, total: int, finished: int
    ) -> AbstractContextManager[Callable[[Sequence[PairOutcome]], None]]:
        """A progress display of ``total`` runs, ``finished`` of them before.

        Entered, it is the callable the scheduler hands its outcomes to (from worker threads).
        """

    def report(self, report: JobReport) -> None:
        """Show the job's report."""

    def page(self, report: JobReport, path: Path) -> Path | None:
        """Write the report's HTML page at ``path``; None when it could not be written."""

    def say(self, line: str) -> None:
        """Show one line of information (the page's path, the egress gate's lines)."""

    def hint(self, line: str) -> None:
        """Show the command that continues an interrupted job (stderr, always)."""


def finished_before(settings: Settings, job_id: str) -> int:
    """Pairs of ``job_id`` finished in earlier sessions (0 when there is no ledger)."""
    path = settings.state_dir / LEDGER_FILENAME
    if not path.exists():
        return 0
    with Ledger(path) as ledger:
        return len(ledger.finished_episodes(job_id))


def run_job(
    settings: Settings,
    options: SubmitOptions | None,
    *,
    view: JobView,
    backend_factory: Callable[[], Backend] | None = None,
    resume: str | None = None,
    dry_run: bool = False,
    concurrency: int | None = None,
    egress: tuple[Path | None, Path | None] = (None, None),
    probe: bool = False,
    backend_name: str | None = None,
) -> int:
    """Plan, show the plan, run, show the report, write the page, gate egress; the exit code.

    Args:
        settings: host settings.
        options: the submission (None with ``resume``: read from the job folder).
        view: where the plan, progress, report and lines go.
        backend_factory: makes the job's backend (the CLI's ``--backend`` choice; None: the
            settings' backend, ``SANDBOX_REPLAY_BACKEND``, whose name and probe rule then
            come from the registry, `runner.backends.registry`).
        resume: the job id to continue, or None for a new job.
        dry_run: show the plan only; no job is created.
        concurrency: ``--concurrency`` for a resumed job (a new job has it in ``options``).
        egress: the ``--egress-baseline`` and ``--write-egress-baseline`` files (or None),
            applied to every episode's trace once the job ran.
        probe: make the backend before the plan (a backend of this machine: the plan weighs
            its engine's memory).
        backend_name: the backend's name, said by the plan and the report (None with a
            factory: the registry's default).

    Returns:
        SPEC.md's exit code (worst of the job's and the egress gate's; 130 interrupted).

    Raises:
        SandboxReplayError: invalid input (2), ineligible (3), infrastructure (6); an egress
            baseline that cannot be written (2).
    """
    if resume is not None:
        options = load_resume(settings, resume)
        if concurrency:
            options = options.with_overrides(concurrency=concurrency)
    assert options is not None
    if backend_factory is None:  # the settings' backend, as the registry says
        chosen = registry.entry(settings.backend, source="SANDBOX_REPLAY_BACKEND")
        probe, backend_name = chosen.runs_here, chosen.name
        backend_factory = partial(chosen.make, settings)
    make = backend_factory
    engine = probe_engine(make) if probe else None
    try:
        plan = replace(
            prepare(options, settings, job_id=resume, engine=engine, dry_run=dry_run),
            backend=backend_name or registry.DEFAULT,
        )
        if engine is not None:  # an image the engine lacks: exit 2 before the plan is shown
            check_images(plan, backend=engine, settings=settings)
    except BaseException:
        close_backend(engine)
        raise
    lines = plan.lines()
    finished = 0
    if dry_run and resume is None:  # no job is created: an id would name nothing to report
        lines[0] = lines[0].replace(f"plan {plan.job_id}:", "plan (dry run, no job created):", 1)
    if resume is not None:
        finished = finished_before(settings, plan.job_id)
        lines.insert(
            1,
            f"  resuming {plan.job_id}: {plan.runs} planned, {finished} finished,"
            f" {plan.runs - finished} to run",
        )
    view.plan(lines)
    if dry_run:
        close_backend(engine)
        data = {**plan.to_json(), "dry_run": True}
        if resume is None:
            data["job_id"] = None
        view.dry_run(data)
        return 0

    def job_backend() -> Backend:  # the probed engine when there is one, else a new one
        return engine if engine is not None else make()

    hint = f"continue with: sandbox-replay submit --resume {plan.job_id}"
    folder = job_dir(settings, plan.job_id)
    try:
        with view.progress(plan.runs, finished) as on_change:
            result = execute(
                plan,
                options,
                settings,
                backend_factory=job_backend,
                resume=resume is not None,
                on_change=on_change,
                images_checked=engine is not None,
            )
    except KeyboardInterrupt:  # before the job's own handler was installed (or after it)
        if (folder / "job.json").exists():
            view.hint(hint)
        return EXIT_INTERRUPTED
    except SandboxReplayError as exc:  # its id was shown: `jobs` lists it with this failure
        write_failure(folder, plan, exc)
        raise
    assert result.report is not None
    (folder / FAILURE_FILE).unlink(missing_ok=True)  # a resumed job that failed before: done now
    code = result.exit_code
    try:
        view.report(result.report)
        page = view.page(result.report, folder / "report.html")
        if page is not None:
            view.say(f"HTML report: {page}")
        if egress != (None, None):
            code = worst_exit_code(code, _gate_egress(result.report, egress, view))
    except KeyboardInterrupt:  # Ctrl-C while the report was shown: the hint still follows
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        view.hint(hint)
    return code


def _gate_egress(report: JobReport, egress: tuple[Path | None, Path | None], view: JobView) -> int:
    """The egress gate over the traces of the report's episodes (those that have one)."""
    episodes = [
        egress_of_trace(pair.trace)._replace(name=f"{pair.variant}/{pair.task_id}#{pair.repeat}")
        for pair in report.pairs
        if pair.trace
    ]
    verdict = check_egress(episodes, baseline=egress[0], write=egress[1])
    for line in verdict.lines:
        view.say(line)
    if verdict.write_error is not None:
        raise verdict.write_error
    return verdict.exit_code
