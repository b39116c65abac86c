"""The launcher in front of bwrap: joins the cgroups (or sets rlimits), stages, drops to the uid.

One process, ``exec`` after ``exec``, so bwrap keeps the pid the host started (its parent is
the host process: ``--die-with-parent``):

1. ``/bin/sh`` writes its own pid into each cgroup's ``cgroup.procs`` (before any process of
   the sandbox exists), or, without cgroups, sets the rlimit fallback (address space
   ``ulimit -v`` KiB for memory, ``ulimit -u`` processes for pids).
2. As root only (`Staging`): the sandbox must run as its own host uid (10001), not as host root
   without capabilities, which is what bwrap makes of root's sandbox user (its uid map would be
   ``10001 0 1``: the sandbox would own every root-owned file it sees, ``/proc/1`` of the
   runtime included). So bwrap runs unprivileged as the sandbox's uid; the folders it binds
   need not be reachable by that uid (a state folder under ``/root``, a 0700 temp folder): in a
   private mount namespace of the launcher (``unshare -m``, nothing reaches the host's) each
   source that uid cannot reach (`reachable`) is bind-mounted under a fresh tmpfs at ``/mnt``
   as ``/mnt/<i>``, and bwrap binds those; then ``setpriv`` drops to the sandbox's uid and gid
   with no supplementary groups.
3. ``exec bwrap ...`` (through ``setpriv --pdeathsig KILL``, which sets the parent-death
   signal again after its uid change cleared it, before bwrap's own ``--die-with-parent``).

The launcher's first process has the parent-death signal from before its first instruction
(`die_with_owner`, the host's ``preexec_fn``): an owner killed while the launcher still joins
cgroups or stages mounts takes it along (measured: without it, one of two runs of the owner-kill
test left its sandbox running; the window was the shell before ``setpriv``).

A launcher step that fails exits 126 before bwrap runs.
"""

from __future__ import annotations

import ctypes
import shlex
import signal
from collections.abc import Sequence
from pathlib import Path

from runner.backends.base import ResourceLimits
from runner.backends.namespace.cgroups import Cgroups

__all__ = ["EXIT_LAUNCH_FAILED", "STAGE", "Staging", "die_with_owner", "launcher_argv", "reachable"]

EXIT_LAUNCH_FAILED = 126
STAGE = "/mnt"  # covered by the launcher's own tmpfs, in its private mount namespace only
_STAGE_SCRIPT = (
    f"mount -t tmpfs -o mode=0755,size=1m sandbox-replay-stage {STAGE} || exit 126; "
    'i=0; while [ "$i" -lt "$n" ]; do '
    f'if [ -d "$1" ]; then mkdir {STAGE}/$i; else : > {STAGE}/$i; fi && '
    f'mount --bind "$1" {STAGE}/$i || exit 126; shift; i=$((i + 1)); done; '
)


def reachable(path: Path, uid: int, gid: int) -> bool:
    """Whether ``uid:gid`` may search every folder above ``path`` (mode bits; ACLs not read)."""
    for folder in reversed(path.parents):
        try:
            info = folder.stat()
        except OSError:
            return False
        if info.st_uid == uid:
            bit = 0o100
        elif info.st_gid == gid:
            bit = 0o010
        else:
            bit = 0o001
        if not info.st_mode & bit:
            return False
    return True


class Staging:
    """The folders bwrap binds, as it sees them in the launcher's private mount namespace.

    Args:
        sources: host paths bwrap binds; the ones ``uid:gid`` cannot reach (`reachable`) are
            staged (each becomes ``/mnt/<i>``; paths under a staged root map under it).
        uid: the sandbox's host uid bwrap runs as.
        gid: its gid.
    """

    def __init__(self, sources: Sequence[Path], uid: str, gid: str) -> None:
        self.roots: list[Path] = []
        for source in sources:
            if source not in self.roots and not reachable(source, int(uid), int(gid)):
                self.roots.append(source)
        self.uid, self.gid = uid, gid

    def seen_as(self, path: Path) -> str:
        """Where bwrap finds host ``path`` (unchanged when it lies under no staged root)."""
        for index, root in enumerate(self.roots):
            if path == root:
                return f"{STAGE}/{index}"
            if path.is_relative_to(root):
                return f"{STAGE}/{index}/{path.relative_to(root).as_posix()}"
        return str(path)


def launcher_argv(
    cgroups: Cgroups | None,
    limits: ResourceLimits,
    staging: Staging | None,
    *,
    setpriv: bool = True,
) -> list[str]:
    """The argv prefix that confines, stages and drops (see the module docstring).

    The bwrap argv follows it (``"$@"`` of the script). With ``setpriv`` (util-linux present)
    the parent-death signal is SIGKILL from before bwrap runs: bwrap sets its own only once its
    namespaces exist, and a host that dies in between must not leave an orphan for the cap.
    """
    if cgroups is not None:
        joins = " && ".join(f"echo $$ > {shlex.quote(f)}" for f in cgroups.procs_files())
        script = f"{joins} || exit 126; "
    else:
        script = (
            f"ulimit -v {limits.memory_mb * 1024} && ulimit -u {limits.pids_limit} || exit 126; "
        )
    death = "--pdeathsig KILL " if setpriv else ""
    if staging is None:
        run = f'exec setpriv {death}-- "$@"' if setpriv else 'exec "$@"'
        return ["/bin/sh", "-c", script + run, "sandbox-replay-launcher"]
    drop = (
        f"exec setpriv {death}--reuid={shlex.quote(staging.uid)}"
        f' --regid={shlex.quote(staging.gid)} --clear-groups -- "$@"'
    )
    if not staging.roots:  # every source reachable by the uid: no mount namespace needed
        return ["/bin/sh", "-c", script + drop, "sandbox-replay-launcher"]
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        'n="$1"; shift; ' + script + _STAGE_SCRIPT + drop,
        "sandbox-replay-launcher",
        str(len(staging.roots)),
        *(str(root) for root in staging.roots),
    ]


_PR_SET_PDEATHSIG = 1  # prctl(2)
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls it


def die_with_owner() -> None:
    """``preexec_fn`` of the launcher: SIGKILL it when the thread that started it dies.

    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (prctl(2)); it survives ``exec`` of the launcher's
    programs (none is set-user-ID) until ``setpriv`` changes the uid, which sets it again.
    """
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
