"""``sandbox-replay run WORKFLOW --tasks TASKS.jsonl --task ID``: one episode in a sandbox.

Prints the episode's summary and the trace path (or one JSON object with ``--json``). Exit codes
(SPEC.md): 0 whenever the episode ran, whatever its status (the status is data in the output);
2 invalid input (workflow, task file, task id, policy, model function); 3 the workflow is
ineligible under the policy (nothing started); 6 infrastructure (Docker unusable, the sandbox
could not start, the runtime could not run: status ``infra_error``).
"""

from __future__ import annotations

from typing import Annotated

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
    WriteEgressBaselineOption,
    check_baseline_file,
    gate_egress,
)
from runner.cli.options import JsonOption, TaskOption, TasksOption, WorkflowArgument
from runner.cli.render.episode import print_episode, warn_skipped_line
from runner.cli.render.jsonout import print_json
from runner.errors import EXIT_INFRA, EXIT_OK, SandboxReplayError, worst_exit_code
from runner.policy.egress_gate import EpisodeEgress
from runner.runs.run import execute_run


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
            on_skipped_line=warn_skipped_line,
        )
    except SandboxReplayError as exc:
        fail(exc)
    if as_json:
        print_json(result.summary())
    else:
        print_episode(result)
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
