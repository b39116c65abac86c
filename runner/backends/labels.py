"""Labels every sandbox carries, and the owner identity the reaper relies on.

A sandbox is labelled with the session that made it, the run attempt, the project version and
its owner: the host id, the owning process's pid and that process's start time. The triple
identifies a process uniquely even after pid reuse, so the reaper can tell a crashed
orchestrator's leftovers from the sandboxes of one that is still running, also when several
hosts share one engine (a container of another host is never touched).

No backend library is imported here: the labels are plain strings usable by any backend.

Invariant: `owner_is_dead` answers True only when it is certain. An owner on another host, or
a live pid whose start time cannot be read, counts as alive.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PREFIX = "io.sandbox-replay"
MANAGED = f"{PREFIX}.managed"
SESSION = f"{PREFIX}.session"
RUN = f"{PREFIX}.run"
OWNER = f"{PREFIX}.owner"
OWNER_HOST = f"{PREFIX}.owner.host"
OWNER_PID = f"{PREFIX}.owner.pid"
OWNER_START = f"{PREFIX}.owner.start"
VERSION = f"{PREFIX}.version"
# the ledger run (`runner.ledger.run_key`) a sandbox runs for, and the ledger it is in
# (`runner.episode.reaping.ledger_id`): a reaper settles the runs of its own ledger only
LEDGER_KEY = f"{PREFIX}.ledger-key"
LEDGER = f"{PREFIX}.ledger"
# a warm-pool sandbox (`runner.backends.warmpool.pool`): made before its run was known, so it
# carries a pool id as its run label and no task or ledger key
POOL = f"{PREFIX}.pool"

_NAME_PREFIX = "sandbox-replay-"
_NAME_OK = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*\Z")
_NAME_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_.-]")


@dataclass(frozen=True)
class Owner:
    """The process that owns sandboxes.

    Attributes:
        host: stable id of the host (machine-id, else a hash of the host name).
        pid: the owning process's id.
        start: the owning process's start time as the OS reports it ("" if unknown).
    """

    host: str
    pid: int
    start: str

    def label(self) -> str:
        """The combined owner label value, ``host:pid:start``."""
        return f"{self.host}:{self.pid}:{self.start}"


@lru_cache(maxsize=1)
def host_id() -> str:
    """A stable identifier of this machine's process namespace (not secret; 16 hex characters).

    A hash of the machine id (``/etc/machine-id`` or the D-Bus copy, when present) together
    with the host name. The host name matters: containers built from one image share a
    machine id but not a host name or a pid namespace, and two of them driving one engine
    (Docker-in-Docker CI) must not judge each other's pids.
    """
    machine = ""
    for candidate in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            machine = Path(candidate).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if machine:
            break
    seed = f"machine-id:{machine}\nhostname:{socket.gethostname()}".encode()
    return hashlib.sha256(seed).hexdigest()[:16]


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` as an opaque, comparable string.

    Linux: field 22 of ``/proc/PID/stat`` (clock ticks since boot). Elsewhere: ``ps -o lstart=``.

    Returns:
        The start time, or None when the process does not exist or the time cannot be read.
    """
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            text = stat.read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
        # The command name (field 2) is in parentheses and may contain spaces: split after it.
        fields = text[text.rfind(")") + 2 :].split()
        return fields[19] if len(fields) > 19 else None
    if sys.platform == "win32":  # pragma: no cover - no ps; liveness falls back to the pid
        return None
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no ps on PATH
        return None
    value = out.stdout.strip()
    return value or None


def current_owner() -> Owner:
    """The `Owner` describing this process."""
    pid = os.getpid()
    return Owner(host=host_id(), pid=pid, start=process_start_time(pid) or "")


def owner_from_labels(labels: Mapping[str, str]) -> Owner | None:
    """Read the owner back from a sandbox's labels; None when they are missing or malformed."""
    try:
        return Owner(host=labels[OWNER_HOST], pid=int(labels[OWNER_PID]), start=labels[OWNER_START])
    except (KeyError, ValueError):
        return None


PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
ERROR_ACCESS_DENIED = 5
STILL_ACTIVE = 259


def _win32_api() -> tuple[Any, Callable[[], int]]:  # pragma: no cover - Windows only
    """kernel32 (handle-typed) and the thread's last error; tests replace this."""
    if sys.platform == "win32":
        import ctypes  # lazy: Windows only (ctypes.WinDLL exists there alone)
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
        kernel32.OpenProcess.restype = wintypes.HANDLE
        kernel32.GetExitCodeProcess.argtypes = (wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD))
        kernel32.GetExitCodeProcess.restype = wintypes.BOOL
        kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
        return kernel32, ctypes.get_last_error
    raise OSError("kernel32 exists only on Windows")


def _pid_exists_win32(pid: int) -> bool:
    """Liveness through OpenProcess: ``os.kill(pid, 0)`` there sends CTRL_C_EVENT to a group."""
    import ctypes  # lazy: Windows only, like _win32_api

    kernel32, last_error = _win32_api()
    handle = kernel32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return bool(last_error() == ERROR_ACCESS_DENIED)  # exists, another user's
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True  # cannot tell: alive (never reap a live owner's sandboxes)
        return code.value == STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def _pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    if sys.platform == "win32":
        return _pid_exists_win32(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    except OSError:  # pragma: no cover - cannot tell: assume alive
        return True
    return True


def owner_is_dead(owner: Owner, *, this_host: str | None = None) -> bool:
    """True only when ``owner`` certainly no longer runs.

    Args:
        owner: the owner read from a sandbox's labels.
        this_host: this machine's id (default `host_id()`); injectable for tests.

    Returns:
        False for an owner on another host, for this very process, and for a live pid whose
        start time is unknown or equal to the recorded one; True when the pid is gone or was
        reused by a process that started at another time.
    """
    if owner.host != (this_host if this_host is not None else host_id()):
        return False
    if owner.pid == os.getpid():
        return False
    if not _pid_exists(owner.pid):
        return True
    started = process_start_time(owner.pid)
    if started is None or not owner.start:
        return False
    return started != owner.start


def sandbox_labels(
    *, session_id: str, run_id: str, owner: Owner, version: str, extra: Mapping[str, str]
) -> dict[str, str]:
    """Every label of one sandbox: the extra ones first, then ours (which win).

    Args:
        session_id: id of the backend session that created the sandbox.
        run_id: the run attempt.
        owner: the owning process.
        version: the project version.
        extra: caller-supplied labels (e.g. job id, variant); cannot override ours.
    """
    labels = dict(extra)
    labels.update(
        {
            MANAGED: "1",
            SESSION: session_id,
            RUN: run_id,
            OWNER: owner.label(),
            OWNER_HOST: owner.host,
            OWNER_PID: str(owner.pid),
            OWNER_START: owner.start,
            VERSION: version,
        }
    )
    return labels


def _name_part(value: str, limit: int) -> str:
    """``value`` if a container name can hold it, else a cleaned copy plus a short hash."""
    if _NAME_OK.match(value) and len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    cleaned = _NAME_BAD_CHARS.sub("-", value)[: limit - 13].strip("-.") or "x"
    return f"{cleaned}-{digest}"


def container_name(run_id: str, session_id: str = "") -> str:
    """Deterministic container name for one run attempt of one backend session.

    The same ``(run_id, session_id)`` always gives the same name, so a retried create hits a
    name conflict instead of making a second container. The session part keeps two processes
    that use the same run id on one engine (two CI jobs, two users) from colliding. Characters
    a container name cannot hold are replaced, and a short hash of the original keeps distinct
    ids distinct.

    Raises:
        ValueError: an empty run id.
    """
    if not run_id:
        raise ValueError("empty run id")
    name = _NAME_PREFIX + _name_part(run_id, 180)
    if session_id:
        name += "-" + _name_part(session_id, 40)
    return name
