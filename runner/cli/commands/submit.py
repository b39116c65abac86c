"""``sandbox-replay submit``: shadow evaluation (``report JOB_ID`` shows one again: ``report``).

``submit --variant A.yaml --variant B.yaml --tasks T.jsonl [flags]`` or ``submit job.yaml``
(flags given as well win over the job file). The plan is printed first, always (on stderr with
``--json``); ``--dry-run`` stops there and creates no job (the plan names no job id). A progress
bar with counts per status runs on stderr when it is a terminal (it never moves back). Info logs
are off unless ``--log-level``/``SANDBOX_REPLAY_LOG_LEVEL`` asks for them. The report is a rich
table (or one JSON object with ``--json``) and ``<state_dir>/jobs/<job_id>/report.json``. After
an interruption the command to continue is printed, also after a second Ctrl-C (which stops
waiting for runs to wind down) or one that lands while the report prints; a resumed job's plan
says how many runs are left. A reader of stdout that goes away (``| head``) changes nothing: the
job's exit code stands, no traceback.

``--backend ray`` (with ``--ray-address`` or ``RAY_ADDRESS``) runs the sandboxes on the nodes
of a Ray cluster (`runner.backends.ray`); ledger, keys and traces stay here.

One ``--variant`` is allowed: its episodes run, but tournament grading needs two variants, so
the plan warns and every task is listed ungraded.

Exit codes (SPEC.md, worst wins): 0 every planned run finished (episode statuses are data);
2 invalid input; 3 a variant is ineligible (nothing started, no ledger row); 4 a ceiling
stopped a run, a model call or the judge (the pairs not run are listed); 6 Docker unusable or
an episode ended ``infra_error``; 130 interrupted (sandboxes removed, job ``interrupted``).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import (
    BackendName,
    BackendOption,
    RayAddressOption,
    RuntimeOption,
    backend_factory,
    chosen_backend,
    with_runtime,
)
from runner.cli.egress_gate import (
    EgressBaselineOption,
    WriteEgressBaselineOption,
    check_baseline_file,
    egress_of_trace,
    gate_egress,
)
from runner.cli.options import JsonOption, PriceOption
from runner.cli.render.terminal import echo, stdout_gone
from runner.errors import EXIT_INTERRUPTED, InputError, SandboxReplayError, worst_exit_code
from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.settings import Settings
    from runner.submit.options import CeilingFlags, SubmitOptions
    from runner.submit.scheduler import PairOutcome


def _flags(pairs: Sequence[tuple[str, str, Any]]) -> CeilingFlags:
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.submit.options import CeilingFlags

    values = {dim: value for dim, _flag, value in pairs if value is not None}
    sources = {dim: flag for dim, flag, value in pairs if value is not None}
    return CeilingFlags(values, sources)


class _Progress:
    """Counts per status on a rich progress bar (stderr, TTY only)."""

    def __init__(self, total: int, finished: int = 0) -> None:
        # imported on use, not at module top: start-up speed (`--help`, `check`)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from runner.cli.render.console import table_console

        self.enabled = sys.stderr.isatty()
        self.progress = Progress(
            TextColumn("[bold]replay[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=table_console(stderr=True),
            transient=False,
        )
        self.task = self.progress.add_task("", total=total, completed=finished)
        self.before = finished  # pairs finished in earlier sessions of a resumed job
        self.shown = finished
        self.lock = threading.Lock()  # updates come from worker threads, in any order

    def __enter__(self) -> _Progress:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def update(self, outcomes: Sequence[PairOutcome]) -> None:
        if not self.enabled:
            return
        counts: dict[str, int] = {}
        for outcome in outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        finished = self.before + sum(
            n for s, n in counts.items() if s not in ("running", "not_run")
        )
        text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "not_run")
        with self.lock:  # an older snapshot rendered late must not move the bar back
            if finished < self.shown:
                return
            self.shown = finished
            self.progress.update(self.task, completed=finished, description=text)


def _print_plan(lines: list[str], as_json: bool) -> None:
    for line in lines:
        echo(line, err=as_json)


def _finished_before(settings: Settings, job_id: str) -> int:
    """Pairs of ``job_id`` finished in earlier sessions (0 when there is no ledger)."""
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.ledger import LEDGER_FILENAME, Ledger

    path = settings.state_dir / LEDGER_FILENAME
    if not path.exists():
        return 0
    with Ledger(path) as ledger:
        return len(ledger.finished_episodes(job_id))


def run_submit(
    settings: Settings,
    options: SubmitOptions | None,
    *,
    resume: str | None,
    dry_run: bool,
    as_json: bool,
    concurrency: int | None = None,
    backend_factory: Any = None,
    egress: tuple[Path | None, Path | None] = (None, None),
    probe: bool = False,
    backend_name: str = "docker",
) -> int:
    """Plan, print the plan, run, print the report; return the exit code.

    ``egress``: the ``--egress-baseline`` and ``--write-egress-baseline`` files (or None),
    applied to every episode's trace once the job ran (`runner.cli.egress_gate`).
    ``backend_factory``: makes the job's backend (default: Docker from the settings).
    ``backend_name``: the backend's name, said by the plan and the report.
    ``probe``: make it before the plan, so that the printed plan weighs its engine's memory
    (a local engine; always for the default); an unusable one is None there (``--dry-run``
    still prints) and the job makes it again (exit 6).

    Raises:
        SandboxReplayError: invalid input (2), ineligible (3), infrastructure (6).
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.submit.concurrency import close_backend, probe_engine
    from runner.submit.job import execute, prepare
    from runner.submit.jobfolder import job_dir, load_resume

    if resume is not None:
        options = load_resume(settings, resume)
        if concurrency:
            options = options.with_overrides(concurrency=concurrency)
    assert options is not None
    make = backend_factory
    engine = probe_engine(settings, make) if make is None or probe else None
    try:
        plan = replace(
            prepare(options, settings, job_id=resume, engine=engine, dry_run=dry_run),
            backend=backend_name,
        )
    except BaseException:
        close_backend(engine)
        raise
    lines = plan.lines()
    finished = 0
    if dry_run and resume is None:  # no job is created: an id would name nothing to report
        lines[0] = lines[0].replace(f"plan {plan.job_id}:", "plan (dry run, no job created):", 1)
    if resume is not None:
        finished = _finished_before(settings, plan.job_id)
        total = plan.runs
        lines.insert(
            1,
            f"  resuming {plan.job_id}: {total} planned, {finished} finished,"
            f" {total - finished} to run",
        )
    try:
        _print_plan(lines, as_json)
        if dry_run:
            close_backend(engine)
            if as_json:
                data = {**plan.to_json(), "dry_run": True}
                if resume is None:
                    data["job_id"] = None
                echo(json.dumps({"plan": data}, indent=2, ensure_ascii=True))
            return 0
    except BrokenPipeError:
        stdout_gone()  # the reader left; the job still runs and its exit code stands

    def job_backend() -> Any:  # the probed engine when there is one, else a new one
        if engine is not None:
            return engine
        if make is not None:
            return make()
        # imported on use, not at module top: start-up speed (`--help`, `check`)
        from runner.backends.docker import DockerBackend

        return DockerBackend.from_settings(settings)

    hint = f"continue with: sandbox-replay submit --resume {plan.job_id}"
    try:
        with _Progress(plan.runs, finished) as progress:
            result = execute(
                plan,
                options,
                settings,
                backend_factory=job_backend,
                resume=resume is not None,
                on_change=progress.update,
            )
    except KeyboardInterrupt:  # before the job's own handler was installed (or after it)
        if (job_dir(settings, plan.job_id) / "job.json").exists():
            echo(hint, err=True)
        return EXIT_INTERRUPTED
    assert result.report is not None
    code = result.exit_code
    try:
        print_report(result.report, as_json)
        html = write_job_html(
            settings, result.report, job_dir(settings, plan.job_id) / "report.html"
        )
        if html is not None:
            echo(f"HTML report: {html}", err=as_json)
        if egress != (None, None):
            code = worst_exit_code(code, _gate_egress(result.report, egress, as_json))
    except KeyboardInterrupt:  # Ctrl-C while the report printed: the hint still follows
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        echo(hint, err=True)
    return code


def _gate_egress(
    report: dict[str, Any], egress: tuple[Path | None, Path | None], as_json: bool
) -> int:
    """`gate_egress` over the traces of the report's episodes (those that have one)."""
    episodes = [
        egress_of_trace(pair["trace"])._replace(
            name=f"{pair['variant']}/{pair['task_id']}#{pair['repeat']}"
        )
        for pair in report.get("pairs", [])
        if pair.get("trace")
    ]
    return gate_egress(episodes, baseline=egress[0], write=egress[1], err=as_json)


def write_job_html(settings: Settings, report: dict[str, Any], path: Path) -> Path | None:
    """Write the job's HTML page to ``path``; None when it cannot be written (said, logged).

    The page is a view of ``report.json``, which is written first and is the record: a page
    that fails (a full disk, a bug) never changes the job's exit code.
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.cli.render.html import write_page
    from runner.cli.render.html.job import job_page

    try:
        return write_page(path, job_page(settings, report))
    except Exception as exc:  # the view must not hide the verdict
        get_logger(__name__).exception("html_report_not_written", path=str(path))
        echo(f"HTML report not written ({type(exc).__name__}: {exc})", err=True)
        return None


def print_report(report: dict[str, Any], as_json: bool) -> None:
    """A job's report on stdout (a table, or JSON); a reader gone away (``| head``) is no error."""
    try:
        if as_json:
            echo(json.dumps(report, indent=2, ensure_ascii=True, default=str))
        else:
            from runner.cli.render.console import table_console
            from runner.cli.render.report import render_report

            render_report(report, table_console())
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


@app.command("submit")
def submit_command(
    ctx: typer.Context,
    job_file: Annotated[
        Path | None, typer.Argument(help="A job file (YAML) instead of the flags.")
    ] = None,
    variant: Annotated[
        list[Path] | None, typer.Option("--variant", help="A workflow version (repeat).")
    ] = None,
    tasks: Annotated[Path | None, typer.Option("--tasks", help="Task file (JSONL).")] = None,
    policy: Annotated[
        str | None, typer.Option("--policy", help="Policy name or path (default shadow).")
    ] = None,
    ceiling_usd: Annotated[
        float | None,
        typer.Option("--ceiling-usd", min=0, help="Replay USD ceiling (overrides the policy)."),
    ] = None,
    ceiling_runs: Annotated[
        int | None, typer.Option("--ceiling-runs", min=0, help="Replay runs ceiling.")
    ] = None,
    ceiling_tokens: Annotated[
        int | None, typer.Option("--ceiling-tokens", min=0, help="Replay model-token ceiling.")
    ] = None,
    ceiling_sandbox_s: Annotated[
        float | None,
        typer.Option(
            "--ceiling-sandbox-s",
            min=0,
            help="Replay sandbox-seconds ceiling, shared by the running sandboxes.",
        ),
    ] = None,
    judge_ceiling_usd: Annotated[
        float | None, typer.Option("--judge-ceiling-usd", min=0, help="Judge USD ceiling.")
    ] = None,
    judge_ceiling_tokens: Annotated[
        int | None, typer.Option("--judge-ceiling-tokens", min=0, help="Judge token ceiling.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", min=1, help="Sandboxes at once.")
    ] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="rubric | module:function | model:NAME.")
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            "--repeats",
            min=1,
            max=1000,
            help="Fresh episodes per (variant, task), each run and charged (default 1).",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            min=0,
            help="Grading seed: the order the judge sees episodes in, the bootstrap"
            " (default: from the job id).",
        ),
    ] = None,
    price: PriceOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan only.")] = False,
    as_json: JsonOption = False,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Continue an interrupted job.")
    ] = None,
    egress_baseline: EgressBaselineOption = None,
    write_egress_baseline: WriteEgressBaselineOption = None,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
    runtime: RuntimeOption = None,
) -> None:
    """Shadow-evaluate workflow versions on recorded tasks in sandboxes, then grade them."""
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.submit.options import SubmitOptions, load_job_file

    settings = state(ctx).settings(quiet=True)
    replay = _flags(
        [
            ("usd", "--ceiling-usd", ceiling_usd),
            ("runs", "--ceiling-runs", ceiling_runs),
            ("tokens", "--ceiling-tokens", ceiling_tokens),
            ("sandbox_s", "--ceiling-sandbox-s", ceiling_sandbox_s),
        ]
    )
    judge_flags = _flags(
        [
            ("usd", "--judge-ceiling-usd", judge_ceiling_usd),
            ("tokens", "--judge-ceiling-tokens", judge_ceiling_tokens),
        ]
    )
    try:
        settings = with_runtime(settings, runtime, backend=backend)
        check_baseline_file(egress_baseline)
        options: SubmitOptions | None = None
        if resume is None:
            if job_file is not None:
                if variant or tasks:
                    raise InputError("give a job file or --variant/--tasks, not both")
                options = load_job_file(job_file)
            else:
                if not variant or tasks is None:
                    raise InputError("needs --variant (one or more) and --tasks, or a job file")
                cwd = Path.cwd()
                options = SubmitOptions(
                    variants=tuple(p.resolve() for p in variant),
                    names=(None,) * len(variant),
                    tasks=tasks.resolve(),
                    cwd=cwd,
                )
            options = options.with_overrides(
                judge=judge,
                concurrency=concurrency,
                policy=policy,
                replay_ceiling=replay,
                judge_ceiling=judge_flags,
                repeats=repeats,
                seed=seed,
                prices=tuple(price or ()),
            )
        code = run_submit(
            settings,
            options,
            resume=resume,
            dry_run=dry_run,
            as_json=as_json,
            concurrency=concurrency,
            egress=(egress_baseline, write_egress_baseline),
            backend_factory=backend_factory(settings, backend, ray_address),
            # a local engine is asked before the plan prints (ray's nodes when the job runs)
            probe=chosen_backend(settings, backend) is not BackendName.ray,
            backend_name=chosen_backend(settings, backend).value,
        )
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    raise typer.Exit(code)
