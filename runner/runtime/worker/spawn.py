"""Start the worker process: its pipes, its session, the witness's bootstrap socket.

Standard library only, Python 3.9+. `start` makes the two pipes and the bootstrap socket, then
the worker: a fork of the runtime (`runner.runtime.worker.fork`) or, where
`runner.runtime.worker.fork.exec_wanted`, a fresh ``python3 -u -m runner.runtime.worker`` given
its descriptors (POSIX: ``pass_fds``, a session of its own) or handles (Windows, `spawn_options`).
The worker holds its two pipe ends and, when witnessed, its end of the bootstrap socket, nothing
of the host channel; the runtime gets the other ends (`Started`). Talking to the worker is
`runner.runtime.worker.client`'s.

The egress witness is asked for unless ``SANDBOX_REPLAY_EGRESS_WITNESS`` (`runner.wire.env.
ENV_WITNESS`) is ``off`` (the hook alone: record's local process, the hook's own tests) or the
platform is Windows (the witness is a Linux seccomp filter); without it `Started.coverage` is
the ``coverage`` message saying why it is partial.
"""

import os
import socket
import sys
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional

from runner.runtime.egress import audit
from runner.runtime.worker import fork
from runner.sdk import wallclock
from runner.wire.env import ENV_WITNESS

if TYPE_CHECKING:
    import subprocess

__all__ = ["HANDLES", "WORKER_COMMAND", "Started", "spawn_options", "start"]

WORKER_COMMAND = ("-u", "-m", "runner.runtime.worker")


# Windows (``record`` runs the runtime as a local process there): no ``pass_fds``, no
# sessions. The pipe ends travel as inheritable handles named in a ``--handles`` argument and
# listed in the child's ``STARTUPINFO`` handle list (only those are inherited); the child opens
# them with ``msvcrt.open_osfhandle`` (`runner.runtime.worker.process.main`).
HANDLES = sys.platform == "win32"
_CREATE_NEW_PROCESS_GROUP = 0x00000200


def spawn_options(
    read_fd: int,
    write_fd: int,
    witness_fd: Optional[int],
    socket_fd: int,
    handles: bool = HANDLES,
    get_handle: Optional[Any] = None,
) -> "tuple[List[str], Dict[str, Any]]":
    """The worker's arguments after its module name and the ``Popen`` options passing its fds.

    Args:
        read_fd: the worker's end of the runtime-to-worker pipe.
        write_fd: the worker's end of the worker-to-runtime pipe.
        witness_fd: the witness's bootstrap socket, when witnessed (POSIX only).
        socket_fd: that socket's fd, passed on POSIX in any case (as before).
        handles: pass Windows handles instead of fds (default: on Windows).
        get_handle: ``fd -> handle`` (default ``msvcrt.get_osfhandle``; tests inject one).
    """
    if not handles:
        tail = [str(read_fd), str(write_fd)] + ([str(witness_fd)] if witness_fd is not None else [])
        return tail, {"pass_fds": (read_fd, write_fd, socket_fd), "start_new_session": True}
    import subprocess

    if get_handle is None:
        import msvcrt  # Windows only

        get_handle = msvcrt.get_osfhandle  # type: ignore[attr-defined]
    found = [int(get_handle(read_fd)), int(get_handle(write_fd))]
    for handle in found:
        os.set_handle_inheritable(handle, True)  # type: ignore[attr-defined]
    startup = subprocess.STARTUPINFO()  # type: ignore[attr-defined]
    startup.lpAttributeList = {"handle_list": found}
    flags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", _CREATE_NEW_PROCESS_GROUP)
    return ["--handles", str(found[0]), str(found[1])], {
        "startupinfo": startup,
        "creationflags": flags,
    }


def _partial(reason: str) -> Dict[str, Any]:
    return {"type": "coverage", "partial": True, "reason": reason}


class Started(NamedTuple):
    """A started worker, as the runtime holds it.

    Attributes:
        pid: the worker's pid.
        process: the ``Popen`` of a fresh interpreter (kept, never waited on: the reaper owns
            the exit status); None for a fork.
        read_fd: the runtime's end of the worker-to-runtime pipe.
        write_fd: the runtime's end of the runtime-to-worker pipe.
        bootstrap: the runtime's end of the witness's bootstrap socket when witnessed (to
            serve, `runner.runtime.egress.witness.serve`), else None (closed already).
        coverage: without the witness, the ``coverage`` message saying why it is partial.
    """

    pid: int
    process: Optional["subprocess.Popen[bytes]"]
    read_fd: int
    write_fd: int
    bootstrap: Optional[socket.socket]
    coverage: Optional[Dict[str, Any]]


def start() -> Started:
    """Start the worker (a fork, or a fresh interpreter where that is wanted); see the module."""
    to_worker_r, to_worker_w = os.pipe()  # non-inheritable, passed explicitly below
    from_worker_r, from_worker_w = os.pipe()
    # its sitecustomize installs the run's clock before the audit hook (as in every Python
    # child): the reading until ``load`` brings the run's is the machine's time now
    environment = dict(os.environ)
    environment.setdefault(wallclock.ENV_CLOCK, repr(wallclock.real_time()))
    ours, theirs = socket.socketpair()  # the witness's bootstrap (non-inheritable)
    witnessed = os.environ.get(ENV_WITNESS) != "off" and not HANDLES
    coverage: Optional[Dict[str, Any]] = None
    if witnessed:
        environment[audit.ENV_WITNESSED] = "1"  # the worker clears it if the bootstrap fails
    elif HANDLES:  # record on Windows: the witness is a Linux seccomp filter
        coverage = _partial("egress witness unavailable on this platform")
    else:
        coverage = _partial(
            "egress witness off (a local process outside any sandbox: record's, {}=off)".format(
                ENV_WITNESS
            )
        )
    witness_fd = theirs.fileno() if witnessed else None
    process: Optional["subprocess.Popen[bytes]"] = None
    if fork.exec_wanted(environment):
        import subprocess  # only here: the fork needs none of it (~3 ms of every start)

        tail, options = spawn_options(to_worker_r, from_worker_w, witness_fd, theirs.fileno())
        process = subprocess.Popen(
            [sys.executable, *WORKER_COMMAND, *tail],
            env=environment,
            stdin=subprocess.DEVNULL,
            close_fds=True,
            **options,
        )
        pid = process.pid
    else:
        pid = fork.start(to_worker_r, from_worker_w, witness_fd, environment)
    theirs.close()
    if not witnessed:
        ours.close()
    os.close(to_worker_r)
    os.close(from_worker_w)
    return Started(pid, process, from_worker_r, to_worker_w, ours if witnessed else None, coverage)
