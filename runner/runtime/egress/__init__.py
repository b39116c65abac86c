"""The egress witness: a seccomp user-notification filter on the worker, answered by the runtime.

Standard library only, Python 3.9+. Module map:

    kernel     ctypes wrappers: seccomp, /proc/PID/mem reads, the notification ioctls
    bpf        the filter program (arch check, io_uring denied, network calls trapped)
    sockaddr   decoding a sockaddr read from the caller's memory
    seccomp    `install` (the worker, on itself) and `attach` (the runtime): the bootstrap
    witness    `Witness`: the runtime's thread that logs and answers trapped calls
    probe      ``python3 -m runner.runtime.egress.probe``: is the witness usable here, and why not

May import: the standard library only (it runs in the sandbox, in the worker before user code).
"""

__all__ = ["seccomp", "witness"]
