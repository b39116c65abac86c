"""``sandbox-replay report JOB_ID [--json] [--html FILE]``: a submission's report, shown again.

Read from the job folder's ``report.json`` (`runner.submit.jobfolder.load_report`), printed
as ``submit`` prints it (`runner.cli.render.jobview.print_report`), or written as one
self-contained HTML page. Exit 2 for an unknown job or a page that cannot be written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail
from runner.cli.options import JsonOption
from runner.cli.render.jobview import print_report, write_job_page
from runner.cli.render.terminal import echo
from runner.cli.reportfile import report_or_exit
from runner.errors import InputError

__all__ = ["report_command"]


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
    report = report_or_exit(ctx, job_id, as_json=as_json)
    if html is not None:
        written = write_job_page(report, html)
        if written is None:
            fail(InputError("cannot write the HTML report", file=str(html)))
        echo(f"HTML report: {written}", err=as_json)
        if not as_json:
            return
    print_report(report, as_json)
