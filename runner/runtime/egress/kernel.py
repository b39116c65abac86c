"""The kernel calls the egress witness needs, through ctypes (standard library only, 3.9+).

Docker 20.10's default seccomp profile denies ``process_vm_readv`` and ``pidfd_getfd`` without
``CAP_SYS_PTRACE`` (measured: EPERM): memory is read through ``/proc/PID/mem`` and the listener
is passed with ``SCM_RIGHTS`` (`runner.runtime.egress.seccomp`).

Numbers are the Linux UAPI's (``linux/seccomp.h``, ``asm/unistd_64.h``, ``asm-generic/unistd.h``)
for the two architectures the sandbox image is built for, x86_64 and aarch64. Every wrapper
raises `OSError` with the errno the kernel gave; none retries.
"""

import contextlib
import ctypes
import os
import struct
from typing import Dict, Iterator, List, Optional, Tuple

# AUDIT_ARCH_* (linux/audit.h): the value of seccomp_data.arch for a native syscall.
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

# name -> number, per machine (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h).
SYSCALLS: Dict[str, Dict[str, int]] = {
    "x86_64": {
        "socket": 41,
        "connect": 42,
        "sendto": 44,
        "sendmsg": 46,
        "sendmmsg": 307,
        "seccomp": 317,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    "aarch64": {
        "socket": 198,
        "connect": 203,
        "sendto": 206,
        "sendmsg": 211,
        "sendmmsg": 269,
        "seccomp": 277,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
}
AUDIT_ARCH = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_GET_NOTIF_SIZES = 3
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV = 1 << 5
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
# _IOWR('!', 0, struct seccomp_notif[80]), _IOWR('!', 1, struct seccomp_notif_resp[24]),
# _IOW('!', 2, __u64)
NOTIF_RECV = 0xC0502100
NOTIF_SEND = 0xC0182101
NOTIF_ID_VALID = 0x40082102
NOTIF_ADDFD = 0x40182103  # _IOW('!', 3, struct seccomp_notif_addfd[24])
ADDFD_FLAG_SETFD = 1
NOTIF_SIZE = 80
RESP_SIZE = 24

# the interpreter's own namespace holds libc (no ``ctypes.util.find_library``: it runs
# ``ldconfig -p`` in a subprocess, milliseconds at every worker start)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.ioctl.restype = ctypes.c_int
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
_libc.connect.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
_libc.connect.restype = ctypes.c_int


def machine() -> Optional[str]:
    """``x86_64``/``aarch64`` when the witness knows this machine's numbers, else None."""
    name = os.uname().machine.lower()  # not `platform`: ~6 ms to import
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    return name if name in SYSCALLS else None


def _check(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def syscall(name: str, *args: object) -> int:
    """Call syscall ``name`` of this machine with C-typed ``args``; its result.

    Raises:
        OSError: the kernel's error (ENOSYS for a syscall this machine's table lacks).
    """
    arch = machine()
    if arch is None:
        raise OSError(38, "no syscall table for this machine")
    return _check(_libc.syscall(ctypes.c_long(SYSCALLS[arch][name]), *args))


def no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: required for an unprivileged seccomp filter."""
    _check(
        _libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), 0)
    )


def set_filter(program: bytes, flags: int) -> int:
    """``seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)``: the listener fd (NEW_LISTENER)."""
    count = len(program) // 8
    filt = ctypes.create_string_buffer(program, len(program))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(count, ctypes.cast(filt, ctypes.c_void_p))
    return syscall(
        "seccomp", ctypes.c_uint(SECCOMP_SET_MODE_FILTER), ctypes.c_uint(flags), ctypes.byref(prog)
    )


@contextlib.contextmanager
def _memory(pid: int, flags: int) -> Iterator[int]:
    """``/proc/PID/mem`` opened with ``flags``; an unmapped or impossible address is EFAULT."""
    fd = os.open("/proc/{}/mem".format(pid), flags | os.O_CLOEXEC)
    try:
        yield fd
    except OverflowError:
        raise OSError(14, "address out of range") from None
    except OSError as exc:
        if exc.errno == 5:  # EIO: an unmapped page
            raise OSError(14, "unmapped address in the target") from None
        raise
    finally:
        os.close(fd)


def read_memory(pid: int, address: int, size: int) -> bytes:
    """``size`` bytes at ``address`` in process (or thread) ``pid``, read from ``/proc/PID/mem``.

    Not ``process_vm_readv``: Docker's default seccomp profile (20.10, measured) denies it, and
    ``pidfd_getfd``, without ``CAP_SYS_PTRACE``; opening ``/proc/PID/mem`` is subject only to the
    kernel's ptrace access check (same uid, target dumpable), which a parent passes.

    Raises:
        OSError: EFAULT for an unmapped range (a short read counts as EFAULT), EACCES/ESRCH.
    """
    if size <= 0:
        return b""
    with _memory(pid, os.O_RDONLY) as fd:
        data = os.pread(fd, size, address)
    if len(data) != size:
        raise OSError(14, "short read of the target's memory")
    return data


def write_memory(pid: int, writes: "List[Tuple[int, bytes]]") -> None:
    """Write each ``(address, data)`` of ``writes`` into process ``pid`` (``/proc/PID/mem``).

    What the kernel itself writes back to a caller whose syscall the witness performs (a
    ``sendmmsg``'s ``msg_len``). The same ptrace access check as `read_memory`.

    Raises:
        OSError: EFAULT for an unmapped range (a short write counts), EACCES/ESRCH.
    """
    with _memory(pid, os.O_WRONLY) as fd:
        for address, data in writes:
            if os.pwrite(fd, data, address) != len(data):
                raise OSError(14, "short write to the target's memory")


def ioctl(fd: int, request: int, buf: "ctypes.Array[ctypes.c_char]") -> int:
    """``ioctl(fd, request, buf)`` (the GIL is released while it waits)."""
    return _check(_libc.ioctl(fd, ctypes.c_ulong(request), ctypes.cast(buf, ctypes.c_void_p)))


def recv_notification(listener: int) -> bytes:
    """One ``struct seccomp_notif`` (80 bytes) from ``listener`` (blocks until one arrives)."""
    buf = ctypes.create_string_buffer(NOTIF_SIZE)  # the kernel wants it zeroed
    ioctl(listener, NOTIF_RECV, buf)
    return buf.raw


def send_response(listener: int, notif_id: int, val: int, error: int, flags: int) -> None:
    """Answer notification ``notif_id``: ``error`` is 0 or a negative errno."""
    buf = ctypes.create_string_buffer(struct.pack("<QqiI", notif_id, val, error, flags), RESP_SIZE)
    ioctl(listener, NOTIF_SEND, buf)


def id_valid(listener: int, notif_id: int) -> bool:
    """Whether ``notif_id`` still stands for the same blocked syscall (TOCTOU check)."""
    buf = ctypes.create_string_buffer(struct.pack("<Q", notif_id), 8)
    try:
        ioctl(listener, NOTIF_ID_VALID, buf)
    except OSError:
        return False
    return True


def add_fd(listener: int, notif_id: int, source_fd: int, target_fd: int, cloexec: bool) -> None:
    """Install our ``source_fd`` as descriptor ``target_fd`` of the caller (``dup2``-like)."""
    flags = os.O_CLOEXEC if cloexec else 0
    packed = struct.pack("<QIIII", notif_id, ADDFD_FLAG_SETFD, source_fd, target_fd, flags)
    buf = ctypes.create_string_buffer(packed, 24)
    ioctl(listener, NOTIF_ADDFD, buf)


def raw_connect(fd: int, address: bytes) -> int:
    """``connect(fd, address)`` with the sockaddr bytes as given: 0 or a negative errno."""
    buf = ctypes.create_string_buffer(address, len(address))
    if _libc.connect(fd, ctypes.cast(buf, ctypes.c_void_p), len(address)) < 0:
        return -ctypes.get_errno()
    return 0
