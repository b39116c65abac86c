"""``sandbox-replay view [JOB_ID|TRACE] [--port N]``: a report page served on 127.0.0.1.

With a job id, the job's page (as ``report.html``, from ``report.json`` and its traces); with a
trace file, the page of that one episode; with nothing, the most recent job of the state
directory. The address is printed (``http://127.0.0.1:PORT/TOKEN/``, an ephemeral port unless
``--port``; ``TOKEN`` a random path only this terminal sees, so another user of the machine
cannot read the page through loopback: `runner.cli.render.html.serve`), the page served until Ctrl-C
(exit 130). Nothing runs: no sandbox, no model.

``--json``: once the page is served, one JSON object on one line of stdout, ``{"url", "job_id",
"trace", "exit_code": 0}`` (the one of them not shown None), so that a script can read the
address with one ``readline`` while the page is served; an error is ``{"exit_code", "error",
...}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.html import render_job
from runner.cli.render.html.render import content_security_policy_of, page_bytes, render_trace
from runner.cli.render.html.serve import serve_page
from runner.cli.render.terminal import echo
from runner.errors import EXIT_INTERRUPTED, InputError, SandboxReplayError
from runner.submit.jobfolder import job_dir, load_report


def _latest_job(jobs: Path) -> str:
    candidates = (
        [p for p in jobs.iterdir() if (p / "report.json").is_file()] if jobs.is_dir() else []
    )
    if not candidates:
        raise InputError(f"no job with a report in {jobs}; give a job id or a trace file")
    return max(candidates, key=lambda p: (p / "report.json").stat().st_mtime).name


@app.command("view")
def view_command(
    ctx: typer.Context,
    target: Annotated[
        str | None,
        typer.Argument(
            help="A job id or a trace file (default: the latest job).", show_default=False
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Serve a job's or a trace's report page on 127.0.0.1 and print its address.

    With --json the address is one JSON object on one line: {"url", "job_id", "trace"}.
    """
    settings = state(ctx).settings()
    shown: dict[str, str | None] = {"job_id": None, "trace": None}
    try:
        if target is not None and Path(target).is_file():
            html = render_trace(Path(target))
            shown["trace"] = str(Path(target).resolve())
        else:
            job_id = target or _latest_job(settings.state_dir.resolve() / "jobs")
            if not (job_dir(settings, job_id) / "report.json").exists():
                raise InputError(f"no job {job_id!r} with a report and no such trace file")
            html = render_job(load_report(settings, job_id)[0])
            shown["job_id"] = job_id

        def ready(url: str) -> None:
            if as_json:  # one line: the page is served until Ctrl-C, a reader reads a line
                echo(json.dumps({"url": url, **shown, "exit_code": 0}, ensure_ascii=True))
            else:
                echo(f"serving on {url} (Ctrl-C stops)")

        try:
            serve_page(
                page_bytes(html), content_security_policy_of(html), port=port, on_ready=ready
            )
        except OSError as exc:
            raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc}", field="--port") from exc
    except SandboxReplayError as exc:
        fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
