"""The egress witness: a seccomp user-notification filter on the worker, answered by the runtime.

Standard library only, Python 3.9+. Module map:

    kernel     ctypes wrappers: seccomp, /proc/PID/mem reads, the notification ioctls
    bpf        the filter program (arch check, io_uring denied, network calls trapped)
    sockaddr   decoding a sockaddr read from the caller's memory
    procnet    which kind of socket a descriptor of the caller is (by inode, from /proc)
    seccomp    `install` (the worker, on itself) and `attach` (the runtime): the bootstrap
    witness    `Witness`: the runtime's thread that logs and answers trapped calls; `serve`
    probe      ``python3 -m runner.runtime.egress.probe``: run a command under the witness

Wiring into a worker process (issue 18): the runtime makes ``socket.socketpair()``, starts the
worker with one end inherited; the worker calls ``seccomp.install(fd)`` first thing (a single
thread, before any user code) and closes the end; the runtime calls
``witness.serve(worker_pid, other_end, gateway_port, sink)`` at the same time, ``sink`` being
the outbound-destination log's (``audit``'s in-memory queue). ``serve`` returns the coverage
message to send when the witness is unavailable; when it is available, the hook's ``partial``
notes for non-Python children and ctypes are covered by it. Docker 20.10's default profile
(measured) denies ``process_vm_readv`` and ``pidfd_getfd``: the design needs neither.

May import: the standard library only (it runs in the sandbox, in the worker before user code).
"""

__all__ = ["seccomp", "witness"]
