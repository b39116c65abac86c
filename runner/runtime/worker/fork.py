"""Start the worker as a fork of the runtime: one interpreter per sandbox, not two.

Standard library only, Python 3.9+. A fresh ``python3 -m runner.runtime.worker`` cost every
sandbox a second interpreter start and a second import of the worker's modules (~110 ms of
container CPU per run measured here on Python 3.11, against ~5 ms for this fork). The runtime
forks before ``hello``, so before any run data exists in its memory: the run spec, the manifest
and every recorded response come with ``start``, later. What the child gets is a copy of a
runtime that has read nothing but its environment (the same environment a fresh worker got).

The child (`start`, which never returns in it) then becomes what a fresh worker was:

- a session of its own (``setsid``: the cap kills its process group), as ``start_new_session``;
- no descriptor but stdin (``/dev/null``), stdout (a copy of stderr), stderr and its own pipe
  ends and bootstrap socket: every other descriptor listed in ``/proc/self/fd`` is closed (a
  fork ignores ``O_CLOEXEC``; the channel's private fds are also closed by the handler
  `runner.runtime.channel.isolate_stdio` registered); every object allocated before the fork
  is frozen out of the garbage collector (``gc.freeze``, in the runtime just before the fork: the
  child inherits it), so that no runtime object the child never uses can be finalized there and
  close a descriptor number the worker has reused;
- dumpable again (``prctl(PR_SET_DUMPABLE, 1)``; a fork keeps the runtime's 0, an ``execve``
  would have reset it): the egress witness reads the worker's memory for the addresses of its
  trapped calls (``/proc/PID/mem``), which the kernel refuses for a non-dumpable process;
- ``SIGINT`` raises ``KeyboardInterrupt`` again (PID 1 dropped Python's handler, `runner.
  runtime.pid1.drop_signal_handlers`);
- the environment the runtime computed for it (`runner.runtime.worker.spawn.start`) and
  the wall clock frozen at the reading it exports (what ``sitecustomize`` did in a fresh one);
  the audit hook, already installed in the runtime, logs to the child log from here (its
  owner is the runtime's pid; its queue is emptied at fork, `runner.runtime.egress.audit`);
- then `runner.runtime.worker.process.main`, as before: the witness's filter first.

The fork happens while one other thread of the runtime exists (the lifetime cap's, `runner.
runtime.pid1.LifetimeTimer`, which sleeps and holds no lock the child uses); the child has one
thread. Where fork is not the platform's way (not Linux) or ``SANDBOX_REPLAY_WORKER_START`` is
``exec``, the client starts a fresh interpreter instead (`exec_wanted`).
"""

import contextlib
import gc
import os
import signal
import sys
import warnings
from typing import Dict, Iterable, List, Optional

from runner.runtime import pid1
from runner.runtime.egress import audit
from runner.sdk import wallclock
from runner.wire.env import ENV_WORKER_START

__all__ = ["ENV_WORKER_START", "close_fds_except", "exec_wanted", "start"]

EXIT_WORKER_FAILED = 70
MAIN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def exec_wanted(environ: "os._Environ[str] | Dict[str, str]") -> bool:
    """True when the worker is started as a fresh interpreter instead of a fork.

    Not Linux (forking a threaded process is not safe on macOS, and the witness is Linux
    only), no ``os.fork``, or `ENV_WORKER_START` set to ``exec``.
    """
    return (
        not sys.platform.startswith("linux")
        or not hasattr(os, "fork")
        or environ.get(ENV_WORKER_START) == "exec"
    )


def close_fds_except(keep: Iterable[int]) -> None:
    """Close every open descriptor of this process not in ``keep``.

    The open ones are read from ``/proc/self/fd`` (bounded by what is open, not by the limit
    of open files, which is 1048576 in a container here).
    """
    kept = set(keep)
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in kept:
            with contextlib.suppress(OSError):  # the listing's own descriptor is closed already
                os.close(int(name))


def start(
    read_fd: int, write_fd: int, witness_fd: Optional[int], environment: Dict[str, str]
) -> int:
    """Fork the worker; return its pid (in the runtime). In the child this never returns.

    Args:
        read_fd: the worker's end of the request pipe.
        write_fd: the worker's end of the answer pipe.
        witness_fd: its end of the witness's bootstrap socket, or None (no witness).
        environment: the worker's whole environment.

    Raises:
        OSError: the fork failed (in the runtime).
    """
    # imported once, here, for both; ``inspect`` and ``hashlib`` are what every ``@tool``
    # decoration needs (signatures, schema hashes): the worker imports tool modules after
    # ``start``, so their ~18 ms are no longer between a run's assignment and its first call
    import hashlib  # noqa: F401
    import inspect  # noqa: F401

    from runner.runtime.worker import process

    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # the child finalizes none of these objects, and the runtime's own collections no longer
    # write to (and so copy) the pages the two share
    _freeze()
    with warnings.catch_warnings():  # 3.12+: "multi-threaded, fork() may deadlock" (above)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        return pid
    code, stage = EXIT_WORKER_FAILED, "failed to start"
    try:
        argv = _become_worker(read_fd, write_fd, witness_fd, environment)
        stage = "ended by"  # from here tool code runs: a SIGINT it sends itself, say
        code = process.main(argv)
    except BaseException as exc:  # the runtime sees the exit code and the pipe closing
        with contextlib.suppress(Exception):
            sys.stderr.write("sandbox-replay worker: {}: {!r}\n".format(stage, exc))
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    return 0  # not reached: for the type checker


def _freeze() -> None:
    """``gc.freeze`` where the interpreter has it (CPython 3.7+; not PyPy)."""
    freeze = getattr(gc, "freeze", None)
    if freeze is not None:
        freeze()


def _become_worker(
    read_fd: int, write_fd: int, witness_fd: Optional[int], environment: Dict[str, str]
) -> List[str]:
    """Make this child what a fresh worker is (the module's list); return `process.main`'s argv."""
    os.setsid()
    fds = [read_fd, write_fd] + ([] if witness_fd is None else [witness_fd])
    close_fds_except([0, 1, 2, *fds])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with audit.unnoted():  # its ctypes lookup is the runtime's machinery, not foreign code
        problem = pid1.set_dumpable(True)
    if problem is not None:  # the witness then logs its calls without an address
        sys.stderr.write("sandbox-replay worker: {}\n".format(problem))
    os.environ.clear()
    os.environ.update(environment)
    audit.set_witnessed(environment.get(audit.ENV_WITNESSED) == "1")
    audit.gateway_from_env()
    reading = environment.get(wallclock.ENV_CLOCK)
    if reading is not None:
        wallclock.set_reading(float(reading), export=False)
    sys.argv = [MAIN_PATH] + [str(fd) for fd in fds]
    return sys.argv[1:]
