"""Memory, pids and CPU limits of a namespace sandbox: cgroups where the host allows, else rlimits.

cgroup v1 (one hierarchy per controller, ``/sys/fs/cgroup/{memory,pids,cpu}``): a sandbox gets
a child group ``sandbox-replay/<name>`` of the group this process is in for each controller
(``/proc/self/cgroup``), so whatever limits this process already has still cover it. The
groups are created and written by this process (root, or a user the groups were delegated to)
before the sandbox's first process exists, and the sandbox is moved in by its launcher
(`runner.backends.namespace.launcher`) before it ``exec``s bwrap, so every process of the
sandbox is counted.

- memory: ``memory.limit_in_bytes`` and, with swap accounting, ``memory.memsw.limit_in_bytes``
  at the same value (no extra swap, as Docker's ``memswap_limit``); an OOM kill shows in
  ``memory.oom_control``'s ``oom_kill`` counter, read after the end (`Cgroups.oom_killed`).
- pids: ``pids.max``. CPU: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (period 100 ms).

A delegated cgroup v2 (``/sys/fs/cgroup/cgroup.controllers`` and a writable own group) is not
implemented yet: such hosts get the rlimit fallback. Without cgroups the launcher sets rlimits
(``setrlimit``, `runner.backends.namespace.launcher.launcher_preexec`): address space for
memory (an allocation fails, the kernel reports no OOM) and the processes of the sandbox's user
for pids, shared by every sandbox of that uid (so sandboxes then run one at a time); CPU is
not limited. `Host.capabilities` says which.

The sandbox sees none of this: no ``/sys`` of the host is mounted, except each group's own
folder read-only at ``/sys/fs/cgroup/<controller>`` (so the limits can be read, not changed).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from runner.backends.base import ResourceLimits
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["CONTROLLERS", "Cgroups", "Host", "probe_host", "remove_groups"]

CONTROLLERS = ("memory", "pids", "cpu")
CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "sandbox-replay"
CFS_PERIOD_US = 100_000
_REMOVE_TRIES = 50


@dataclass(frozen=True)
class Host:
    """What the host lets this process do with limits.

    Attributes:
        bases: controller -> the folder our sandbox groups go into (``.../sandbox-replay``);
            empty when cgroups are not usable (rlimits then).
        reason: why cgroups are not used ("" when they are).
    """

    bases: dict[str, Path]
    reason: str = ""

    @property
    def cgroups(self) -> bool:
        """Whether memory, pids and CPU limits are cgroups."""
        return bool(self.bases)

    def capabilities(self) -> dict[str, bool]:
        """``reports_oom``, ``pids_limit``, ``cpu_limit`` (the conformance flags) of this host."""
        return {"reports_oom": self.cgroups, "pids_limit": True, "cpu_limit": self.cgroups}


def _own_groups(proc_cgroup: str) -> dict[str, str]:
    """Controller -> this process's group path, from ``/proc/self/cgroup`` (v1 lines)."""
    found: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(","):
            found[controller] = parts[2]
    return found


def probe_host(root: Path = CGROUP_ROOT) -> Host:
    """Whether cgroup v1 groups for every controller of `CONTROLLERS` can be made here.

    Makes (and keeps) the ``sandbox-replay`` parent groups; never raises.
    """
    if (root / "cgroup.controllers").exists():
        return Host({}, "cgroup v2 (a delegated v2 group is not supported yet): rlimits")
    try:
        own = _own_groups(Path("/proc/self/cgroup").read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError) as exc:
        return Host({}, f"cannot read /proc/self/cgroup: {exc}")
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS:
        mount = root / controller
        if not (mount / "cgroup.procs").exists():
            return Host({}, f"no cgroup v1 {controller} controller at {mount}")
        base = mount / own.get(controller, "/").lstrip("/") / GROUP
        try:
            base.mkdir(exist_ok=True)
        except OSError as exc:
            return Host({}, f"cannot create {base}: {exc.strerror}")
        if not os.access(base, os.W_OK):
            return Host({}, f"{base} is not writable")
        bases[controller] = base
    return Host(bases)


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="ascii")


class Cgroups:
    """The groups of one sandbox (one per controller), made with the limits written.

    Args:
        host: the probed host (`probe_host`), with cgroups usable.
        name: the sandbox's name (a folder name: `runner.backends.labels.container_name`).
        limits: the sandbox's limits.

    Raises:
        InfrastructureError: a group could not be made or written (the made ones are removed).
    """

    def __init__(self, host: Host, name: str, limits: ResourceLimits) -> None:
        self.name = name
        self.paths = {c: base / name for c, base in host.bases.items()}
        try:
            for path in self.paths.values():
                path.mkdir()
            memory = self.paths["memory"]
            size = str(limits.memory_mb * 1024 * 1024)
            _write(memory / "memory.limit_in_bytes", size)
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", size)
            _write(self.paths["pids"] / "pids.max", str(limits.pids_limit))
            cpu = self.paths["cpu"]
            _write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", str(max(1000, round(limits.cpus * CFS_PERIOD_US))))
        except OSError as exc:
            self.remove()
            raise InfrastructureError(f"cannot set up the sandbox's cgroups: {exc}") from exc

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the launcher writes its pid into."""
        return [str(path / "cgroup.procs") for path in self.paths.values()]

    def tasks_files(self) -> list[str]:
        """The ``tasks`` files a zygote's child writes ``0`` into (`runner.runtime.zygote`).

        A single-threaded process moving itself by its thread (``0`` into ``tasks``) does not
        take the cgroup v1 threadgroup lock, whose write side waits for an RCU grace period
        (``cgroup_procs_write_start``; measured: 0-19 ms a join through ``cgroup.procs``).
        """
        return [str(path / "tasks") for path in self.paths.values()]

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of the sandbox (``oom_kill`` > 0)."""
        try:
            text = (self.paths["memory"] / "memory.oom_control").read_text(encoding="ascii")
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value) > 0
        return False

    def pids(self) -> list[int]:
        """Pids still in the sandbox's pids group."""
        try:
            text = (self.paths["pids"] / "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            return []
        return [int(p) for p in text.split() if p.isdigit()]

    def kill_all(self) -> None:
        """SIGKILL every process still in the groups."""
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, 9)

    def remove(self) -> None:
        """Remove the groups (after killing what is left; retried while they drain)."""
        remove_groups(list(self.paths.values()))


def remove_groups(paths: list[Path]) -> None:
    """Remove cgroup folders, killing their processes first; gives up after ~1 s each."""
    for path in paths:
        if not path.is_dir():
            continue
        for _ in range(_REMOVE_TRIES):
            try:
                procs = (path / "cgroup.procs").read_text(encoding="ascii").split()
            except OSError:
                procs = []
            for pid in procs:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), 9)
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
        else:
            log.warning("cgroup_remove_failed", path=str(path))
