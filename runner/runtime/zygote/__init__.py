"""The namespace backend's zygote: one pre-imported runtime that forks a fresh sandbox per run.

Standard library only, Python 3.9+ (it runs the image's interpreter). A sandbox's
own start was ~90-100 ms of CPU importing the runtime, paid again in every run. The zygote
imports the runtime once per key (image, mounts, user, environment: `runner.backends.
namespace.zygotes`) and forks each sandbox from there. A fork is not a reused sandbox: each
child enters namespaces no process had before and pivots into a root no run wrote, and only
then can anything of its run reach it.

Modules:
    serve    the zygote's loop: ``config``, ``spawn`` -> fork, ``exited`` (its channel's
             messages are `runner.wire.zygote`'s, shared with the host)
    isolate  what a child does to itself: cgroups, rlimits, namespaces, mounts, pivot,
             capabilities, seccomp

**Why a child holds nothing of another run, nor of the zygote beyond the runtime's code.**

1. *What the zygote holds.* Its process is ``python3 -u -m runner.runtime --zygote FD``
   (`runner.runtime.__main__`). It receives, on its control socket only: one ``config`` (the
   children's environment, which is the same for every run of the key and is a run's
   environment today; the layout's constants; the uid and gid; the seccomp filter's bytes),
   then ``spawn`` messages, each holding numbers (a sequence number, the lifetime cap, the
   tmpfs size, rlimit values), a cgroup folder's name (random, ``zg-`` and 24 hex digits, made
   by the host for that one sandbox) and, for a command that is not the runtime (a probe, the
   conformance suite's commands), that command's argv and environment; beside each spawn,
   the child's three pipe ends and its cgroups' ``tasks`` files as descriptors. It never
   receives a run spec, a manifest, a task, a trace or a tool: those travel in the ``start``
   message on the child's own stdin, which the zygote never reads (it closes its copies of
   the pipe ends right after the fork). It imports only the runtime's modules
   (`runner.runtime.zygote.serve.PRELOAD`): no tool module, no user code. It starts no
   thread and installs no audit hook; it is not dumpable.
2. *The order in each child.* fork (the first child: the run's pipes become its stdio, every
   other descriptor is closed, it joins the run's cgroups, sets the run's rlimits,
   unshares user, mount, PID, network, IPC, UTS and cgroup namespaces and maps the
   sandbox's uid and gid) -> fork (the second child, PID 1 of the new PID namespace: binds
   the run's root, mounts its own ``/proc``, ``/tmp``, ``/dev/shm``, ``/dev/pts``, pivots into
   the root and detaches the zygote's, brings ``lo`` up, ``setsid``, drops every capability,
   ``no_new_privs``, the seccomp filter) -> only then the runtime's ``main``, which makes
   itself not dumpable, arms the lifetime cap, forks its worker, says ``hello`` and reads the
   run spec from ``start``. Nothing reads the run spec before the pivot.
3. *So a child's memory* is the zygote's at the fork (the runtime's modules, the config, the
   spawn counters) plus what its own run sends it afterwards. No other run's data was ever in
   the zygote, so none is in the child; its siblings' memory is theirs (separate address
   spaces), and a sibling cannot be named from inside: each child is the init of its own PID
   namespace (``/proc`` lists its processes only), its network, IPC (no shared memory or
   message queue across), UTS and mount namespaces are its own, its ``/tmp`` and ``/dev/shm``
   fresh tmpfs, its ``/dev/pts`` a new instance. The zygote is outside every child's PID
   namespace (no pid names it); signals and ``ptrace`` need a pid. `tests/integration/
   test_attacks_zygote.py` runs a sibling's attacks while another run holds a secret.
4. *Equal hardening.* The same as bwrap's sandbox (`runner.backends.namespace.bwrapargs`): no
   capabilities (bounding set empty), no network but ``lo``, the same seccomp filter (which
   refuses ``unshare``, ``mount``, ``setns`` and every ``clone`` with a namespace flag, so no
   nested user namespace), read-only root (the template's mounts are copied into the
   child's user namespace locked: read-only stays read-only), size-limited ``/tmp``, cgroup
   or rlimit limits set before the namespaces exist, its own session. ``--die-with-parent``:
   the zygote is PID 1 of its bwrap's PID namespace, so when it ends the kernel kills every
   process of every namespace nested in it; it ends with its bwrap (``--die-with-parent``),
   which ends with the host's thread that started it, and at end-of-file on its control
   socket.

May import: the standard library and the runtime's modules (it imports them all, once).
"""

__all__ = ["isolate", "serve"]
