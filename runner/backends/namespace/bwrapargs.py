"""The ``bwrap`` argv of one namespace sandbox (pure: no process, no mount; unit-tested).

Namespaces: ``--unshare-all`` (user, IPC, pid, network with loopback only, UTS, cgroup) and
``--unshare-user`` explicitly, never ``--share-net``; ``--disable-userns`` (no nested user
namespace: the sandbox cannot gain a fresh set of capabilities); ``--cap-drop ALL``;
``--die-with-parent`` (the sandbox dies with the process that started it); ``--new-session``
(no ``TIOCSTI`` into a terminal); ``--as-pid-1`` (the command is the namespace's init: the
runtime, or coreutils ``timeout`` under the lifetime cap, `runner.backends.capping`).

The filesystem: bwrap's new root is an empty tmpfs, remounted read-only after every mount
(``--remount-ro /``). Each entry of the image's root is bound read-only (``--ro-bind``) or
recreated (``--symlink``), except where a mount goes: a folder of the image that contains a
mount target is recreated empty on the root tmpfs (``--dir``) and its own entries bound one
level down, recursively, so mount points can be made without writing to the image tree. Then
``/proc`` (the pid namespace's own), bwrap's minimal ``/dev`` (remounted read-only: its tmpfs
has no size of its own), ``/dev/shm`` and ``/tmp`` as tmpfs of ``tmpfs_mb`` each (mode 1777),
the spec's mounts (``--ro-bind`` unless a mount is a deliberate read-write opt-in), and each
cgroup's folder read-only under ``/sys/fs/cgroup``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from runner.backends.base import SandboxSpec
from runner.backends.capping import SANDBOX_TMP, capped_command
from runner.errors import InfrastructureError

__all__ = ["bwrap_argv", "check_targets", "root_entries"]

_OWN = ("/proc", "/dev", SANDBOX_TMP)  # mounted by bwrap itself, never from the image


def root_entries(
    tree: Path, inside: str, targets: Sequence[str], seen_as: Callable[[Path], str] = str
) -> list[str]:
    """Bwrap options recreating the image folder ``inside`` around the mount ``targets``.

    Args:
        tree: the image's root on the host.
        inside: an absolute folder of the sandbox (``/`` first).
        targets: every absolute path something else is mounted on.
        seen_as: where bwrap finds a host path (`runner.backends.namespace.launcher.Staging`).

    Raises:
        InfrastructureError: a mount target lies under a symlink of the image.
    """
    options: list[str] = []
    host = tree / inside.lstrip("/")
    for name in sorted(os.listdir(host)):
        path = str(PurePosixPath(inside) / name)
        source = host / name
        if any(path == t for t in targets):
            continue
        holds = [t for t in targets if t.startswith(path + "/")]
        if source.is_symlink():
            if holds:
                raise InfrastructureError(f"mount target {holds[0]} lies under a symlink {path}")
            options += ["--symlink", os.readlink(source), path]
        elif holds and source.is_dir():
            options += ["--dir", path, *root_entries(tree, path, targets, seen_as)]
        elif source.is_dir() or source.is_file():
            options += ["--ro-bind", seen_as(source), path]
    return options


def check_targets(spec: SandboxSpec) -> None:
    """Refuse a mount target that is relative or holds ``..``.

    Raises:
        InfrastructureError: naming the target.
    """
    for mount in spec.mounts:
        if not mount.target.startswith("/") or ".." in PurePosixPath(mount.target).parts:
            raise InfrastructureError(f"mount target must be absolute and plain: {mount.target}")


def bwrap_argv(
    bwrap: str,
    spec: SandboxSpec,
    tree: Path,
    *,
    hostname: str,
    cgroup_dirs: Mapping[str, Path] | None = None,
    seen_as: Callable[[Path], str] = str,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The complete ``bwrap`` argv for ``spec`` over the image tree ``tree``.

    Args:
        bwrap: the bwrap executable.
        spec: the sandbox spec (mounts, limits, user, workdir, command).
        tree: the image's root filesystem on the host (`runner.backends.namespace.rootfs`).
        hostname: the UTS namespace's host name.
        cgroup_dirs: controller -> the sandbox's own cgroup folder, shown read-only at
            ``/sys/fs/cgroup/<controller>`` (None: none).
        seen_as: where bwrap finds a host path (default: where it is).
        seccomp_fd: the descriptor bwrap reads the seccomp filter from
            (`runner.backends.namespace.seccomp`), or None for none.

    Raises:
        InfrastructureError: a mount target lies under a symlink of the image, or is relative.
    """
    uid, _, gid = spec.user.partition(":")
    cgroups = {f"/sys/fs/cgroup/{c}": p for c, p in (cgroup_dirs or {}).items()}
    check_targets(spec)
    targets = [*_OWN, *(m.target for m in spec.mounts), *cgroups]
    shm = str(spec.limits.tmpfs_mb * 1024 * 1024)
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        uid,
        "--gid",
        gid or uid,
        "--hostname",
        hostname,
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        *root_entries(tree, "/", targets, seen_as),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        shm,
        "--tmpfs",
        "/dev/shm",  # noqa: S108 - the sandbox's own tmpfs, not a host path
        # bwrap's /dev is a tmpfs of half the RAM owned by the sandbox's user (2 GB were
        # written in it under memory 512 MB); Docker's is root's: read-only here
        "--remount-ro",
        "/dev",
        "--perms",
        "1777",
        "--size",
        shm,
        "--tmpfs",
        SANDBOX_TMP,
    ]
    for mount in sorted(spec.mounts, key=lambda m: len(PurePosixPath(m.target).parts)):
        kind = "--ro-bind" if mount.read_only else "--bind"
        argv += [kind, seen_as(mount.source), mount.target]
    for target, folder in sorted(cgroups.items()):
        argv += ["--ro-bind", str(folder), target]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--remount-ro", "/", "--chdir", spec.workdir, "--", *capped_command(spec)]
    return argv
