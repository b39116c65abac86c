"""The launcher in front of bwrap: joins the cgroups (or sets rlimits), stages, drops to the uid.

One process, ``exec`` after ``exec``, so bwrap keeps the pid the host started (its parent is
the host process: ``--die-with-parent``):

1. ``/bin/sh`` (any POSIX shell: dash, busybox, bash) writes its own pid into each cgroup's
   ``cgroup.procs`` (before any process of the sandbox exists). Without cgroups the rlimit
   fallback is set before the launcher's first instruction, by ``setrlimit(2)`` in the forked
   host process (`launcher_preexec`): ``RLIMIT_AS`` (memory) and ``RLIMIT_NPROC`` (pids), both
   soft and hard, inherited by everything the launcher ``exec``s. No shell builtin: dash has
   no ``ulimit -u`` (every run was ``infra_error`` on Debian and Ubuntu).
   ``RLIMIT_NPROC`` counts every process of the sandbox's uid, so the namespace backend runs
   one sandbox at a time in rlimit mode (`runner.backends.namespace.backend`).
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
(`die_with_owner`, in the host's ``preexec_fn``): an owner killed while the launcher still joins
cgroups or stages mounts takes it along (measured: without it, one of two runs of the owner-kill
test left its sandbox running; the window was the shell before ``setpriv``).

A launcher step that fails exits 126 before bwrap runs.
"""

from __future__ import annotations

import ctypes
import resource
import shlex
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.backends.base import ResourceLimits
from runner.backends.namespace.cgroups import Cgroups

__all__ = [
    "EXIT_LAUNCH_FAILED",
    "STAGE",
    "Staging",
    "die_with_owner",
    "launcher_argv",
    "launcher_preexec",
    "reachable",
    "rlimits",
]

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
    staging: Staging | None,
    *,
    setpriv: bool = True,
) -> list[str]:
    """The argv prefix that confines, stages and drops (see the module docstring).

    The bwrap argv follows it (``"$@"`` of the script). With ``setpriv`` (util-linux present)
    the parent-death signal is SIGKILL from before bwrap runs: bwrap sets its own only once its
    namespaces exist, and a host that dies in between must not leave an orphan for the cap.
    """
    script = ""  # without cgroups the limits are rlimits, set before the shell (launcher_preexec)
    if cgroups is not None:
        joins = " && ".join(f"echo $$ > {shlex.quote(f)}" for f in cgroups.procs_files())
        script = f"{joins} || exit 126; "
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


def rlimits(limits: ResourceLimits) -> dict[int, int]:
    """The rlimit fallback of ``limits``: ``{resource: value}`` for soft and hard limit alike.

    ``RLIMIT_AS`` is ``memory_mb`` MiB of address space (an allocation past it fails; the
    kernel reports no OOM); ``RLIMIT_NPROC`` is ``pids_limit`` processes of the real uid. A
    value above this process's own hard limit is lowered to it (a limit can only be lowered).
    """
    wanted = {
        resource.RLIMIT_AS: limits.memory_mb * 1024 * 1024,
        resource.RLIMIT_NPROC: limits.pids_limit,
    }
    out = {}
    for which, value in wanted.items():
        hard = resource.getrlimit(which)[1]
        out[which] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return out


def launcher_preexec(limits: ResourceLimits | None) -> Callable[[], None]:
    """The launcher's ``preexec_fn``: `die_with_owner`, then, given ``limits``, the rlimits.

    Args:
        limits: the sandbox's limits when they are rlimits (no cgroups), else None.

    The values are computed here, in the host process; the child only makes the calls.
    """
    values = rlimits(limits) if limits is not None else {}

    def preexec() -> None:
        die_with_owner()
        for which, value in values.items():
            resource.setrlimit(which, (value, value))

    return preexec


_PR_SET_PDEATHSIG = 1  # prctl(2)
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls it


def die_with_owner() -> None:
    """``preexec_fn`` of the launcher: SIGKILL it when the thread that started it dies.

    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (prctl(2)); it survives ``exec`` of the launcher's
    programs (none is set-user-ID) until ``setpriv`` changes the uid, which sets it again.
    """
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
