"""``sandbox-replay lint TRACE... [--json]``: are the five seed fields in these traces?

Exit 0 when every trace is complete, 1 when a field is missing or malformed somewhere, 2 when a
trace (or a line of it) cannot be read; with several traces the worst wins (SPEC.md order).
Output: a table per run of traces and a findings table (stdout), or one JSON object with
``--json`` (shape in docs/trace-format.md, "lint output").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner.cli.app import app
from runner.cli.options import JsonOption
from runner.cli.render.console import fold_cells, table_console
from runner.cli.render.jsonout import print_json
from runner.domain.words import counted
from runner.tracetools.lint import CALL_FIELDS, lint_traces

if TYPE_CHECKING:
    from runner.tracetools.lint import TraceLint

# Rows of the text report's findings table; the rest are counted (``--json`` has them all). A
# rich row costs milliseconds: a long trace with a finding per call took minutes to print.
MAX_FINDING_ROWS = 200

_STYLE = {
    "ok": "green",
    "missing": "yellow",
    "malformed": "red",
    "not_applicable": "dim",
    "redacted": "cyan",
}


@app.command("lint")
def lint_command(
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files (JSONL) or folders of *.jsonl traces.", show_default=False
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Report which of the five seed fields each trace and each call is missing.

    Per call: raw response body, schema hash at call time (tool calls), model id from the
    response (model calls), clock reading; per trace: the failure signature. Also says which
    calls carry raw I/O bodies and which only tool-level values.
    """
    results, code = lint_traces(traces)
    if as_json:
        print_json({"exit_code": code, "traces": [r.to_json() for r in results]})
    else:
        _render(results, code)
    raise typer.Exit(code)


def _cell(checks: list[str]) -> str:
    """``ok``, ``–`` (not applicable to any call) or ``N missing`` / ``N bad`` of M calls."""
    missing, malformed = checks.count("missing"), checks.count("malformed")
    applicable = [s for s in checks if s != "not_applicable"]
    if not applicable:
        return "[dim]–[/]"
    parts = [f"[yellow]{missing}/{len(applicable)} missing[/]"] if missing else []
    parts += [f"[red]{malformed}/{len(applicable)} bad[/]"] if malformed else []
    return " ".join(parts) or "[green]ok[/]"


def _render(results: list[TraceLint], code: int) -> None:

    # A log file or a pipe gets a wide table rather than rich's 80-column default.

    console = table_console()
    table = Table(title="Trace lint: the five seed fields", title_justify="left")
    table.add_column("trace", no_wrap=True)
    table.add_column("episode")
    table.add_column("calls (raw I/O)")
    for column in ("body", "schema hash", "model id", "clock", "signature"):
        table.add_column(column)
    table.add_column("verdict")
    findings = Table(title="Findings", title_justify="left")
    findings.add_column("where", no_wrap=True)
    for column in ("call", "tool", "field", "problem"):
        findings.add_column(column)
    findings.add_column("detail", overflow="fold")

    more = 0

    def finding(where: str, call: str, tool: str, field: str, status: str, detail: str) -> None:
        nonlocal more
        if findings.row_count >= MAX_FINDING_ROWS:
            more += 1
            return
        style = _STYLE.get(status, "red")
        findings.add_row(
            escape(where),
            call,
            escape(tool),
            escape(field),
            f"[{style}]{status}[/]",
            escape(detail),
        )

    names = [Path(r.file).name for r in results]
    short = len(set(names)) == len(names)  # file names alone when they are unambiguous
    for result in results:
        verdict = {0: "[green]complete[/]", 1: "[yellow]incomplete[/]"}.get(
            result.exit_code, "[red]unreadable[/]"
        )
        signature = result.failure_signature
        raw = sum(c.raw_io for c in result.calls)
        readable = result.run_id is not None
        if not readable or signature.status == "not_applicable":
            sig_cell = "[dim]–[/]"
        else:
            sig_cell = f"[{_STYLE[signature.status]}]{signature.status}[/]"
        table.add_row(
            escape(Path(result.file).name if short else result.file),
            escape(result.status or ("no end" if readable else "–")),
            f"{len(result.calls)} ({raw})",
            *(_cell([c.fields[f].status for c in result.calls]) for f in CALL_FIELDS),
            sig_cell,
            verdict,
        )
        for error in result.errors:
            where = f"{error.file}:{error.line}" if error.line else error.file
            finding(where, "", "", error.field or "", "unreadable", error.message)
        for index in result.missing_indices:
            finding(
                result.file,
                str(index),
                "",
                "call line",
                "missing",
                "no call line with this index (a removed call)",
            )
        for call in result.calls:
            for name, check in call.fields.items():
                if not check.ok:
                    finding(
                        f"{result.file}:{call.line}",
                        str(call.index),
                        call.tool,
                        name,
                        check.status,
                        check.detail,
                    )
        if not signature.ok and result.status is not None:  # no end line: reported above
            finding(result.file, "", "", "failure_signature", signature.status, signature.detail)
        for item in result.redactions:  # where and by which rule; the value is not in the trace
            finding(
                f"{result.file}:{item['line']}",
                "" if item["index"] is None else str(item["index"]),
                "",
                item["field"],
                "redacted",
                f"{item['rule']}, {item['length']} characters, now {item['placeholder']}",
            )
    console.print(fold_cells(table))
    if findings.row_count:
        console.print(fold_cells(findings))
    if more:
        console.print(f"{more} more findings not shown (lint --json lists every finding)")
    redacted = sum(len(r.redactions) for r in results)
    if redacted:
        console.print(
            f"{counted(redacted, 'redaction')} (values replaced by placeholders when written)"
        )
    summary = {0: "every trace complete", 1: "fields missing", 2: "unreadable trace(s)"}
    console.print(f"exit {code}: {summary.get(code, '')}")
