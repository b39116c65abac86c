"""``sandbox-replay report JOB_ID [--json] [--html FILE]``: a submission's report, shown again.

Read from the job folder's ``report.json`` (`runner.submit.jobfolder.load_report`), printed
as ``submit`` prints it (`runner.cli.render.jobview.print_report`), or written as one
self-contained HTML page. Exit 2 for an unknown job or a page that cannot be written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.backends.registry import names as backend_names
from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.jobview import print_report, write_job_page
from runner.cli.render.terminal import echo
from runner.errors import InputError, SandboxReplayError
from runner.submit.jobfolder import job_dir, load_report

__all__ = ["check_backend", "report_command"]


def check_backend(report: dict[str, Any], path: Path) -> None:
    """Refuse a ``report.json`` whose ``plan.backend`` is not a backend name (or absent).

    ``submit`` writes a backend's name (`runner.backends.registry`); anything else was put
    there by hand (a newline would forge a line of the header, a megabyte string kept rich
    wrapping for minutes), so it is invalid input, not text to show.

    Raises:
        InputError: ``plan`` is not an object, or ``plan.backend`` is neither absent, null nor
            a backend name (file and field named, exit 2).
    """
    plan = report.get("plan")
    if not isinstance(plan, dict):
        raise InputError("not an object", file=str(path), field="plan")
    backend = plan.get("backend")
    names = backend_names()
    if backend is not None and (not isinstance(backend, str) or backend not in names):
        raise InputError(
            f"not a backend name ({', '.join(names)}) but a {type(backend).__name__}"
            + (f" of {len(backend)} characters" if isinstance(backend, str) else ""),
            file=str(path),
            field="plan.backend",
        )


@app.command("report")
def report_command(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="The job id.", show_default=False)],
    as_json: JsonOption = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Write the report as one self-contained HTML file.", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Show a submission's report again (from its job folder); --html writes it as a page."""
    settings = state(ctx).settings()
    try:
        report, data = load_report(settings, job_id)
        check_backend(data, job_dir(settings, job_id) / "report.json")
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if html is not None:
        written = write_job_page(report, html)
        if written is None:
            fail(InputError("cannot write the HTML report", file=str(html)))
        echo(f"HTML report: {written}", err=as_json)
        if not as_json:
            return
    print_report(report, as_json)
