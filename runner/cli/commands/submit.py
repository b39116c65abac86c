"""``sandbox-replay submit``: shadow evaluation (``report JOB_ID`` shows one again: ``report``).

``submit --variant A.yaml --variant B.yaml --tasks T.jsonl [flags]`` or ``submit job.yaml``
(flags given as well win over the job file). The command parses the flags into
`runner.submit.options.SubmitOptions` and calls `runner.submit.runjob.run_job`, which does the
rest in order (probe, plan, resume count, run, report, HTML page, egress gate) and shows it
through `runner.cli.render.jobview.ConsoleJobView`: the plan first, always (on stderr with
``--json``; ``--dry-run`` stops there and creates no job), a progress bar on stderr when it is
a terminal, the report as a rich table (or one JSON object with ``--json``) and
``<state_dir>/jobs/<job_id>/report.json``. After an interruption the command to continue is
printed, also after a second Ctrl-C (which stops waiting for runs to wind down) or one that
lands while the report prints. Info logs are off unless ``-v``, ``--log-level`` or
``SANDBOX_REPLAY_LOG_LEVEL`` asks for them. A reader of stdout that goes away (``| head``)
changes nothing: the job's exit code stands, no traceback.

``--backend ray`` (with ``--ray-address`` or ``RAY_ADDRESS``) runs the sandboxes on the nodes
of a Ray cluster (the registry's ``ray``); ledger, keys and traces stay here.

``--anchor TRACE --fork-at K`` instead of ``--tasks``: every variant forks the recorded run
TRACE at call K (`runner.tracetools.anchor`: its first K recorded calls, indices 0..K-1, model
and tool calls together, replayed and verified as ``reproduce`` does, then the variant goes on
fresh), and the variants' episodes are graded against each other as any submission's. A
variant whose prefix diverges ends ``failed`` (`ForkStopped`, or the diverging call's error).

One ``--variant`` is allowed: its episodes run, but tournament grading needs two variants, so
the plan warns and every task is listed ungraded.

Exit codes (SPEC.md, worst wins): 0 every planned run finished (episode statuses are data);
2 invalid input; 3 a variant is ineligible (nothing started, no ledger row); 4 a ceiling
stopped a run, a model call or the judge (the pairs not run are listed); 6 the engine unusable or
an episode ended ``infra_error``; 130 interrupted (sandboxes removed, job ``interrupted``).
With ``--baseline VARIANT`` (`runner.grading.gate`): 1 when a candidate FAILs, 7 when one is
INCONCLUSIVE (the worst wins). ``--baseline FILE`` names the baseline by its workflow file: one
of the ``--variant`` files, or another file, then added as the first variant
(`runner.submit.options.with_baseline_file`: a baseline is compared on fresh runs of the same
tasks in the same job, so it must run there; a new user gave ``--baseline v1.yaml`` and was
refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import (
    BackendOption,
    RayAddressOption,
    RuntimeOption,
    UnsafeOpenClusterOption,
    chosen_backend,
    with_host_endpoints,
    with_runtime,
)
from runner.cli.backend_choice import backend_factory as make_backend
from runner.cli.egress_gate import (
    EgressBaselineOption,
    WriteEgressBaselineOption,
    check_baseline_file,
)
from runner.cli.options import JsonOption, PriceOption
from runner.cli.render.jobview import ConsoleJobView
from runner.errors import InputError, SandboxReplayError
from runner.submit.options import (
    CeilingFlags,
    SubmitOptions,
    load_job_file,
    names_a_file,
    with_baseline_file,
)
from runner.submit.runjob import run_job


def _flags(pairs: Sequence[tuple[str, str, float | int | None]]) -> CeilingFlags:
    values = {dim: value for dim, _flag, value in pairs if value is not None}
    sources = {dim: flag for dim, flag, value in pairs if value is not None}
    return CeilingFlags(values, sources)


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
    anchor: Annotated[
        Path | None,
        typer.Option(
            "--anchor",
            help="Instead of --tasks: fork this recorded trace at call --fork-at K (its first K"
            " recorded calls, model and tool calls together, replayed strictly) for every"
            " variant, then grade the variants' continuations against each other.",
            metavar="TRACE",
        ),
    ] = None,
    fork_at: Annotated[
        int | None,
        typer.Option(
            "--fork-at",
            help="With --anchor: K, the number of recorded calls replayed (1..N).",
            metavar="K",
        ),
    ] = None,
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
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="Gate: answer PASS, FAIL or INCONCLUSIVE (exit 7) for each other variant"
            " against this one, from the mean scores' 95% intervals. A variant name"
            " (name@version) or a workflow file: one of the --variant files, or another one,"
            " then run as a variant too (it is compared on fresh runs of the same tasks in"
            " the same job, so it must run there; naming it once is enough).",
            metavar="VARIANT|FILE",
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            help="With --baseline: write the gate's verdicts as JUnit XML, one case per"
            " candidate (FAIL a failure, INCONCLUSIVE an error).",
            metavar="FILE",
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
    unsafe_open_cluster: UnsafeOpenClusterOption = False,
    runtime: RuntimeOption = None,
) -> None:
    """Shadow-evaluate workflow versions on recorded tasks in sandboxes, then grade them."""
    settings = state(ctx).settings()
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
        chosen = chosen_backend(settings, backend)
        if not chosen.runs_here:  # a cluster: its driver's environment is sealed when it joins
            settings = with_host_endpoints(settings)  # before the keys leave the environment
        check_baseline_file(egress_baseline)
        options: SubmitOptions | None = None
        if junit is not None and baseline is None and resume is None and job_file is None:
            raise InputError("--junit writes the gate's verdicts: it needs --baseline VARIANT")
        if resume is None:
            _check_anchor_flags(job_file, tasks, anchor, fork_at)
            if job_file is not None:
                if variant or tasks:
                    raise InputError("give a job file or --variant/--tasks, not both")
                options = load_job_file(job_file)
            else:
                source = anchor if anchor is not None else tasks
                if not variant or source is None:
                    raise InputError(
                        "needs --variant (one or more) and --tasks (or --anchor), or a job file"
                    )
                cwd = Path.cwd()
                options = SubmitOptions(
                    variants=tuple(p.resolve() for p in variant),
                    names=(None,) * len(variant),
                    tasks=source.resolve(),
                    cwd=cwd,
                    fork_at=fork_at,
                )
            if baseline is not None and names_a_file(baseline):  # --baseline v1.yaml
                options = with_baseline_file(options, baseline, cwd=Path.cwd())
                baseline = None
            options = options.with_overrides(
                judge=judge,
                concurrency=concurrency,
                policy=policy,
                replay_ceiling=replay,
                judge_ceiling=judge_flags,
                repeats=repeats,
                seed=seed,
                prices=tuple(price or ()),
                baseline=baseline,
            )
        code = run_job(
            settings,
            options,
            view=ConsoleJobView(as_json=as_json, junit=junit),
            resume=resume,
            dry_run=dry_run,
            concurrency=concurrency,
            egress=(egress_baseline, write_egress_baseline),
            backend_factory=make_backend(
                settings, chosen.name, ray_address, unsafe_open_cluster=unsafe_open_cluster
            ),
            # an engine of this machine is asked before the plan prints (a cluster's nodes
            # when the job runs)
            probe=chosen.runs_here,
            backend_name=chosen.name,
        )
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    raise typer.Exit(code)


def _check_anchor_flags(
    job_file: Path | None, tasks: Path | None, anchor: Path | None, fork_at: int | None
) -> None:
    """``--anchor`` and ``--fork-at`` go together, instead of ``--tasks`` and a job file.

    Raises:
        InputError: one without the other, or with ``--tasks`` or a job file.
    """
    if (anchor is None) != (fork_at is None):
        raise InputError("--anchor TRACE and --fork-at K go together", field="--anchor")
    if anchor is not None and (tasks is not None or job_file is not None):
        raise InputError(
            "--anchor forks one recorded run: give it instead of --tasks or a job file",
            field="--anchor",
        )
