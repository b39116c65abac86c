"""The bwrap argv of a zygote's own sandbox (pure: no process, no mount; unit-tested).

The zygote (`runner.runtime.zygote`) runs in one bwrap sandbox per key
(`runner.backends.namespace.zygote`) that holds two views of the image:

- its own root, as a run's today (`runner.backends.namespace.bwrapargs`): the image's entries
  read-only over a tmpfs root, its ``/proc``, bwrap's ``/dev`` (read-only), a 1 MiB ``/tmp``,
  the run's mounts and the runtime's packages (`runtime_mounts`: the zygote imports the
  runtime from there);
- the root of every run it forks, under `TEMPLATE_ROOT`: the same entries and mounts, and
  empty ``/proc``, ``/tmp``, ``/sys/fs/cgroup/<controller>`` and a ``/dev`` of bwrap's
  (read-only) whose ``shm`` and ``pts`` each child covers with its own;
- the host's ``sandbox-replay`` cgroup folders read-only under `CGROUP_DIR`, from which each
  child binds its own run's folder.

Unlike a run's bwrap it keeps user namespaces creatable (no ``--disable-userns``) and loads no
seccomp filter: each child enters fresh namespaces itself and loads the filter before its run
(`runner.runtime.zygote.isolate`). Everything else is a run's: all namespaces unshared (the
zygote's user namespace maps only the sandbox's uid and gid), no capability, ``--die-with-parent``,
``--new-session``, ``--as-pid-1`` (its children's namespaces die with it), the root read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from runner import resources
from runner.backends.base import Mount, SandboxSpec
from runner.backends.capping import SANDBOX_TMP
from runner.backends.namespace.bwrapargs import check_targets, root_entries
from runner.wire.protocol import RUNTIME_ROOT, SANDBOX_PACKAGES
from runner.wire.zygote import CGROUP_DIR, RUNTIME_ARGV, TEMPLATE_ROOT, ZYGOTE_FLAG

__all__ = ["ZYGOTE_TMPFS_BYTES", "runtime_mounts", "zygote_argv"]

ZYGOTE_TMPFS_BYTES = 1024 * 1024  # the zygote writes nothing; Python needs a /tmp to exist
_OWN = ("/proc", "/dev", SANDBOX_TMP)
_TOP = str(PurePosixPath(TEMPLATE_ROOT).parent)  # /.sandbox-replay: the zygote's own folder


def runtime_mounts(package: Path | None = None) -> list[Mount]:
    """The sandbox side of ``runner`` read-only under ``RUNTIME_ROOT/runner``: the zygote's own.

    The same mounts as a run's (``runner.episode.prepare.runner_mounts``), in the zygote's view
    only: a zygote for a command other than the runtime (a probe) still imports the runtime.
    """
    package = package or resources.package_dir()
    target = f"{RUNTIME_ROOT}/runner"
    mounts = [Mount(package / "__init__.py", f"{target}/__init__.py")]
    return mounts + [Mount(package / name, f"{target}/{name}") for name in SANDBOX_PACKAGES]


def _under(options: Sequence[str], prefix: str) -> list[str]:
    """``root_entries`` options moved under ``prefix`` (destinations only)."""
    out: list[str] = []
    index = 0
    while index < len(options):
        option = options[index]
        if option == "--dir":
            out += [option, prefix + options[index + 1]]
            index += 2
        elif option in ("--symlink", "--ro-bind"):
            out += [option, options[index + 1], prefix + options[index + 2]]
            index += 3
        else:  # root_entries makes no other option
            raise ValueError(f"unexpected bwrap option {option!r}")
    return out


def _dirs(path: str) -> list[str]:
    """``--dir`` for ``path`` and each of its parents below the root, outermost first."""
    parts = PurePosixPath(path).parts[1:]
    return [arg for i in range(len(parts)) for arg in ("--dir", "/" + "/".join(parts[: i + 1]))]


def zygote_argv(
    bwrap: str,
    spec: SandboxSpec,
    tree: Path,
    *,
    control_fd: int,
    cgroup_bases: Mapping[str, Path] | None = None,
    seen_as: Callable[[Path], str] = str,
) -> list[str]:
    """The complete argv of the zygote for sandboxes like ``spec`` over the image ``tree``.

    Args:
        bwrap: the bwrap executable.
        spec: a spec of the key (its mounts, user; limits and command are each run's own).
        tree: the image's root filesystem on the host.
        control_fd: the zygote's end of its control socket (kept open through bwrap).
        cgroup_bases: controller -> the host's ``sandbox-replay`` group folder (None: rlimits).
        seen_as: where bwrap finds a host path (`runner.backends.namespace.launcher.Staging`).

    Raises:
        InfrastructureError: a mount target is relative or lies under a symlink of the image.
    """
    uid, _, gid = spec.user.partition(":")
    check_targets(spec)
    bases = dict(cgroup_bases or {})
    cgroup_targets = [f"/sys/fs/cgroup/{c}" for c in sorted(bases)]
    mounts = sorted(spec.mounts, key=lambda m: len(PurePosixPath(m.target).parts))
    targets = [*_OWN, *(m.target for m in mounts)]
    taken = {m.target for m in mounts}
    own = mounts + [m for m in runtime_mounts() if m.target not in taken]
    own.sort(key=lambda m: len(PurePosixPath(m.target).parts))
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        uid,
        "--gid",
        gid or uid,
        "--hostname",
        "sandbox",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        *root_entries(tree, "/", [*_OWN, *(m.target for m in own), _TOP], seen_as),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        str(ZYGOTE_TMPFS_BYTES),
        "--tmpfs",
        SANDBOX_TMP,
    ]
    for mount in own:
        argv += ["--ro-bind" if mount.read_only else "--bind", seen_as(mount.source), mount.target]
    # the run's root, beside the zygote's own
    argv += _dirs(TEMPLATE_ROOT)
    argv += _under(root_entries(tree, "/", [*targets, *cgroup_targets], seen_as), TEMPLATE_ROOT)
    argv += ["--dir", TEMPLATE_ROOT + "/proc", "--dir", TEMPLATE_ROOT + SANDBOX_TMP]
    argv += ["--dev", TEMPLATE_ROOT + "/dev", "--remount-ro", TEMPLATE_ROOT + "/dev"]
    for mount in mounts:
        kind = "--ro-bind" if mount.read_only else "--bind"
        argv += [kind, seen_as(mount.source), TEMPLATE_ROOT + mount.target]
    for target in cgroup_targets:
        argv += _dirs(TEMPLATE_ROOT + target)
    for controller, base in sorted(bases.items()):
        argv += ["--ro-bind", str(base), f"{CGROUP_DIR}/{controller}"]
    argv += ["--remount-ro", "/", "--chdir", "/", "--", *RUNTIME_ARGV, ZYGOTE_FLAG]
    argv.append(str(control_fd))
    return argv
