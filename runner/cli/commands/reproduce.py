"""``sandbox-replay reproduce TRACE_OR_DIR_OR_PACKET... [--workflow F] [--junit F] [--html F]``.

Replays recorded episodes in the sandbox, strict, egress blocked, the clock from the trace
(`runner.reproduce.reproducer`). One trace: the verdict with its details; several: a table,
then the details of every trace that was not reproduced. Exit code: the worst of the traces'
(SPEC.md order): 0 reproduced, 1 not_reproduced, 5 refused, 2 invalid input, 6 infrastructure.
Every argument is checked to exist before anything runs or is written.

``--json`` prints one object whatever the number of traces: ``{"exit_code", "outcomes":
{outcome: n}, "traces": [ReproduceReport.to_json(), ...]}`` (it was the report itself for one
trace and a list for several: a script had to tell them apart); an error before any trace ran
is ``{"exit_code", "error", ...fields}`` (`runner.cli.app.fail`).

``--fork-at K --workflow NEW`` (one trace): the anchored fork (`runner.reproduce.fork`): the
trace's first K recorded calls (indices 0..K-1, model and tool calls together) replayed and
verified, then NEW continues fresh in the sandbox and is graded. Exit 0 recovered, 1
not_recovered or diverged, 5 refused, 2 invalid (K out of range), 3 NEW ineligible, 6
infrastructure; ``--json`` is the same one object, ``traces`` holding the fork's report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import OneEpisodeBackendOption, one_episode_backend
from runner.cli.egress_gate import (
    EgressBaselineOption,
    WriteEgressBaselineOption,
    check_baseline_file,
    gate_egress,
)
from runner.cli.render.fork import print_fork
from runner.cli.render.html import render_reproduce, write_page
from runner.cli.render.jsonout import print_json
from runner.cli.render.reproduce import print_reports, write_junit
from runner.cli.render.terminal import echo, one_line
from runner.errors import InputError, SandboxReplayError, worst_exit_code
from runner.policy.egress_gate import EpisodeEgress
from runner.reproduce.fork import fork_trace
from runner.reproduce.inputs import expand_inputs, is_packet
from runner.reproduce.reproducer import Reproducer


@app.command("reproduce")
def reproduce_command(
    ctx: typer.Context,
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files, folders of traces, or reviewer packets (.tar.gz).",
            show_default=False,
        ),
    ],
    workflow: Annotated[
        Path | None,
        typer.Option(
            "--workflow",
            help="Replay this (changed) workflow instead of the recorded one.",
            metavar="FILE",
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Write a JUnit XML file, one case per trace.", metavar="FILE"),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Sandbox image (default: the settings').", metavar="IMAGE"),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Write one self-contained HTML file: per trace the outcome, the first"
            " differing call side by side, environment diff, outbound destinations.",
            metavar="FILE",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    strict_determinism: Annotated[
        bool,
        typer.Option(
            "--strict-determinism",
            help="Refuse (exit 5) a replay that read what its trace does not pin: the wall"
            " clock, unseeded randomness, environment variables, files outside the snapshot,"
            " the network.",
        ),
    ] = False,
    fork_at: Annotated[
        int | None,
        typer.Option(
            "--fork-at",
            help="Anchored fork (needs --workflow, one trace): replay the trace's first K"
            " recorded calls (trace indices 0..K-1, model and tool calls counted together;"
            " K from 1 to the number of calls), each verified as reproduce does, then let the"
            " --workflow version continue fresh in the sandbox (write tools denied) and grade"
            " it. Exit 0 recovered, 1 not_recovered or the prefix diverged.",
            metavar="K",
        ),
    ] = None,
    fork_tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help="With --fork-at: grade the fork against the expected block of the trace's"
            " task in this task file (default: the recorded run's calls when it succeeded;"
            " none: the fork is not graded).",
            metavar="FILE",
        ),
    ] = None,
    egress_baseline: EgressBaselineOption = None,
    write_egress_baseline: WriteEgressBaselineOption = None,
    backend: OneEpisodeBackendOption = None,
) -> None:
    """Replay recorded runs with no network: reproduced (0), not_reproduced (1), refused (5).

    Every replay lists what it read that its trace does not pin (nondeterminism);
    --strict-determinism refuses such a replay (5).

    With --egress-baseline, a replay that tries a destination the file lacks also exits 1.
    --backend docker or namespace (ray is for submit: exit 2).
    """
    settings = state(ctx).settings()
    try:
        make = one_episode_backend(settings, backend, command="reproduce")
        check_baseline_file(egress_baseline)
        skipped: list[Path] = []
        paths = expand_inputs(list(traces), skipped=skipped)
        if workflow is not None and not workflow.is_file():
            raise InputError("no such workflow file", file=str(workflow), field="--workflow")
        if fork_at is not None:
            _check_fork_flags(paths, workflow, junit, html, egress_baseline, write_egress_baseline)
        elif fork_tasks is not None:
            raise InputError("--tasks grades an anchored fork: it needs --fork-at", field="--tasks")
    except SandboxReplayError as exc:
        fail(exc)
    if fork_at is not None:
        assert workflow is not None  # _check_fork_flags
        _fork(settings, paths[0], fork_at, workflow, image, make, as_json, fork_tasks)
    if skipped:  # `reproduce traces/*` names the folder's other files too
        names = ", ".join(one_line(p.name) for p in skipped[:5])
        names += ", ..." if len(skipped) > 5 else ""
        many = len(skipped) != 1
        echo(
            f"skipped {len(skipped)} file{'s' if many else ''} that {'are' if many else 'is'}"
            f" not traces (*.jsonl) or packets: {names}",
            err=True,
        )
    reproducer = Reproducer(
        settings,
        workflow=workflow,
        image=image,
        backend_factory=make,
        strict_determinism=strict_determinism,
    )
    reports: list[Any] = []
    try:
        for path in paths:
            reports.append(reproducer.reproduce(path))
    finally:
        reproducer.close()
    if junit is not None:
        write_junit(reports, junit)
    if html is not None:
        written = write_page(html, render_reproduce(reports))
        echo(f"HTML report: {written}", err=True)
    if not as_json:
        print_reports(reports)
    try:
        egress = gate_egress(
            [EpisodeEgress(r.input, r.outbound, r.outbound_dropped, r.coverage) for r in reports],
            baseline=egress_baseline,
            write=write_egress_baseline,
            err=as_json,
        )
    except SandboxReplayError as exc:
        fail(exc)
    code = worst_exit_code(egress, *(r.exit_code for r in reports))
    if as_json:
        outcomes: dict[str, int] = {}
        for report in reports:
            outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
        print_json(
            {"exit_code": code, "outcomes": outcomes, "traces": [r.to_json() for r in reports]}
        )
    raise typer.Exit(code)


def _check_fork_flags(
    paths: list[Path],
    workflow: Path | None,
    junit: Path | None,
    html: Path | None,
    egress_baseline: Path | None,
    write_egress_baseline: Path | None,
) -> None:
    """Refuse what an anchored fork cannot do (one trace, a new version, no report files).

    Raises:
        InputError: no ``--workflow``, not exactly one trace file, or a report flag.
    """
    if workflow is None:
        raise InputError(
            "needs --workflow NEW: the version that continues from the prefix",
            field="--fork-at",
        )
    if len(paths) != 1 or is_packet(paths[0]):
        raise InputError(
            f"forks one trace file (.jsonl); {len(paths)} input(s) given",
            field="--fork-at",
        )
    given = [
        flag
        for flag, value in (
            ("--junit", junit),
            ("--html", html),
            ("--egress-baseline", egress_baseline),
            ("--write-egress-baseline", write_egress_baseline),
        )
        if value is not None
    ]
    if given:
        raise InputError(f"{', '.join(given)} cannot be used with --fork-at", field="--fork-at")


def _fork(
    settings: Any,
    path: Path,
    fork_at: int,
    workflow: Path,
    image: str | None,
    make: Any,
    as_json: bool,
    tasks: Path | None,
) -> None:
    """Run the anchored fork, print its report, exit with its code."""
    try:
        report = fork_trace(
            path, fork_at, workflow, settings, backend_factory=make, image=image, tasks=tasks
        )
    except SandboxReplayError as exc:
        fail(exc)
    if as_json:
        print_json(
            {
                "exit_code": report.exit_code,
                "outcomes": {report.outcome: 1},
                "traces": [report.to_json()],
            }
        )
    else:
        print_fork(report)
    raise typer.Exit(report.exit_code)
