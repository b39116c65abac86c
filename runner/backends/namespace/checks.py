"""What ``sandbox-replay doctor --backend namespace`` checks: can this host run bwrap sandboxes?

Required: bwrap is installed (fix: install the ``bubblewrap`` package); it can make a user,
pid, network, IPC and UTS namespace here (fix: allow unprivileged user namespaces); the
image's root filesystem can be had (exported once from the local engine); a probe sandbox
made by the production backend is non-root, read-only, without capabilities and has no route
out (the same probe and rules as every backend's, `runner.backends.doctor`).
Informational: whether limits are cgroups (memory with the ``oom`` status, pids, CPU) or the
rlimit fallback, and records of sandboxes whose owner died (the reaper removes them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from runner.backends import labels as L
from runner.backends.base import DEFAULT_SANDBOX_USER, ResourceLimits
from runner.backends.doctor import Check, Diagnosis, RunnerMounts, probe_checks, run_probe
from runner.backends.namespace.backend import NamespaceBackend
from runner.backends.namespace.cgroups import Host, probe_host
from runner.backends.namespace.launcher import (
    EXIT_LAUNCH_FAILED,
    Staging,
    launcher_argv,
    launcher_preexec,
)
from runner.backends.namespace.records import read_records
from runner.errors import InfrastructureError

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

__all__ = ["BWRAP_FIX", "USERNS_FIX", "diagnose", "namespace_checks"]

BWRAP_FIX = "apt-get install -y bubblewrap (Debian/Ubuntu; dnf install bubblewrap on Fedora)"
USERNS_FIX = (
    "allow user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or"
    " kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04), user.max_user_namespaces>0"
)
CGROUP_FIX = (
    "run as root on cgroup v1, else limits are rlimits: no `oom` status, no CPU limit, one"
    " sandbox at a time (a delegated cgroup v2 is not supported yet)"
)


def _userns(bwrap: str, host: Host) -> Check:
    """Bwrap makes its namespaces when started as a sandbox is: through the same launcher.

    The launcher's shell, its rlimits (without cgroups) and, as root, its drop to the sandbox's
    uid (`runner.backends.namespace.launcher`), so a launcher that cannot run here (a shell
    without ``ulimit -u`` did) fails this check, not only every run.
    """
    limits = ResourceLimits()
    uid, _, gid = DEFAULT_SANDBOX_USER.partition(":")
    staging = Staging([Path("/")], uid, gid) if os.geteuid() == 0 else None
    setpriv = shutil.which("setpriv") is not None
    launcher = launcher_argv(None, staging, setpriv=setpriv)
    argv = [*launcher, bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            preexec_fn=launcher_preexec(None if host.cgroups else limits),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("userns", False, True, f"the launcher did not run: {exc}", USERNS_FIX)
    if proc.returncode == 0:
        how = "rlimits" if not host.cgroups else "cgroups joined per sandbox"
        return Check(
            "userns",
            True,
            True,
            f"bwrap makes user, pid, net, IPC and UTS namespaces (through the launcher; {how})",
        )
    failed = "the launcher" if proc.returncode == EXIT_LAUNCH_FAILED else "bwrap"
    return Check("userns", False, True, f"{failed} failed: {proc.stderr.strip()[:300]}", USERNS_FIX)


def namespace_checks(root: Path, image: str, docker_host: str | None) -> list[Check]:
    """Every check of the namespace backend, in order (later ones not run after a failure).

    Args:
        root: the backend's folder (``STATE_DIR/namespace``).
        image: the sandbox image whose root filesystem sandboxes use.
        docker_host: the engine it is exported from the first time.
    """
    skipped = "not run: an earlier required check failed"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return [
            Check("bwrap", False, True, "bwrap is not on PATH", BWRAP_FIX),
            Check("userns", False, True, skipped, ran=False),
            Check("rootfs", False, True, skipped, ran=False),
        ]
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
    results = [Check("bwrap", True, True, f"{bwrap}: {version.stdout.strip() or '?'}")]
    host = probe_host()
    results.append(_userns(bwrap, host))
    results.append(
        Check(
            "cgroups",
            host.cgroups,
            False,
            "memory, pids and CPU limits are cgroup v1 groups"
            if host.cgroups
            else f"limits are rlimits, one sandbox at a time: {host.reason}",
            "" if host.cgroups else CGROUP_FIX,
        )
    )
    if not results[1].ok:
        return [*results, Check("rootfs", False, True, skipped, ran=False)]
    backend = NamespaceBackend(root, docker_host=docker_host, bwrap=bwrap, host=host)
    try:
        tree = backend.rootfs(image)
    except InfrastructureError as exc:
        fix = str(exc.fields.get("fix", "build the image: sandbox-replay image build"))
        return [*results, Check("rootfs", False, True, f"{image}: {exc}", fix)]
    results.append(Check("rootfs", True, True, f"{image}: {tree.image_id[:19]} at {tree.tree}"))
    try:
        results.extend(probe_checks(run_probe(backend, image)))
    except InfrastructureError as exc:
        results.append(Check("hardening", False, True, f"the probe sandbox failed: {exc}"))
    records = [r for _, r in read_records(backend.records) if r is not None]
    dead = [
        r
        for r in records
        if (owner := L.owner_from_labels(r["labels"])) is not None
        and L.owner_is_dead(owner, this_host=backend.owner.host)
    ]
    results.append(
        Check(
            "leftovers",
            not dead,
            False,
            f"{len(records)} namespace sandbox record(s), {len(dead)} of dead owners",
            "" if not dead else "they are removed at the next run (reaper)",
        )
    )
    return results


def diagnose(settings: Settings, options: BackendOptions, runner_mounts: RunnerMounts) -> Diagnosis:
    """``doctor --backend namespace`` (the registry's hook): `namespace_checks`.

    Of the settings' folder (``STATE_DIR/namespace``), image and engine; no check mounts the
    runtime.
    """
    root = settings.state_dir / "namespace"
    return Diagnosis(namespace_checks(root, settings.image, settings.docker_host))
