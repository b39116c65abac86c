"""``sandbox-replay import tau2|openai-messages|otel|inspect|atif``: traces → this project's files.

Traces and tasks are redacted before they are written (``--policy``'s ``redaction:`` rules, by
default the built-in detectors; `runner.importers.redaction`). Every importer writes into
``--out DIR``: ``traces/<run_id>.jsonl``, ``tasks.jsonl``,
``tools.manifest.json``, ``workflow.yaml`` (+ ``workflow.read-only.yaml``) and
``import-report.json`` (layout in `runner.importers.output`). Exit 0 when written, 2 on bad
input (file, line and field named; nothing is written).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.app import app, fail, state
from runner.cli.render.terminal import echo
from runner.domain.words import counted
from runner.errors import SandboxReplayError
from runner.importers.openai_messages import read_openai_messages
from runner.importers.otel import read_otel
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.importers.toolset import parse_effect_map
from runner.policy import load_policy

import_app = typer.Typer(
    name="import",
    help="Import agent traces (τ²-bench, OpenAI messages, OpenTelemetry, Inspect, Harbor ATIF).",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")

_Out = Annotated[
    Path, typer.Option("--out", help="Folder to write traces, tasks, manifest, workflows into.")
]
_Map = Annotated[
    list[str] | None,
    typer.Option("--map", help="TOOL=EFFECT (pure, read, local, unsafe) for a tool; repeatable."),
]
_MapFile = Annotated[
    Path | None, typer.Option("--map-file", help="File of TOOL=EFFECT lines (or a JSON object).")
]
_Force = Annotated[bool, typer.Option("--force", help="Write into a non-empty --out folder.")]
_Explain = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Print, per file, what was read and what was ignored and why (OpenTelemetry: by span"
        " family and role).",
    ),
]
_Json = Annotated[bool, typer.Option("--json", help="Print the import report as JSON.")]
_Policy = Annotated[
    str | None,
    typer.Option(
        "--policy",
        help="Policy whose redaction rules apply (default: the built-in detectors).",
        metavar="NAME|FILE",
    ),
]


def _explain(explain: dict[str, Any]) -> None:
    """Print ``import-report.json``'s ``explain``: per file, what was read and ignored, why."""
    for file, parts in explain.items():
        echo(f"explain {file}:")
        read = parts.get("read") or {}
        echo("  read: " + (", ".join(f"{k} {v}" for k, v in read.items()) or "nothing"))
        for family, info in (parts.get("ignored") or {}).items():
            label = "unknown family" if family.startswith("unknown:") else "ignored"
            echo(f"  {label}: {family} {info['count']}: {info['why']}")
        for name, count in (parts.get("log_records") or {}).items():
            echo(f"  log records: {name} {count}")
        for what, count in (parts.get("decided") or {}).items():
            echo(f"  decided: {what}: {count}")


def _finish(report: dict[str, Any], out: Path, as_json: bool, explain: bool = False) -> None:
    if as_json:
        echo(json.dumps(report, indent=2, ensure_ascii=True))
        return
    if explain:
        _explain(report.get("explain") or {})
    calls = report["calls"]
    echo(
        f"imported {counted(report['runs'], 'run')} ({report['failed_runs']} failed by the"
        f" source's verdict) into {out}"
    )
    echo(
        f"calls: {calls['total']} ({calls['model']} model, {calls['user']} user, "
        f"{calls['tool']} tool; {counted(report['tool_errors'], 'tool error')}); fixed messages: "
        f"{report['fixed_messages']}"
    )
    tools = report["tools"]
    echo(
        f"tools: {tools['total']} ({', '.join(f'{k} {v}' for k, v in tools['by_effect'].items())})"
        + (f"; unsafe: {', '.join(tools['unsafe'])}" if tools["unsafe"] else "")
    )
    if report.get("redactions"):
        echo(f"redacted: {report['redactions']} values (placeholders in the traces and tasks)")
    missing = report["missing"]
    if missing:
        echo("missing in the source: " + ", ".join(f"{k} ({v})" for k, v in missing.items()))
    for note in report.get("notes") or []:
        echo(f"note: {note}")  # quotes the source (span ids, names): printed inert


def _import(
    ctx: typer.Context,
    read: Callable[[], Any],
    out: Path,
    map_: list[str] | None,
    map_file: Path | None,
    force: bool,
    as_json: bool,
    policy: str | None = None,
    explain: bool = False,
) -> None:
    """Read a source with ``read`` (an importer's reader), write it into ``out``, report."""
    state(ctx).settings()
    try:
        effect_map = parse_effect_map(map_ or [], map_file)
        rules = load_policy(policy).redaction_rules if policy is not None else None
        report = write_import(read(), out, effect_map, force=force, redaction_rules=rules)
    except SandboxReplayError as exc:
        fail(exc)
    _finish(report, out, as_json, explain)


def _shared(
    out: _Out,
    map_: _Map = None,
    map_file: _MapFile = None,
    force: _Force = False,
    as_json: _Json = False,
    policy: _Policy = None,
    explain: _Explain = False,
) -> None:
    """The options every ``import`` command has (their declarations; never called)."""


def _import_command(name: str) -> Callable[[Callable[..., Callable[[], Any]]], None]:
    """Register ``import NAME`` from a function of the source's own arguments to its reader.

    The command's parameters are the context, the source's arguments, ``--out``, the source's
    options, then the options every import shares (`_shared`), in that order (as ``--help``
    lists them); its help is the function's docstring.
    """

    def register(source: Callable[..., Callable[[], Any]]) -> None:
        own = list(inspect.signature(source, eval_str=True).parameters.values())
        shared = list(inspect.signature(_shared, eval_str=True).parameters.values())
        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        context = context.replace(annotation=typer.Context)
        required = [p for p in own if p.default is inspect.Parameter.empty]
        optional = [p for p in own if p.default is not inspect.Parameter.empty]
        parameters = [context, *required, shared[0], *optional, *shared[1:]]

        def command(ctx: typer.Context, **values: Any) -> None:
            reader = source(**{p.name: values.pop(p.name) for p in own})
            _import(ctx, reader, **values)

        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        command.__doc__ = source.__doc__
        command.__name__ = command.__qualname__ = source.__name__
        import_app.command(name)(command)

    return register


@_import_command("tau2")
def tau2_command(
    results: Annotated[Path, typer.Argument(help="τ²-bench results.json.", show_default=False)],
    tools: Annotated[
        Path | None,
        typer.Option("--tools", help="Tools file (default: <domain>_tools.json beside RESULTS)."),
    ] = None,
) -> Callable[[], Any]:
    """Import τ²-bench results: one trace per simulation, tasks with observations, manifest."""
    return lambda: read_tau2(results, tools)


@_import_command("openai-messages")
def openai_messages_command(
    file: Annotated[
        Path, typer.Argument(help="JSONL or JSON of chat conversations.", show_default=False)
    ],
    tools: Annotated[
        Path | None,
        typer.Option("--tools", help="Tools (OpenAI function format) for runs without their own."),
    ] = None,
) -> Callable[[], Any]:
    """Import OpenAI chat-message conversations (messages + tools): one trace per run."""
    return lambda: read_openai_messages(file, tools)


@_import_command("otel")
def otel_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="OTLP/JSON, Jaeger JSON, or JSON/JSONL of spans (GenAI or OpenInference).",
            show_default=False,
        ),
    ],
    tools: Annotated[
        Path | None,
        typer.Option("--tools", help="Tools (OpenAI function format) the telemetry lacks."),
    ] = None,
) -> Callable[[], Any]:
    """Import OpenTelemetry traces: one trace per agent session, tasks, manifest."""
    return lambda: read_otel(files, tools)


@_import_command("inspect")
def inspect_command(
    log: Annotated[
        Path,
        typer.Argument(help="Inspect AI log: .eval archive or .json log.", show_default=False),
    ],
    tools: Annotated[
        Path | None,
        typer.Option("--tools", help="Tools (OpenAI function format) the log lacks."),
    ] = None,
) -> Callable[[], Any]:
    """Import an Inspect AI evaluation log: one trace per sample, tasks, manifest."""
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.importers.inspectlog import read_inspect

    return lambda: read_inspect(log, tools)


@_import_command("atif")
def atif_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Harbor ATIF trajectories (a JSON object, a list, or JSONL).",
            show_default=False,
        ),
    ],
    tools: Annotated[
        Path | None,
        typer.Option("--tools", help="Tools (OpenAI function format); ATIF records none."),
    ] = None,
) -> Callable[[], Any]:
    """Import Harbor ATIF trajectories: one trace per trajectory, tasks, manifest."""
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.importers.atif import read_atif

    return lambda: read_atif(files, tools)
