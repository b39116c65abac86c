"""``sandbox-replay reproduce TRACE_OR_DIR_OR_PACKET... [--workflow F] [--junit F] [--html F]``.

Replays recorded episodes in the sandbox, strict, egress blocked, the clock from the trace
(`runner.reproduce.reproducer`). One trace: the verdict with its details; several: a table,
then the details of every trace that was not reproduced. Exit code: the worst of the traces'
(SPEC.md order): 0 reproduced, 1 not_reproduced, 5 refused, 2 invalid input, 6 infrastructure.
Every argument is checked to exist before anything runs or is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import OneEpisodeBackendOption, one_episode_backend
from runner.cli.egress_gate import (
    EgressBaselineOption,
    WriteEgressBaselineOption,
    check_baseline_file,
    gate_egress,
)
from runner.cli.render.junit import JUnitCase, write_junit_cases
from runner.cli.render.terminal import echo, markup, one_line
from runner.errors import SandboxReplayError, worst_exit_code
from runner.policy.egress_gate import EpisodeEgress

if TYPE_CHECKING:
    from runner.reproduce.report import ReproduceReport


def _outcome_text(outcome: dict[str, Any]) -> str:
    """``failed, signature 0123456789abcdef`` or ``succeeded (no failure)``."""
    signature = outcome.get("failure_signature")
    if not signature:
        return f"{outcome.get('status')} (no failure)"
    return f"{outcome.get('status')}, signature {str(signature)[:16]}"


def _packages_text(item: dict[str, Any]) -> str:
    """The packages no tool module imports, in one line: each side lists its own environment.

    A recording made on a host lists that host's virtualenv; the sandbox image lists what is
    installed in it (often nothing but the standard library): different lists, not a fault.
    """
    recorded = item.get("recorded_count", item.get("recorded"))
    now = item.get("now_count", item.get("now"))
    return (
        f"other packages (none imported by the tool modules): the recorded environment listed "
        f"{recorded}, the sandbox image lists its own ({now}); {item.get('only_recorded')} only "
        f"in the recording, {item.get('only_now')} only in the sandbox"
    )


def _details(report: ReproduceReport) -> list[str]:
    # a file name may hold a newline: one line, so it cannot forge another trace's verdict
    lines = [
        f"{one_line(report.input)}: {report.outcome} (exit {report.exit_code})",
        f"  {report.reason}",
    ]
    if report.recorded:
        lines.append(f"  recorded: {_outcome_text(report.recorded)}")
    if report.replayed:
        lines.append(
            f"  replayed: {_outcome_text(report.replayed)}"
            + (" (the source's verdict, kept)" if report.replayed.get("source_verdict") else "")
        )
    difference = report.first_difference
    if difference:
        lines.append(
            f"  first difference: call #{difference.get('index')} {difference.get('tool')}"
        )
        if difference.get("args") is not None:
            lines.append(f"    arguments: {json.dumps(difference['args'], ensure_ascii=False)}")
        lines.append(f"    {difference.get('message')}")
    # A single refusal is already the reason line (said once); several are listed.
    if len(report.refusals) > 1:
        lines.extend(f"  refused: {reason}" for reason in report.refusals)
    if report.outcome in ("not_reproduced", "reproduced") or report.outbound:
        lines.append(f"  outbound destinations: {len(report.outbound)}")
        for attempt in report.outbound[:20]:
            where = attempt.get("host") or attempt.get("address")
            count = attempt.get("count") or 1
            times = f" ({count} attempts)" if count != 1 else ""
            lines.append(f"    {attempt.get('kind')} {where}:{attempt.get('port')}{times}")
    if report.environment_diff and report.outcome == "not_reproduced":
        lines.append("  environment differences:")
        for item in report.environment_diff:
            if item["field"] == "packages":  # the ones that do not matter, in one line
                lines.append(f"    {_packages_text(item)}")
            else:
                why = f" ({item['why']})" if item.get("why") else ""
                then, now = ("absent" if v is None else v for v in (item["recorded"], item["now"]))
                lines.append(f"    {item['field']}: {then} -> {now}{why}")
    if report.replay_trace:
        lines.append(f"  replay trace: {report.replay_trace}")
    return lines


def _table(reports: list[ReproduceReport]) -> None:
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from rich.table import Table

    from runner.cli.render.console import table_console

    table = Table(title="reproduce")
    for column in ("trace", "outcome", "exit", "first difference / reason"):
        table.add_column(column, overflow="fold")
    for report in reports:
        first = report.first_difference
        why = first["summary"] if first else report.reason
        # file names and reasons come from hostile inputs: never rich markup
        table.add_row(
            markup(one_line(report.input)),
            markup(report.outcome),
            str(report.exit_code),
            markup(why[:200]),
        )
    table_console().print(table)


def print_reports(reports: list[ReproduceReport]) -> None:
    """Print one report's details, or a table then the details of each not reproduced.

    Everything quoted from traces and sandboxes is printed inert (`runner.cli.render.terminal`).
    """
    if len(reports) == 1:
        echo("\n".join(_details(reports[0])))
        return
    _table(reports)
    for report in reports:
        if report.outcome != "reproduced":
            echo("\n".join(_details(report)))


def write_junit(reports: list[ReproduceReport], path: Path) -> None:
    """One JUnit test case per trace: reproduced passes, not_reproduced fails, else errors.

    Written by the one JUnit writer (`runner.cli.render.junit`): text XML cannot carry is escaped.
    """
    cases = []
    for report in reports:
        text = "\n".join(_details(report))
        failure = report.reason if report.outcome == "not_reproduced" else None
        error = None
        if report.outcome not in ("reproduced", "not_reproduced"):
            error = (report.outcome, report.reason)
        cases.append(JUnitCase(report.input, "reproduce", text, failure=failure, error=error))
    write_junit_cases("sandbox-replay reproduce", cases, path)


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
    egress_baseline: EgressBaselineOption = None,
    write_egress_baseline: WriteEgressBaselineOption = None,
    backend: OneEpisodeBackendOption = None,
) -> None:
    """Replay recorded runs with no network: reproduced (0), not_reproduced (1), refused (5).

    With --egress-baseline, a replay that tries a destination the file lacks also exits 1.
    --backend docker or namespace (ray is for submit: exit 2).
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.reproduce.inputs import expand_inputs
    from runner.reproduce.reproducer import Reproducer

    settings = state(ctx).settings()
    try:
        make = one_episode_backend(settings, backend, command="reproduce")
        check_baseline_file(egress_baseline)
        skipped: list[Path] = []
        paths = expand_inputs(list(traces), skipped=skipped)
        if workflow is not None and not workflow.is_file():
            from runner.errors import InputError

            raise InputError("no such workflow file", file=str(workflow), field="--workflow")
    except SandboxReplayError as exc:
        fail(exc)
    if skipped:  # `reproduce traces/*` names the folder's other files too
        names = ", ".join(one_line(p.name) for p in skipped[:5])
        names += ", ..." if len(skipped) > 5 else ""
        many = len(skipped) != 1
        echo(
            f"skipped {len(skipped)} file{'s' if many else ''} that {'are' if many else 'is'}"
            f" not traces (*.jsonl) or packets: {names}",
            err=True,
        )
    reproducer = Reproducer(settings, workflow=workflow, image=image, backend_factory=make)
    reports: list[Any] = []
    try:
        for path in paths:
            reports.append(reproducer.reproduce(path))
    finally:
        reproducer.close()
    if junit is not None:
        write_junit(reports, junit)
    if html is not None:
        from runner.cli.render.html import render_reproduce, write_page

        written = write_page(html, render_reproduce([r.to_dict() for r in reports]))
        echo(f"HTML report: {written}", err=True)
    if as_json:
        payload: Any = [r.to_dict() for r in reports]
        echo(
            json.dumps(
                payload[0] if len(payload) == 1 else payload,
                indent=2,
                ensure_ascii=True,
                default=str,
            )
        )
    else:
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
    raise typer.Exit(worst_exit_code(egress, *(r.exit_code for r in reports)))
