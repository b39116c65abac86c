"""The jobs of a state directory: list them, and prune old ones (``sandbox-replay jobs``).

A job lives in two places: its ledger rows (``jobs``, ``runs``, ``charges`` of
``<state_dir>/ledger.sqlite3``) and its folder ``<state_dir>/jobs/<job_id>/`` (``job.json``,
``plan.json``, ``report.json``, ``report.html``; `runner.submit.jobfolder`). `list_jobs`
joins the two (a job with only one of them is listed too: a crashed or a hand-copied job);
`prune_jobs` removes a job from both, with the traces its runs wrote under
``<state_dir>/traces``. The single-episode commands (``run``, ``record``, ``reproduce``) keep a
ledger row each too (their spend, `runner.episode.metered_run`): they are jobs of another
``command``, listed and pruned only when asked (``every_command``), so that a hundred
reproduces do not bury the submissions.

Safety rules of `prune_jobs`:

- a folder name becomes a path only through the id rules (`runner.domain.ids.path_for_id`);
  a name under ``jobs/`` that breaks them is not a job and is never touched;
- a job whose orchestrator is alive (``job.json``'s owner, `runner.backends.labels`) is never
  removed, whatever its age;
- a trace is removed only when its recorded path resolves to a regular file directly inside
  ``<state_dir>/traces`` (a path the ledger holds is data: it could name anything);
- nothing is selected without a rule: ``older_than_s`` and/or ``keep`` must be given.
  With both, a job is removed only when both allow it (older than the age, and not among the
  ``keep`` newest), the way ``restic forget`` and ``docker image prune --filter until``
  combine their rules: the stricter wins, pruning never surprises.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.backends import labels
from runner.domain.ids import id_problem, path_for_id, validate_id
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.ledger import LEDGER_FILENAME, PURPOSES, Ledger
from runner.settings import Settings
from runner.submit.jobfolder import FAILURE_FILE
from runner.submit.options import read_json_object

log = get_logger(__name__)

__all__ = ["JobEntry", "PruneResult", "find_job", "list_jobs", "parse_age", "prune_jobs"]

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """Seconds of an age written ``<number><unit>``: ``90s``, ``30m``, ``12h``, ``7d``, ``2w``.

    Raises:
        InputError: not a positive whole number followed by one of ``s m h d w`` (field
            ``--older-than``).
    """
    number, unit = text[:-1], text[-1:].lower()
    if unit not in _AGE_UNITS or not number.isdigit() or not number.isascii():
        raise InputError(
            f"{text!r} is not an age: a whole number and a unit, s m h d or w (7d, 12h)",
            field="--older-than",
        )
    return float(int(number) * _AGE_UNITS[unit])


@dataclass(frozen=True)
class JobEntry:
    """One job as ``jobs`` lists it.

    Attributes:
        id: the job id.
        command: ``submit``, or the single-episode command whose ledger row it is (``run``,
            ``record``, ``reproduce``).
        created: epoch seconds (the ledger's; the folder's ``job.json`` time without a row).
        status: what happened. A submission: the ledger's job status (``running``,
            ``complete``, ``interrupted``, ``ceiling_reached``), ``failed`` when it failed
            before its report (``failure.json``, `runner.submit.jobfolder.write_failure`),
            or ``unknown`` for a folder without a ledger row. A single-episode command:
            ``reproduce``'s verdict (``reproduced``, ``not_reproduced``, ...), else its
            episode's status (``succeeded``, ``failed``, ``denied``, ...), else the job's
            (``running``, ``interrupted``).
        exit_code: the report's exit code, or the recorded failure's; None before either.
        variants: the variants' names (plan order).
        tasks: the planned tasks (None when no plan says).
        repeats: the planned repeats per (variant, task).
        spend_usd: USD charged to the job, every purpose (settled plus still reserved).
        folder: the job folder, or None when it is gone.
        live: its orchestrator is alive (``job.json``'s owner): never pruned.
        error: why a submission failed before its report (``failure.json``), else None.
        trace: a single-episode command's trace (its id is the job's), else None.
        task_id: a single-episode command's task, else None.
    """

    id: str
    command: str
    created: float
    status: str
    exit_code: int | None
    variants: tuple[str, ...]
    tasks: int | None
    repeats: int
    spend_usd: float
    folder: Path | None
    live: bool
    error: str | None = None
    trace: str | None = None
    task_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The job as ``jobs --json`` lists it.

        Returns:
            ``{"id", "command", "created" (ISO 8601 UTC), "status", "exit_code", "variants",
            "tasks", "repeats", "spend_usd", "folder", "live", "error", "trace", "task_id"}``.
        """
        return {
            "id": self.id,
            "command": self.command,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created)),
            "status": self.status,
            "exit_code": self.exit_code,
            "variants": list(self.variants),
            "tasks": self.tasks,
            "repeats": self.repeats,
            "spend_usd": round(self.spend_usd, 6),
            "folder": str(self.folder) if self.folder is not None else None,
            "live": self.live,
            "error": self.error,
            "trace": self.trace,
            "task_id": self.task_id,
        }


@dataclass
class PruneResult:
    """What `prune_jobs` removed (or, dry, would remove) and what it kept.

    Attributes:
        removed: the jobs removed, oldest first.
        kept: how many of the jobs considered stay (``kept_newest`` + ``kept_recent`` +
            ``skipped_live``).
        ledger_rows: ledger rows deleted (runs, charges and job rows).
        traces: trace files deleted.
        skipped_live: jobs the rules selected whose orchestrator is alive (kept).
        kept_newest: jobs kept as among the ``keep`` newest (``--keep``).
        kept_recent: jobs kept as not older than ``older_than_s`` (``--older-than``).
        not_considered: ledger rows of ``run``, ``record`` and ``reproduce`` left out
            without ``every_command`` (``--all``): neither kept nor removed by the rules.
    """

    removed: list[JobEntry] = field(default_factory=list)
    kept: int = 0
    ledger_rows: int = 0
    traces: int = 0
    skipped_live: list[str] = field(default_factory=list)
    kept_newest: list[str] = field(default_factory=list)
    kept_recent: list[str] = field(default_factory=list)
    not_considered: int = 0

    def kept_reasons(self) -> dict[str, list[str]]:
        """Why each kept job stayed: ``{"newest", "recent", "live"}`` -> job ids."""
        return {
            "newest": list(self.kept_newest),
            "recent": list(self.kept_recent),
            "live": list(self.skipped_live),
        }


def _jobs_root(settings: Settings) -> Path:
    return settings.state_dir.resolve() / "jobs"


def _folder_names(root: Path) -> list[str]:
    """Names under ``jobs/`` that are valid ids of real folders (anything else is not ours)."""
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.iterdir()
        if id_problem(p.name) is None and not p.is_symlink() and p.is_dir()
    )


def _read(path: Path) -> dict[str, Any] | None:
    """A job file read strictly, or None when absent or damaged (a listing never fails)."""
    if not path.is_file():
        return None
    try:
        return read_json_object(path)
    except InputError as exc:
        log.warning("job_file_unreadable", file=str(path), error=str(exc))
        return None


def _is_live(job: dict[str, Any] | None) -> bool:
    """The orchestrator named by ``job.json`` still runs (unknown owner: not live)."""
    owner = labels.owner_from_labels((job or {}).get("owner") or {})
    if owner is None:
        return False
    me = labels.current_owner()
    return owner != me and not labels.owner_is_dead(owner, this_host=me.host)


def _episode_status(row: Any, plan: dict[str, Any], runs: list[Any]) -> str:
    """A single-episode job's status: its verdict, else its episode's, else the job's."""
    outcome = plan.get("outcome")
    if isinstance(outcome, str) and outcome:
        return outcome
    closed = [r.status for r in runs if r.finished is not None]
    return str(closed[-1]) if closed else str(row.status)


def _entry(
    job_id: str,
    folder: Path | None,
    row: Any | None,
    spend: float,
    clock_now: float,
    runs: list[Any] | None = None,
) -> JobEntry:
    job = _read(folder / "job.json") if folder is not None else None
    report = _read(folder / "report.json") if folder is not None else None
    failure = _read(folder / FAILURE_FILE) if folder is not None and report is None else None
    found = row.plan if row is not None else None
    plan: dict[str, Any] = found if isinstance(found, dict) else {}
    if not plan and folder is not None:
        plan = _read(folder / "plan.json") or {}
    listed = plan.get("variants")  # anyone's file: a list of objects, else no variants
    listed = listed if isinstance(listed, list) else []
    variants = tuple(str(v.get("name")) for v in listed if isinstance(v, dict))
    tasks = plan.get("tasks")
    command = plan.get("command") if isinstance(plan.get("command"), str) else "submit"
    status = row.status if row is not None else "unknown"
    trace = task_id = None
    if command != "submit":  # a run, record or reproduce: one workflow on one task
        variant, task = plan.get("variant"), plan.get("task")
        variants = (str(variant),) if isinstance(variant, str) else ()
        tasks = 1 if isinstance(task, str) else None
        task_id = task if isinstance(task, str) else None
        if row is not None:
            status = _episode_status(row, plan, runs or [])
        paths = [r.trace_path for r in runs or [] if r.trace_path]
        trace = str(paths[-1]) if paths else None
    error = failure.get("error") if failure is not None else None
    if failure is not None and status != "running":
        status = "failed"
    created = row.created if row is not None else None
    failed_at = (failure or {}).get("at")
    if created is None and folder is not None:
        if job is not None:
            created = (folder / "job.json").stat().st_mtime
        elif isinstance(failed_at, int | float) and not isinstance(failed_at, bool):
            created = float(failed_at)  # failed before job.json: when it failed
        else:
            created = clock_now
    exit_code = (report or failure or {}).get("exit_code")
    repeats = plan.get("repeats")
    return JobEntry(
        id=job_id,
        command=str(command),
        created=float(created if created is not None else clock_now),
        status=status,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        variants=variants,
        tasks=len(tasks) if isinstance(tasks, list) else tasks if isinstance(tasks, int) else None,
        repeats=repeats if isinstance(repeats, int) else 1,
        spend_usd=spend,
        folder=folder,
        live=_is_live(job),
        error=error if isinstance(error, str) else None,
        trace=trace,
        task_id=task_id,
    )


def list_jobs(
    settings: Settings, *, every_command: bool = False, now: Callable[[], float] = time.time
) -> list[JobEntry]:
    """The submissions of the state directory, newest first (the ledger's and the folders').

    Never creates the ledger: with none, only the folders are listed.

    Args:
        settings: host settings (the state directory).
        every_command: the ledger rows of ``run``, ``record`` and ``reproduce`` too.
        now: epoch seconds now (a folder without a readable ``job.json``: listed as new).

    Raises:
        InputError: the ledger was written by a newer sandbox-replay.
        InfrastructureError: the ledger cannot be opened.
    """
    root = _jobs_root(settings)
    folders = {
        name: path_for_id(root, name, kind="job id", field="jobs/") for name in _folder_names(root)
    }
    rows: dict[str, Any] = {}
    runs: dict[str, list[Any]] = {}
    spend: dict[str, float] = {}
    path = settings.state_dir / LEDGER_FILENAME
    if path.exists():
        with Ledger(path) as ledger:
            for job in ledger.jobs():
                if id_problem(job.id) is not None:  # a row written by hand: no path from it
                    continue
                rows[job.id] = job
                if isinstance(job.plan, dict) and job.plan.get("command") not in (None, "submit"):
                    runs[job.id] = ledger.runs(job.id)  # its one episode: status and trace
                totals = ledger.totals(job.id)
                spend[job.id] = sum(
                    totals[p].charged.usd + totals[p].reserved.usd for p in PURPOSES
                )
    clock_now = now()
    entries = [
        _entry(
            job_id,
            folders.get(job_id),
            rows.get(job_id),
            spend.get(job_id, 0.0),
            clock_now,
            runs.get(job_id),
        )
        for job_id in sorted(set(rows) | set(folders))
    ]
    if not every_command:
        entries = [e for e in entries if e.command == "submit"]
    return sorted(entries, key=lambda e: (e.created, e.id), reverse=True)


def find_job(settings: Settings, job_id: str) -> JobEntry:
    """The job ``job_id`` as ``jobs --all`` lists it (a submission or a single-episode run).

    Raises:
        InputError: an id that breaks the id rules, or no such job (field ``JOB_ID``).
        InfrastructureError: the ledger cannot be opened.
    """
    validate_id(job_id, kind="job id", field="JOB_ID")
    for entry in list_jobs(settings, every_command=True):
        if entry.id == job_id:
            return entry
    raise InputError(
        f"no job {job_id!r} in {settings.state_dir} (jobs --all lists them)", field="JOB_ID"
    )


def _remove_traces(settings: Settings, ledger: Ledger, job_id: str, dry_run: bool) -> int:
    """Delete the job's trace files that lie directly inside ``<state_dir>/traces``."""
    traces = (settings.state_dir / "traces").resolve()
    removed = 0
    for run in ledger.runs(job_id):
        if not run.trace_path:
            continue
        path = Path(run.trace_path)
        if path.is_symlink() or not path.is_file() or path.resolve().parent != traces:
            continue  # not a trace this tool wrote where it writes them: left alone
        if not dry_run:
            path.unlink(missing_ok=True)
        removed += 1
    return removed


def prune_jobs(
    settings: Settings,
    *,
    older_than_s: float | None = None,
    keep: int | None = None,
    dry_run: bool = False,
    every_command: bool = False,
    now: Callable[[], float] = time.time,
) -> PruneResult:
    """Remove the jobs the rules select (module doc): folder, ledger rows, traces.

    Args:
        settings: host settings (the state directory).
        older_than_s: remove jobs created more than this many seconds ago.
        keep: keep the ``keep`` newest jobs whatever their age.
        dry_run: remove nothing; say what would be removed.
        every_command: the ledger rows of ``run``, ``record``, ``reproduce`` too (`list_jobs`).
        now: epoch seconds now (injected for tests).

    Returns:
        What was (or would be) removed.

    Raises:
        InputError: neither rule given, or a negative one (field named).
        InfrastructureError: the ledger cannot be written.
    """
    if older_than_s is None and keep is None:
        raise InputError(
            "say which jobs to remove: --older-than AGE and/or --keep N", field="jobs prune"
        )
    if keep is not None and keep < 0:
        raise InputError(f"must be 0 or more, got {keep}", field="--keep")
    every = list_jobs(settings, every_command=True, now=now)  # newest first
    entries = every if every_command else [e for e in every if e.command == "submit"]
    cutoff = now() - older_than_s if older_than_s is not None else None
    result = PruneResult(not_considered=len(every) - len(entries))
    selected = []
    for rank, entry in enumerate(entries):
        if keep is not None and rank < keep:
            result.kept_newest.append(entry.id)
            continue
        if cutoff is not None and entry.created > cutoff:
            result.kept_recent.append(entry.id)
            continue
        # alive, or said running with no job.json to name an owner: it may be running
        if entry.live or (entry.status == "running" and entry.folder is None):
            result.skipped_live.append(entry.id)
            continue
        selected.append(entry)
    result.kept = len(entries) - len(selected)
    path = settings.state_dir / LEDGER_FILENAME
    ledger = Ledger(path) if path.exists() else None
    try:
        for entry in reversed(selected):  # oldest first
            if ledger is not None:
                result.traces += _remove_traces(settings, ledger, entry.id, dry_run)
                if dry_run:
                    rows = len(ledger.runs(entry.id)) + len(ledger.charges(entry.id))
                    result.ledger_rows += rows + (ledger.get_job(entry.id) is not None)
                else:
                    result.ledger_rows += ledger.remove_job(entry.id)
            if entry.folder is not None and not dry_run:
                shutil.rmtree(entry.folder)
            log.info("job_pruned", job=entry.id, dry_run=dry_run)
            result.removed.append(entry)
    finally:
        if ledger is not None:
            ledger.close()
    return result
