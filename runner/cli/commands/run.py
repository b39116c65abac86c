"""``sandbox-replay run WORKFLOW --tasks TASKS.jsonl --task ID``: one episode in a sandbox.

Prints the episode's summary and the trace path (or one JSON object with ``--json``). Exit codes
(SPEC.md): 0 whenever the episode ran, whatever its status (the status is data in the output);
2 invalid input (workflow, task file, task id, policy, model function); 3 the workflow is
ineligible under the policy (nothing started); 6 infrastructure (Docker unusable, the sandbox
could not start, the runtime could not run: status ``infra_error``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import (
    OneEpisodeBackendOption,
    RuntimeOption,
    one_episode_backend,
    with_runtime,
)
from runner.cli.egress_gate import (
    EgressBaselineOption,
    EpisodeEgress,
    WriteEgressBaselineOption,
    check_baseline_file,
    gate_egress,
)
from runner.cli.options import JsonOption, TaskOption, TasksOption, WorkflowArgument
from runner.cli.render.terminal import echo
from runner.errors import (
    EXIT_INFRA,
    EXIT_OK,
    SandboxReplayError,
    worst_exit_code,
)

if TYPE_CHECKING:
    from runner.episode.request import EpisodeResult
    from runner.settings import Settings


def execute_run(
    settings: Settings,
    workflow_path: Path,
    tasks_path: Path,
    task_id: str,
    *,
    image: str | None = None,
    policy_name: str = "shadow",
    backend: Any = None,
    backend_factory: Callable[[], Any] | None = None,
) -> EpisodeResult:
    """Load everything, check eligibility, run one episode charged under ``replay``.

    The tool modules are never imported on the host: read from source first, then described
    inside a sandbox (`runner.admission.gate`); only the scripted model
    function, the user's own host-side code, is imported here (it runs on the host by design).

    Args:
        settings: host settings.
        workflow_path: the workflow file.
        tasks_path: the task file.
        task_id: the task to run.
        image: the sandbox image (default: the settings').
        policy_name: policy name or path.
        backend: a backend to use (not closed here).
        backend_factory: makes the backend when ``backend`` is None (made after the input
            loaded, closed after the run); default: the settings' ``SANDBOX_REPLAY_BACKEND``
            (`runner.cli.backend_choice.one_episode_backend`).

    Returns:
        The episode result (trace written).

    Raises:
        InputError: a bad workflow, task file, task id, policy or model function.
        IneligibleError: a workflow tool is denied or unresolvable under the policy.
        CeilingReached: the policy's ``replay`` ceiling leaves no room for the run.
        InfrastructureError: the backend is unusable (Docker unreachable, bwrap missing).
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.admission.gate import read_gate, sandbox_gate
    from runner.domain.ids import timestamped_ids, validate_id
    from runner.domain.tasks import load_tasks
    from runner.episode.limits import check_engine_limits
    from runner.episode.metered_run import call_cap, one_off_run
    from runner.episode.request import EpisodeRequest
    from runner.policy import load_policy
    from runner.providers.workflows import provider_for_workflow
    from runner.tools.snapshot.sources import project_snapshot

    validate_id(task_id, kind="task id", field="--task")
    task_file = load_tasks(tasks_path)
    # runner/domain/tasks.py: the asked task runs when its line loaded; bad lines are said.
    warn_skipped_lines(list(task_file.errors))
    task = task_file.get(task_id)
    policy = load_policy(policy_name)
    # The load path `submit` shares (runner/episode/toolmanifest/admission.py): the tools read from
    # source first (nothing of them imported here), then described inside a sandbox below.
    report = read_gate([workflow_path], policy, settings=settings)
    workflow = report.workflows[0].workflow
    assert workflow is not None  # it loaded, or read_gate raised
    model = workflow.spec.model
    provider = provider_for_workflow(workflow, cwd=Path.cwd(), settings=settings)
    # What the sandbox sees of the project: a copy of the declared tool code and data files,
    # taken now (runner/episode/snapshot/toolsnapshot.py); never the tasks file or the state folder.
    snapshot = project_snapshot([workflow], state_dir=settings.state_dir, exclude=[tasks_path])
    own_backend = backend is None
    if own_backend:
        make = backend_factory or one_episode_backend(settings, None, command="run")
        backend = make()
    try:
        check_engine_limits(backend, policy, settings)  # cpus above the engine's: exit 2
        # the registry the run uses: described in a sandbox from the snapshot (kept by its
        # digest: a second run over the same snapshot starts no describing sandbox)
        report = sandbox_gate(
            report,
            backend=backend,
            settings=settings,
            image=image or settings.image,
            snapshot=snapshot,
        )
        registry = report.workflows[0].registry
        request = EpisodeRequest(
            workflow=workflow,
            task=task,
            policy=policy,
            registry=registry,
            image=image or settings.image,
            mode=policy.mode,
            snapshot=snapshot,
        )
        # SPEC.md: every run and model call is charged with its purpose; a sandboxed run is
        # `replay`: the run (reserved before it starts) and each model call (reserved before it
        # is forwarded, as in submit), so the policy's replay ceilings hold here too.
        return one_off_run(
            request,
            purpose="replay",
            command="run",
            backend=backend,
            settings=settings,
            provider=provider,
            id_factory=timestamped_ids(),
            spend="per_call",
            model=(model.name or model.provider) if model is not None else None,
            max_tokens=call_cap(policy.ceilings.replay),
        )
    finally:
        if own_backend:
            backend.close()


def warn_skipped_lines(errors: list[SandboxReplayError]) -> None:
    """Print each rejected task line on stderr (file and line named); the others still run."""
    for error in errors:
        echo(f"warning: {error} (line skipped)", err=True)


def _render(result: EpisodeResult, *, sandboxed: bool = True) -> None:
    """Print an episode's summary; ``sandboxed=False`` (record) meters wall seconds."""
    # Error messages, destinations and stderr come from sandboxed code: printed inert.
    end = result.end
    echo(f"run {result.run_id}: {result.status} (episode exit code {end.get('exit_code')})")
    if end.get("reason"):
        echo(f"  reason: {end['reason']}")
    if end.get("error"):
        error = end["error"]
        echo(f"  error: {error.get('class')}: {error.get('message')}")
    if end.get("failure"):
        failure = end["failure"]
        echo(
            f"  failure: call {failure['call_index']} {failure['tool']} {failure['error_class']}"
            f" (signature {str(end.get('failure_signature'))[:16]})"
        )
    if end.get("output") is not None:
        text = json.dumps(end["output"], ensure_ascii=False)  # echo makes it inert
        echo(f"  output: {text if len(text) <= 300 else text[:297] + '...'}")
    if end.get("not_run"):
        echo(f"  not run: {', '.join(end['not_run'])}")
    outbound = end.get("outbound") or []
    dropped = end.get("outbound_dropped") or 0
    echo(
        f"  outbound destinations: {len(outbound)} (log coverage {end.get('coverage')}"
        + (f"; {dropped} attempts past the log's cap not logged" if dropped else "")
        + ")"
    )
    for attempt in outbound[:20]:
        count = attempt.get("count") or 1
        echo(
            f"    {attempt.get('kind')} {attempt.get('host') or attempt.get('address')}"
            f":{attempt.get('port')} ({attempt.get('outcome')}"
            + (f", {count} attempts" if count != 1 else "")
            + ")"
        )
    for detail in (end.get("coverage_detail") or [])[:5]:
        what = detail.get("program") or detail.get("library") or ""
        label = "clock" if detail.get("partial") is False else "partial"  # clock-only note
        echo(f"    {label}: {detail.get('reason')} {what}")
    meter = end.get("meter") or {}
    echo(
        f"  meter: {meter.get('tokens_in', 0)} tokens in, {meter.get('tokens_out', 0)} out, "
        f"{meter.get('sandbox_s', 0)} {'sandbox-s' if sandboxed else 'wall s (no sandbox)'}"
    )
    if result.status in ("crashed", "infra_error") and end.get("stderr_tail"):
        echo("  last stderr lines:")
        for line in end["stderr_tail"][-10:]:
            echo(f"    {line}")
    echo(f"trace: {result.trace_path}")


@app.command("run")
def run_command(
    ctx: typer.Context,
    workflow: WorkflowArgument,
    tasks: TasksOption,
    task: TaskOption,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Sandbox image (default: the settings').", metavar="IMAGE"),
    ] = None,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="Policy name (./policies, then the defaults) or a policy file.",
            metavar="NAME|FILE",
        ),
    ] = "shadow",
    as_json: JsonOption = False,
    egress_baseline: EgressBaselineOption = None,
    write_egress_baseline: WriteEgressBaselineOption = None,
    runtime: RuntimeOption = None,
    backend: OneEpisodeBackendOption = None,
) -> None:
    """Run one task of a workflow in a sandbox; print the summary and the trace path.

    Exits 0 whenever the episode ran (its status is in the output), 1 when it tried an
    outbound destination the --egress-baseline file lacks, 6 on infrastructure failure.
    --backend docker or namespace (ray is for submit: exit 2).
    """
    settings = state(ctx).settings()
    try:
        settings = with_runtime(settings, runtime, backend=backend)
        make = one_episode_backend(settings, backend, command="run")
        check_baseline_file(egress_baseline)
        result = execute_run(
            settings,
            workflow,
            tasks,
            task,
            image=image,
            policy_name=policy,
            backend_factory=make,
        )
    except SandboxReplayError as exc:
        fail(exc)
    if as_json:
        echo(json.dumps(result.summary(), ensure_ascii=True, indent=2))
    else:
        _render(result)
    try:
        egress = gate_egress(
            [EpisodeEgress.of_end(result.run_id, result.end)],
            baseline=egress_baseline,
            write=write_egress_baseline,
            err=as_json,
        )
    except SandboxReplayError as exc:
        fail(exc)
    ran = EXIT_INFRA if result.infrastructure_failed else EXIT_OK
    raise typer.Exit(worst_exit_code(ran, egress))
