"""The namespace backend's record of each live sandbox, and the reaper that reads them.

There is no engine to ask what runs, so each sandbox has a record ``ROOT/sandboxes/<name>.json``
(made with ``O_EXCL`` before the sandbox starts, removed after it ended): its labels (the same
owner labels as every sandbox, `runner.backends.labels`), the bwrap pid and that pid's start
time, the wall-clock start, the lifetime cap and its cgroup folders. A retried create of the
same run id and session meets the existing record and is refused: never a second sandbox.

The reaper (`reap_records`) removes the records of dead owners on this host: it SIGKILLs the
bwrap process if it still runs (only when its start time is the recorded one: a reused pid is
never touched; normally ``--die-with-parent`` and the lifetime cap ended it already), removes
its cgroup folders (only folders under this host's own ``sandbox-replay`` groups) and charges
the run from its start until now, at most its lifetime cap (the sandbox cannot have outlived
it). A record of another ledger is kept while it is younger than a day, as Docker's reaper does.
Records are read bounded and strictly; one that does not parse is removed with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.backends import labels as L
from runner.backends.base import Reaped
from runner.backends.namespace.cgroups import remove_groups
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = [
    "FOREIGN_GRACE_S",
    "Record",
    "read_records",
    "reap_records",
    "sweep_groups",
    "update_record",
    "write_record",
]

MAX_RECORD_BYTES = 64 * 1024
FOREIGN_GRACE_S = 24 * 3600.0

Record = dict[str, Any]


def write_record(folder: Path, name: str, record: Mapping[str, Any]) -> Path:
    """Create ``folder/name.json`` exclusively.

    Raises:
        FileExistsError: a sandbox of that name exists (or its record was left behind).
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(record), handle)
    return path


def update_record(path: Path, record: Mapping[str, Any]) -> None:
    """Rewrite an existing record in place (atomic rename)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(dict(record)), encoding="utf-8")
    temporary.replace(path)


def _read(path: Path) -> Record | None:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_RECORD_BYTES + 1)
        if len(raw) > MAX_RECORD_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("labels"), dict):
        return None
    return data


def read_records(folder: Path) -> list[tuple[Path, Record | None]]:
    """Every record file of ``folder`` with its content (None: unreadable or malformed)."""
    if not folder.is_dir():
        return []
    return [(path, _read(path)) for path in sorted(folder.glob("*.json"))]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _kill_if_same(pid: Any, start: Any) -> None:
    if not isinstance(pid, int) or pid <= 1 or not isinstance(start, str) or not start:
        return
    if L.process_start_time(pid) == start:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _own_groups(paths: Any, bases: list[Path]) -> list[Path]:
    found: list[Path] = []
    for value in paths if isinstance(paths, list) else []:
        if not isinstance(value, str):
            continue
        path = Path(value)
        if any(path.parent == base and path.name not in ("", ".", "..") for base in bases):
            found.append(path)
    return found


def reap_records(
    folder: Path,
    this_host: str,
    cgroup_bases: list[Path],
    *,
    ledger: str | None = None,
    clock: Any = time.time,
) -> list[Reaped]:
    """Remove the sandboxes of dead owners (see the module docstring).

    Args:
        folder: ``ROOT/sandboxes``.
        this_host: this host's id (`runner.backends.labels.host_id`).
        cgroup_bases: the host's ``sandbox-replay`` groups (cgroup folders elsewhere are never
            removed, whatever a record says).
        ledger: the caller's ledger id.
        clock: epoch seconds now.

    Returns:
        The removed sandboxes with the seconds charged.
    """
    removed: list[Reaped] = []
    for path, record in read_records(folder):
        if record is None:
            log.warning("namespace_record_malformed", record=str(path))
            path.unlink(missing_ok=True)
            continue
        found = {str(k): str(v) for k, v in record["labels"].items()}
        owner = L.owner_from_labels(found)
        if owner is None or not L.owner_is_dead(owner, this_host=this_host):
            continue
        now = clock()
        started = _number(record.get("started"))
        if found.get(L.LEDGER) not in (None, ledger) and (
            started is None or now - started < FOREIGN_GRACE_S
        ):
            continue
        _kill_if_same(record.get("pid"), record.get("pid_start"))
        remove_groups(_own_groups(record.get("cgroups"), cgroup_bases))
        cap = _number(record.get("cap_s"))
        seconds = None
        if started is not None:
            seconds = max(0.0, now - started)
            seconds = round(min(seconds, cap) if cap is not None else seconds, 3)
        path.unlink(missing_ok=True)
        name = path.stem
        removed.append(Reaped(name=name, run_id=found.get(L.RUN), labels=found, sandbox_s=seconds))
        log.info("namespace_sandbox_reaped", sandbox=name, owner=owner.label(), sandbox_s=seconds)
    return removed


def sweep_groups(
    cgroup_bases: list[Path], live: set[str], *, min_age_s: float = 60.0
) -> list[Path]:
    """Remove empty cgroup folders of our groups that no record names (leftovers of a crash).

    A folder with a process in it, or younger than ``min_age_s`` (a sandbox being made), is
    kept: other state folders of this host share the groups.
    """
    stale: list[Path] = []
    now = time.time()
    for base in cgroup_bases:
        with contextlib.suppress(OSError):
            for path in base.iterdir():
                if not path.is_dir() or path.name in live or now - path.stat().st_mtime < min_age_s:
                    continue
                with contextlib.suppress(OSError):
                    if not (path / "cgroup.procs").read_text(encoding="ascii").split():
                        stale.append(path)
    remove_groups(stale)
    return stale
