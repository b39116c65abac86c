"""What every Docker sandbox is created with: the hardened host config, PID 1 and environment.

Hardening of every container (SPEC.md; asserted flag by flag in
tests/unit/backends/test_docker_backend.py): ``network_mode=none``; read-only root filesystem; a
size-limited tmpfs ``/tmp`` with ``HOME`` and ``TMPDIR`` in it; a private IPC namespace whose
``/dev/shm`` is no larger than ``/tmp`` (``shm_size``: multiprocessing still works) and whose
POSIX message queues take no memory (``msgqueue`` ulimit 0: ``/dev/mqueue`` creates nothing);
``cap_drop=ALL``; ``no-new-privileges``; pids, memory (swap equal to memory: none extra) and
CPU limits; user 10001:10001; the ``none`` log driver (the output is captured over attach); no
host environment (only the spec's ``env``; docker-py's proxy injection is off); bind mounts in
the structured form with ``read_only`` (paths with spaces, colons, non-ASCII work).

Containment when the host is gone (DOCKER-NOTES.md "Lifecycle traps"):
- The runtime (``SandboxSpec.init``) is itself PID 1 and enforces the cap, read from
  `CAP_ENV` (`runner.runtime.pid1`: not dumpable, no handler for any signal, orphans reaped):
  the process holding the channel is then the one the kernel protects.
- Any other command runs under the sandbox's hard lifetime cap (`capped_command`): PID 1 is
  coreutils ``timeout -s KILL N`` (the image's execute-only copy `CAP_PROGRAM` when present,
  else ``timeout``), its only child the spec's command. The kernel lets no process of the
  container stop, kill or (execute-only: not dumpable) ptrace a namespace's PID 1, so tool
  code cannot freeze the cap the way it can a ``timeout`` that is the child of an init
  (measured: one ``SIGSTOP`` did). ``timeout`` forwards SIGTERM to the command, which stands in
  for docker's init process; what it does not do is reap orphaned grandchildren (they wait
  as zombies, within the pids limit, until the container ends). When the cap fires the
  command is SIGKILLed and the container exits 137 (``timeout -s KILL`` reports it so).
- The container is created with ``StdinOnce`` (docker-py: ``stdin_open`` and not
  ``detach``): when the attach connection closes, also because the host process died, the
  engine closes the container's stdin and the runtime sees end-of-file and exits
  (`runner.runtime.channel`). Without ``StdinOnce`` a half-close never reaches the process.
"""

from __future__ import annotations

from docker.types import HostConfig, LogConfig, Mount, Ulimit

from runner.backends.base import SandboxSpec
from runner.backends.capping import (
    CAP_ENV,
    CAP_PROGRAM,
    CAP_SCRIPT,
    SANDBOX_TMP,
    capped_command,
    sandbox_environment,
)

__all__ = [
    "CAP_ENV",
    "CAP_PROGRAM",
    "SANDBOX_TMP",
    "capped_command",
    "host_config",
    "sandbox_environment",
]

_CAP_SCRIPT = CAP_SCRIPT  # the shared cap script (runner.backends.capping), by its old name


def host_config(
    api_version: str,
    spec: SandboxSpec,
    *,
    runtime: str | None = None,
    mounts: list[Mount] | None = None,
) -> HostConfig:
    """The hardened ``HostConfig`` for ``spec`` (see the module docstring).

    ``runtime`` is the engine's OCI runtime (``Runtime``; `runner.backends.docker.runtimes`):
    None leaves the key out, so the engine's default runs the container. ``mounts`` are the
    engine's mounts when they are not ``spec.mounts`` bound as they are (copy mode's volumes,
    `runner.backends.docker.hostfiles`).
    """
    limits = spec.limits
    return HostConfig(
        version=api_version,
        runtime=runtime,
        network_mode="none",
        read_only=True,
        tmpfs={SANDBOX_TMP: f"rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777"},
        ipc_mode="private",
        shm_size=limits.tmpfs_mb * 1024 * 1024,
        ulimits=[Ulimit(name="msgqueue", soft=0, hard=0)],
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=limits.pids_limit,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        nano_cpus=round(limits.cpus * 1e9),
        init=False,  # PID 1 is the runtime or the lifetime cap (`capped_command`), never docker's
        log_config=LogConfig(type="none"),
        mounts=mounts
        if mounts is not None
        else [
            Mount(target=m.target, source=str(m.source), type="bind", read_only=m.read_only)
            for m in spec.mounts
        ],
    )
