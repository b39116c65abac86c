"""The namespace backend (Linux): one namespace sandbox per run, no container engine.

Each sandbox is forked from a zygote (the default: a pre-imported runtime that forks
every sandbox into fresh namespaces, `runner.runtime.zygote`) or started as its own bwrap
(``start="bwrap"``).

Modules:
    rootfs     the image's root filesystem, exported once and cached by image id (hostile tar)
    bwrapargs  the bwrap argv: namespaces, the read-only root, tmpfs, mounts (pure)
    cgroups    memory, pids and CPU limits (cgroup v1 groups, else rlimits)
    launcher   in front of bwrap: joins the cgroups, stages sources, drops to the sandbox uid
    seccomp    the seccomp filter (Docker's default profile's refusals, x86-64 BPF)
    sandbox    one started sandbox: the bwrap process's (or zygote child's) stdio as the
               channel, kill, wait
    zygoteargs the bwrap argv of a zygote's own sandbox: its view and the runs' root (pure)
    zygote     the host's end of one zygote: start, spawn (pipes, pidfd), exits, close
    zygotes    one zygote per key, started on first use, replaced when gone
    records    the record of each live sandbox, and the reaper that reads them
    backend    `NamespaceBackend`
    checks     what ``sandbox-replay doctor`` reports of it

May import: `runner.backends` (base, capping, labels, timed_write, docker's client for the one
export of an image), `runner.errors` and the standard library.
"""

from runner.backends.namespace.backend import NamespaceBackend

__all__ = ["NamespaceBackend"]
