"""A job's ``report.json`` read back for showing: ``report JOB_ID`` and ``jobs show JOB_ID``.

One home for the read and its check, so that the two commands show a job the same way (a
command imports no other command: import-linter).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from runner.backends.registry import names as backend_names
from runner.cli.app import fail, state
from runner.errors import InputError, SandboxReplayError
from runner.submit.jobfolder import job_dir, load_report

if TYPE_CHECKING:
    from runner.settings import Settings
    from runner.submit.jobreport import JobReport

__all__ = ["check_backend", "load_checked_report", "report_or_exit"]


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


def load_checked_report(settings: Settings, job_id: str) -> JobReport:
    """The report of ``job_id`` (`runner.submit.jobfolder.load_report`), its backend checked.

    Raises:
        InputError: no such job or report, or a report ``submit`` did not write
            (`check_backend`, `runner.submit.jobreport.JobReport.from_json`), exit 2.
    """
    report, data = load_report(settings, job_id)
    check_backend(data, job_dir(settings, job_id) / "report.json")
    return report


def report_or_exit(ctx: typer.Context, job_id: str, *, as_json: bool) -> JobReport:
    """The command's settings, then `load_checked_report`; its error said and exit 2 (`fail`)."""
    settings = state(ctx).settings()
    try:
        return load_checked_report(settings, job_id)
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
