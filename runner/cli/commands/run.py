"""``sandbox-replay run WORKFLOW --tasks TASKS.jsonl --task ID``: one episode in a sandbox.

Prints the episode's summary and the trace path (or one JSON object with ``--json``).

Exit codes (SPEC.md's one scheme, worst wins with the egress gate): 0 the episode ran,
whatever its status; 1 it tried a destination the ``--egress-baseline`` lacks; 2 invalid input
(workflow, task file, task id, policy, model function, an image the engine lacks); 3 the
workflow is ineligible under the policy (nothing started); 6 infrastructure (Docker unusable,
the sandbox could not start, the runtime could not run: ``infra_error``).

Why a ``failed`` or ``denied`` episode still exits 0: SPEC.md, "Exit codes": "Episode statuses
(including a failed ``run`` of one episode) are data in the output, not an exit code". A new
user expected otherwise; the status is therefore the first word of the summary and the
``status`` of ``--json``, and the README's exit table says it. A script asking whether the
task passed reads ``status`` (``run --json ... | jq -e '.status == "succeeded"'``).

``--json``: the summary (`EpisodeResult.summary`) with ``exit_code`` the command's exit code, as
in every command's JSON, and ``episode_exit_code`` the trace's logical code (0, 1, 124, 125,
137; the end line's ``exit_code``); an egress baseline that cannot be read or written adds
``error`` to the same object.
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
from runner.errors import (
    EXIT_INFRA,
    EXIT_OK,
    SandboxReplayError,
    worst_exit_code,
)
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

    Exits 0 whenever the episode ran (its status, succeeded or failed or denied, is in the
    output: SPEC.md), 1 when it tried an outbound destination the --egress-baseline file
    lacks, 2 on invalid input (an image the engine lacks too), 6 on infrastructure failure.
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
    if not as_json:
        print_episode(result)
    error: SandboxReplayError | None = None
    try:  # its lines on stderr with --json: stdout holds the one object
        egress = gate_egress(
            [EpisodeEgress.of_end(result.run_id, result.end)],
            baseline=egress_baseline,
            write=write_egress_baseline,
            err=as_json,
        )
    except SandboxReplayError as exc:
        if not as_json:
            fail(exc)
        error, egress = exc, exc.exit_code
    code = worst_exit_code(episode_exit_code(result.status), egress)
    if as_json:
        summary = result.summary(exit_code=code)
        if error is not None:
            summary["error"] = str(error)
        print_json(summary)
    raise typer.Exit(code)


def episode_exit_code(status: str) -> int:
    """``run``'s exit code for an episode status (module doc: statuses are data, SPEC.md).

    Returns:
        6 ``infra_error`` (the infrastructure failed, no verdict); 0 any other status.
    """
    return EXIT_INFRA if status == "infra_error" else EXIT_OK
