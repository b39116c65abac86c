"""What leaves the sandbox's tools: the outbound-destination log, its coverage, and its witness.

Standard library only, Python 3.9+; mounted into sandboxes. Imported by every Python child at
start-up (``site/sitecustomize.py``), so this file imports nothing.

The in-process log: ``audit`` (the audit hook: state, sinks, destinations, coverage; the host
reads its cap and destination key), ``events`` (what each audited event names: a destination, a
child program, a foreign library; pure functions), ``programs`` (which child processes escape
the hook), ``childlog`` (the file Python children report to, forwarded by the runtime), and
``site/`` (the ``sitecustomize.py`` that loads the hook and the run's clock in every Python
child).

The witness outside the worker: a seccomp user-notification filter the worker
installs on itself, answered by the runtime. ``kernel`` (ctypes: seccomp, ``/proc/PID/mem``
reads, the notification ioctls), ``bpf`` (the filter: arch check, io_uring denied, network calls
trapped), ``sockaddr`` (decoding an address read from the caller), ``msghdr`` (a ``sendmsg``'s
headers and payload read from the caller), ``procnet`` (which kind of
socket a descriptor of the caller is, by inode), ``seccomp`` (`install` in the worker, `attach`
in the runtime: the bootstrap), ``witness`` (`Witness`, the runtime's thread that logs and
answers; `serve`), ``dns`` (the resolver's queries to the nameserver read as the lookups of
their names, answered ``REFUSED``), ``probe`` (``python3 -m runner.runtime.egress.probe``: a
command under the witness; ``doctor`` runs its self-test).

Wired into the worker (`runner.runtime.worker`): the runtime makes ``socket.socketpair()`` and
starts the worker with one end inherited (and `audit.ENV_WITNESSED` set); the worker calls
``seccomp.install(fd)`` first thing (a single thread, before any user code) and closes the end;
the runtime calls ``witness.serve(worker_pid, other_end, None, audit.record_witnessed)``
meanwhile and tells the witness the model gateway's port once it runs. ``serve`` returns the
coverage message the runtime sends when the witness is unavailable (the worker's hook then
notes children and ctypes as partial, as before). Under the witness the hook leaves IP-family
connects and sends to it (each attempt counted once) and its notes for children and ctypes are
clock-only (``partial: false``): coverage is ``full`` unless something else is partial. A
foreign-ABI syscall kills its caller (``SIGSYS``, sent by the witness) and is logged as kind
``foreign_abi``. Docker 20.10's default profile (measured) denies ``process_vm_readv`` and
``pidfd_getfd``: the design needs neither.

May import: the standard library and `runner.sdk.wallclock` (the child's clock, from
``site/``).
"""

__all__ = ["audit", "seccomp", "witness"]
