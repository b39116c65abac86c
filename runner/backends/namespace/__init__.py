"""The namespace backend (Linux): one bubblewrap sandbox per run, no container engine.

Modules:
    rootfs     the image's root filesystem, exported once and cached by image id (hostile tar)
    bwrapargs  the bwrap argv: namespaces, the read-only root, tmpfs, mounts (pure)
    cgroups    memory, pids and CPU limits (cgroup v1 groups, else rlimits)
    launcher   in front of bwrap: joins the cgroups, stages sources, drops to the sandbox uid
    seccomp    the seccomp filter (Docker's default profile's refusals, x86-64 BPF)
    sandbox    one started sandbox: the bwrap process's stdio as the channel, kill, wait
    records    the record of each live sandbox, and the reaper that reads them
    backend    `NamespaceBackend`
    checks     what ``sandbox-replay doctor`` reports of it

May import: `runner.backends` (base, capping, labels, timed_write, docker's client for the one
export of an image), `runner.errors` and the standard library.
"""

from runner.backends.namespace.backend import NamespaceBackend

__all__ = ["NamespaceBackend"]
