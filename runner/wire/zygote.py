"""The zygote's control channel: message names, the descriptor order, the exit code, limits.

Standard library only, Python 3.9+; imported by the zygote (`runner.runtime.zygote.serve`) and
by the host (`runner.backends.namespace.zygote`). The channel is one ``AF_UNIX``
``SOCK_SEQPACKET`` socket pair: each message is one datagram of canonical JSON (an object with
``op``), descriptors travel beside it as ``SCM_RIGHTS``.

Host -> zygote:
    ``config`` (once, first): ``env`` (the children's environment), ``root`` layout constants,
    ``uid``/``gid`` inside, ``hostname``, ``workdir``, ``cgroups`` (controllers bound per child),
    ``seccomp`` (the filter, hex; "" for none). No descriptor.
    ``spawn``: ``seq`` (the host's counter), ``cap_s`` (whole seconds), ``idle_cap_s`` (a warm
    pool's sandbox's cap until its run, whole seconds, or null), ``tmpfs_bytes``,
    ``rlimits`` (``[[resource, value], ...]``), ``group`` (the per-run cgroup folder's random
    name, or ""), ``argv``/``env`` (null for the runtime; a command's argv and environment
    otherwise). Descriptors: `SPAWN_FDS` (the child's stdin, stdout, stderr), then one
    ``tasks`` file per controller of ``cgroups`` when ``group`` is set.
Zygote -> host:
    ``ready`` (its pid and Python version), ``spawned`` (``seq``, ``pid`` as the zygote sees
    it; descriptor: a pidfd of the child), ``failed`` (``seq``, ``code``, ``error``),
    ``exited`` (``seq``, ``code``: the exit code, negative for a signal).
"""

__all__ = [
    "CGROUP_DIR",
    "EXIT_SETUP_FAILED",
    "MAX_MESSAGE_BYTES",
    "MAX_SPAWN_FDS",
    "RUNTIME_ARGV",
    "SPAWN_FDS",
    "TEMPLATE_ROOT",
    "ZYGOTE_FLAG",
]

# The runtime's command (runner.episode.prepare.RUNTIME_COMMAND, pinned equal by a unit test):
# a spec with this command is forked from the zygote's pre-imported runtime, never executed.
RUNTIME_ARGV = ("python3", "-u", "-m", "runner.runtime")
# ``python3 -u -m runner.runtime --zygote``: the runtime's entry point serves as the zygote
ZYGOTE_FLAG = "--zygote"
# Where the zygote's own root holds a run's root (bound over a child's own mounts, then
# ``pivot_root``) and the per-run cgroup folders' parents (read-only)
TEMPLATE_ROOT = "/.sandbox-replay/root"
CGROUP_DIR = "/.sandbox-replay/cgroup"
SPAWN_FDS = 3  # stdin, stdout, stderr of the child, in that order
MAX_SPAWN_FDS = SPAWN_FDS + 8  # and at most one tasks file per controller
MAX_MESSAGE_BYTES = 1 << 20
# A child that could not be set up (before the runtime or the command ran) exits so, its reason
# on its stderr; the namespace backend reports it as the sandbox's start failure (exit 6).
EXIT_SETUP_FAILED = 126
