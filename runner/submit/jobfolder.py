"""The job folder ``<state_dir>/jobs/<job_id>/``: what a job writes, and what ``--resume`` reads.

``job.json`` holds the options, the owner process and the tool snapshot (`write_job`), so that
``--resume`` can continue the job (`load_resume`: refused while its owner is alive) with the
same tool code (`resumed_snapshot`) and the same variants (`check_unchanged` against
``plan.json``, written once, when the job starts); ``report.json`` is written at the end
(`runner.submit.report.write_report`). A job whose plan was shown (its id printed) and that
then failed before its report (the describing sandbox, the engine, the ledger) gets
``failure.json`` (`write_failure`: the exit code and the error), so that ``jobs`` lists it with
its failure and ``--resume`` says why it cannot continue, instead of the id naming nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from runner.backends import labels
from runner.domain.ids import path_for_id
from runner.errors import InputError, SandboxReplayError
from runner.hostlog import get_logger
from runner.settings import Settings
from runner.submit.jobreport import JobReport
from runner.submit.options import SubmitOptions, read_json_object
from runner.submit.plan import Plan
from runner.tools.snapshot.toolsnapshot import ToolSnapshot

log = get_logger(__name__)

__all__ = [
    "FAILURE_FILE",
    "check_unchanged",
    "job_dir",
    "load_resume",
    "resumed_snapshot",
    "write_failure",
    "write_job",
]

FAILURE_FILE = "failure.json"
"""The job folder's record of a job that failed before its report (`write_failure`)."""


def job_dir(settings: Settings, job_id: str, *, field: str = "JOB_ID") -> Path:
    """``<state_dir>/jobs/<job_id>`` (the id validated: it becomes a path).

    Args:
        settings: where the state directory is.
        job_id: the id, as the user gave it.
        field: the option or argument that gave it, named in the error.

    Raises:
        InputError: ``job_id`` breaks an id rule (`runner.domain.ids.path_for_id`).
    """
    jobs = settings.state_dir.resolve() / "jobs"
    return path_for_id(jobs, job_id, kind="job id", field=field)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)


def load_resume(settings: Settings, job_id: str) -> SubmitOptions:
    """The options of an earlier job, for ``--resume``.

    Raises:
        InputError: no such job, or its orchestrator is still alive.
    """
    folder = job_dir(settings, job_id, field="--resume")
    path = folder / "job.json"
    if not path.exists():
        if (folder / FAILURE_FILE).is_file():  # shown, then failed before any run started
            failed = read_json_object(folder / FAILURE_FILE)
            raise InputError(
                f"job {job_id} failed before any run started (exit {failed.get('exit_code')}:"
                f" {failed.get('error')}); nothing of it ran: fix that and submit again",
                field="--resume",
            )
        raise InputError(f"no job {job_id!r} in {folder.parent}", field="--resume")
    data = read_json_object(path)
    owner = labels.owner_from_labels(data.get("owner") or {})
    me = labels.current_owner()
    if owner is not None and owner != me and not labels.owner_is_dead(owner, this_host=me.host):
        raise InputError(
            f"job {job_id} is still running (pid {owner.pid}); stop it before resuming",
            field="--resume",
        )
    return SubmitOptions.from_json(data.get("options") or {}, where=str(path))


def check_unchanged(plan: Plan, folder: Path) -> None:
    """Refuse to resume a job whose variants changed since its ``plan.json`` was written.

    Raises:
        InputError: a variant's workflow content hash differs (the workflow file named).
    """
    old = read_json_object(folder / "plan.json")
    before = {v["name"]: v.get("content_hash") for v in old.get("variants", [])}
    for variant in plan.variants:
        if before.get(variant.name) not in (None, variant.workflow.content_hash):
            raise InputError(
                f"variant {variant.name} changed since the job started; submit a new job",
                file=str(variant.path),
                field="--resume",
            )


def resumed_snapshot(settings: Settings, folder: Path) -> ToolSnapshot | None:
    """The tool snapshot the job's runs used, checked; None for a job that recorded none.

    Raises:
        InputError: the recorded snapshot is missing or damaged (the job file named).
    """
    path = folder / "job.json"
    record = read_json_object(path).get("tool_snapshot")
    if record is None:
        log.warning("resume_without_tool_snapshot", job=folder.name)
        return None
    snapshot = ToolSnapshot.load(settings.state_dir, record, where=str(path))
    log.info("tool_snapshot_reused", digest=snapshot.digest, job=folder.name)
    return snapshot


def write_job(
    folder: Path, plan: Plan, options: SubmitOptions, snapshot: ToolSnapshot, *, resume: bool
) -> None:
    """``job.json`` (options, owner, tool snapshot) and, for a new job, ``plan.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    owner = labels.current_owner()
    _write_json(
        folder / "job.json",
        {
            "job_id": plan.job_id,
            "options": options.to_json(),
            "owner": {
                labels.OWNER_HOST: owner.host,
                labels.OWNER_PID: str(owner.pid),
                labels.OWNER_START: owner.start,
            },
            "tool_snapshot": snapshot.to_json(),
        },
    )
    if not resume:
        _write_json(folder / "plan.json", plan.to_json())


def write_failure(folder: Path, plan: Plan, error: SandboxReplayError) -> None:
    """Record that the job failed before its report: ``failure.json`` (and ``plan.json``).

    ``{"job_id", "exit_code", "error", "fields", "at"}`` (``at``: epoch seconds); ``plan.json``
    too when the job failed before writing it, so that ``jobs`` lists its variants and tasks.
    Never raises: the job's own error is what the user must see (a write failure is logged).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "plan.json").exists():
            _write_json(folder / "plan.json", plan.to_json())
        _write_json(
            folder / FAILURE_FILE,
            {
                "job_id": plan.job_id,
                "exit_code": error.exit_code,
                "error": str(error),
                "fields": error.fields,
                "at": time.time(),
            },
        )
    except OSError as exc:
        log.warning("job_failure_not_recorded", job=plan.job_id, error=str(exc))


def load_report(settings: Settings, job_id: str) -> tuple[JobReport, dict[str, Any]]:
    """The report of ``job_id`` read back from its ``report.json`` (``report``, ``view``).

    Returns:
        The report, and the decoded file (for checks of the fields the renderers name by
        their values: ``plan.backend``).

    Raises:
        InputError: no job or no report, or a report that is not what ``submit`` writes (file
            and field named: `JobReport.from_json`).
    """
    path = job_dir(settings, job_id) / "report.json"
    if not path.exists():
        raise InputError(f"no report for job {job_id!r} (looked for {path})")
    data = read_json_object(path)
    return JobReport.from_json(data, file=str(path)), data
