"""Installing the egress witness's filter in the worker, and handing its listener to the runtime.

Standard library only, Python 3.9+. The worker calls `install` on itself before it runs any
user code; the runtime (its parent) calls `attach` at the same time, which returns the
listener descriptor a `runner.runtime.egress.witness.Witness` serves. Both ends share one
``AF_UNIX`` stream socketpair (the bootstrap channel).

The bootstrap (lines written with ``write`` and read with ``read``, which the filter never
traps, so no step waits on a notification nobody reads):

1. worker -> runtime ``P <address> <nonce>``: a buffer of the worker's memory holding a nonce.
2. The runtime checks, before any filter exists, that it can read that memory through
   ``/proc/PID/mem``; it answers ``G`` or ``N <reason>``. On ``N`` the worker installs nothing:
   the run goes on with the in-process log only (coverage ``partial``, the reason given).
3. The worker starts a helper thread, then sets ``no_new_privs`` and the filter
   (``SECCOMP_FILTER_FLAG_NEW_LISTENER``) on its main thread only (no ``TSYNC``). The helper,
   created before the filter, is not filtered: it sends the listener with ``SCM_RIGHTS``
   (``L``) and ends; the main thread joins it, so no unfiltered thread is left. (``E <reason>``
   when the kernel refused the filter: none is in force, same fallback as ``N``.)
4. The runtime answers ``K``; the worker closes its own copy of the listener, so no code it runs
   later can receive (and answer) its own notifications, and then runs user code.

Why not ``sendmsg`` from the filtered thread: the filter traps ``sendmsg`` (an address can hide
in its header), so that call would wait on a notification only the listener's future holder
could answer. Why not ``pidfd_getfd`` by the runtime: Docker 20.10's default profile denies it
(EPERM without ``CAP_SYS_PTRACE``, measured), as it denies ``process_vm_readv``.
"""

import ctypes
import os
import select
import socket
import threading
import time
from typing import List, Optional, Tuple

from runner.runtime.egress import bpf, kernel

MAX_LINE = 256
BOOTSTRAP_TIMEOUT_S = 10.0
LISTENER_LINK = "anon_inode:seccomp notify"


class Installed:
    """What `install` did in the worker.

    Attributes:
        filtered: the filter is in force in this process (and every child it starts).
        witnessed: the runtime holds the listener: every trapped call is answered by it.
            ``filtered and not witnessed`` means trapped calls fail with ``ENOSYS``.
        reason: why not witnessed (empty when witnessed).
    """

    def __init__(self, filtered: bool, witnessed: bool, reason: str) -> None:
        self.filtered = filtered
        self.witnessed = witnessed
        self.reason = reason


def read_line(fd: int, deadline: float) -> str:
    r"""One ``\n``-ended ASCII line from ``fd`` (at most `MAX_LINE` bytes) before ``deadline``.

    Raises:
        OSError: timeout (ETIMEDOUT), EOF (EPIPE), an over-long line (EPROTO).
    """
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise OSError(110, "egress witness bootstrap timed out")
        piece = os.read(fd, 1)
        if not piece:
            raise OSError(32, "egress witness bootstrap channel closed")
        data += piece
        if len(data) > MAX_LINE:
            raise OSError(71, "egress witness bootstrap line too long")
    return data[:-1].decode("ascii", "replace")


def write_line(fd: int, text: str) -> None:
    r"""Write ``text`` and ``\n`` to ``fd`` (truncated to `MAX_LINE`), with ``write``."""
    os.write(fd, text.encode("ascii", "replace")[: MAX_LINE - 1] + b"\n")


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _set_filter(machine: str) -> int:
    kernel.no_new_privs()
    program = bpf.program(machine)
    flags = kernel.SECCOMP_FILTER_FLAG_NEW_LISTENER
    try:  # 5.19+: a received notification is not cut short by a non-fatal signal
        return kernel.set_filter(program, flags | kernel.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
    except OSError as exc:
        if exc.errno != 22:
            raise
    return kernel.set_filter(program, flags)


def _send_listener(channel: int, slot: List[int], ready: threading.Event) -> None:
    """The helper thread (created before the filter, so not filtered): send the listener."""
    if ready.wait(BOOTSTRAP_TIMEOUT_S) and slot:
        sock = socket.socket(fileno=os.dup(channel))
        try:
            socket.send_fds(sock, [b"L\n"], [slot[0]])
        except OSError:
            pass
        finally:
            sock.close()


def install(channel: int, timeout_s: float = BOOTSTRAP_TIMEOUT_S) -> Installed:
    """Install the witness filter on this (worker) process; the runtime runs `attach` meanwhile.

    Args:
        channel: the worker's end of the bootstrap socketpair (left open; close it after).
        timeout_s: bound on each wait for the runtime.

    Returns:
        `Installed`. Never raises: any failure before the filter exists leaves none (and says
        why); a failure after it leaves trapped calls failing with ``ENOSYS`` (fail closed).
    """
    deadline = time.monotonic() + timeout_s
    machine = kernel.machine()
    try:
        if machine is None:
            write_line(channel, "E no seccomp syscall table for this machine")
            return Installed(False, False, "no seccomp syscall table for this machine")
        if _threads() != 1:
            write_line(channel, "E the worker has more than one thread")
            return Installed(False, False, "the worker has more than one thread")
        nonce = os.urandom(16)
        buf = ctypes.create_string_buffer(nonce, 16)
        write_line(channel, "P {} {}".format(ctypes.addressof(buf), nonce.hex()))
        answer = read_line(channel, deadline)
        if answer != "G":
            return Installed(False, False, answer[2:] or "the runtime refused the witness")
        slot: List[int] = []
        ready = threading.Event()
        helper = threading.Thread(target=_send_listener, args=(channel, slot, ready))
        helper.start()
        try:
            slot.append(_set_filter(machine))
        except OSError as exc:
            reason = "seccomp filter refused: {}".format(exc.strerror or exc)
            write_line(channel, "E " + reason)
            return Installed(False, False, reason)
        finally:
            ready.set()
            helper.join()
        answer = read_line(channel, deadline)
        os.close(slot[0])
        if answer != "K":
            return Installed(True, False, answer[2:] or "the runtime did not take the listener")
        return Installed(True, True, "")
    except OSError as exc:
        return Installed(False, False, "egress witness bootstrap failed: {}".format(exc))


def _probe(pid: int, line: str) -> Optional[str]:
    """None when the runtime can read the worker's memory, else why not."""
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "P" or not parts[1].isdigit():
        return "bad bootstrap line from the worker"
    try:
        nonce = bytes.fromhex(parts[2])
        got = kernel.read_memory(pid, int(parts[1]), len(nonce))
    except (OSError, ValueError) as exc:
        return "reading the worker's memory (/proc/PID/mem) failed: {}".format(exc)
    if got != nonce or len(nonce) != 16:
        return "reading the worker's memory returned the wrong bytes"
    return None


def _is_listener(fd: int) -> bool:
    try:
        return os.readlink("/proc/self/fd/{}".format(fd)) == LISTENER_LINK
    except OSError:
        return False


def _receive_listener(channel: int, deadline: float) -> Tuple[Optional[int], str]:
    sock = socket.socket(fileno=os.dup(channel))
    try:
        if not select.select([sock], [], [], max(deadline - time.monotonic(), 0))[0]:
            raise OSError(110, "egress witness bootstrap timed out")
        data, fds, _flags, _addr = socket.recv_fds(sock, 2, 1)
    finally:
        sock.close()
    if data == b"L\n" and len(fds) == 1 and _is_listener(fds[0]):
        return fds[0], ""
    for fd in fds:
        os.close(fd)
    if data.startswith(b"E"):
        rest = data + os.read(channel, MAX_LINE)
        return None, rest[2:].split(b"\n", 1)[0].decode("ascii", "replace")
    return None, "no listener from the worker"


def attach(
    pid: int, channel: int, timeout_s: float = BOOTSTRAP_TIMEOUT_S
) -> Tuple[Optional[int], str]:
    """The runtime's side of the bootstrap with worker ``pid`` (our child, running `install`).

    Args:
        pid: the worker's pid (as this process sees it; never taken from the worker's lines).
        channel: the runtime's end of the bootstrap socketpair (left open).
        timeout_s: bound on each wait for the worker.

    Returns:
        ``(listener fd, "")`` when this process now holds the listener, else ``(None, reason)``
        (coverage ``partial`` for that reason).
    """
    deadline = time.monotonic() + timeout_s
    try:
        line = read_line(channel, deadline)
        if line.startswith("E "):
            return None, line[2:]
        reason = _probe(pid, line)
        if reason is not None:
            write_line(channel, "N " + reason)
            return None, reason
        write_line(channel, "G")
        listener, reason = _receive_listener(channel, deadline)
        try:
            write_line(channel, "K" if listener is not None else "N " + reason)
        except OSError:  # a worker that said why it failed may be gone already: keep its reason
            if listener is not None:
                os.close(listener)
                return None, "the worker left before the listener was taken"
        return listener, reason
    except OSError as exc:
        return None, "egress witness bootstrap failed: {}".format(exc)
