"""What a forked child of the zygote does to itself before anything of its run exists in it.

Standard library only, Python 3.9+ (the image's interpreter: ``os.unshare`` is 3.12+, so the
system calls go through ``ctypes``; numbers from the x86-64 and generic Linux headers).
Two steps, two processes (`runner.runtime.zygote.serve` forks the first):

`enter_namespaces` (the first fork, "C1", still in the zygote's namespaces): joins the run's
cgroups (writes ``0`` to each ``tasks`` file the host opened), sets the rlimits, then
``unshare(CLONE_NEWUSER | NEWNS | NEWPID | NEWNET | NEWIPC | NEWUTS | NEWCGROUP)`` and maps
the sandbox's uid and gid onto its own (one line each: the only map an unprivileged process
may write, ``user_namespaces(7)``). It then forks again (a new PID namespace holds the caller's
children, not the caller) and exits: the second child is PID 1 of its namespace and is
re-parented to the zygote, which reaps it.

`become_sandbox` (the second fork, "C2", PID 1 of the new namespaces, with every capability of
its new user namespace and nothing else): makes its mounts private, binds the run's root (the
template the zygote's bwrap built, `TEMPLATE_ROOT`: the image read-only, the run's mounts)
onto itself, mounts its own ``/proc`` (its PID namespace's), ``/tmp`` and ``/dev/shm`` (tmpfs
of the run's size), ``/dev/pts`` (a new instance) and its cgroup folders (read-only), then
``pivot_root(".", ".")`` and detaches the old root: nothing of the zygote's file system is
reachable any more. Then the host name, loopback up, a session of its own (``setsid``), the
bounding set, ambient and permitted capabilities emptied, ``no_new_privs`` and the seccomp
filter (`runner.backends.namespace.seccomp`'s program, the same bwrap loads with
``--seccomp``). Only then does the child run the runtime or ``exec`` the command.

Every mount of the zygote's root was made in the zygote's user namespace; the child's is a new
one, so the kernel locks them in the copy (``MNT_LOCKED``, ``MNT_LOCK_READONLY``): the child
can mount over them but never make them writable or take one away to see what is under it.
"""

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import resource
import socket
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "CLONE_NAMESPACES",
    "SetupError",
    "become_sandbox",
    "enter_namespaces",
    "join_cgroups",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NAMESPACES = (
    CLONE_NEWUSER
    | CLONE_NEWNS
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWIPC
    | CLONE_NEWUTS
    | CLONE_NEWCGROUP
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
SYS_CAPSET = 126  # x86-64
SYS_PIVOT_ROOT = 155  # x86-64
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFF_RUNNING = 0x40
_IFREQ = "16sh14x"


class SetupError(Exception):
    """A step of the child's set-up failed (the message names the step and the errno)."""


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _LIBC


def load() -> None:
    """Load libc and resolve every symbol now (the zygote calls it once, before any fork)."""
    libc = _libc()
    for name in ("unshare", "mount", "umount2", "syscall", "prctl", "sethostname"):
        getattr(libc, name)


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise SetupError("{}: {}".format(what, os.strerror(number or errno.EIO)))


def _bytes(value: Optional[str]) -> Optional[bytes]:
    return None if value is None else os.fsencode(value)


def mount(
    source: Optional[str], target: str, fstype: Optional[str], flags: int, data: str = ""
) -> None:
    """``mount(2)``; raises `SetupError` naming ``target``."""
    result = _libc().mount(
        _bytes(source), os.fsencode(target), _bytes(fstype), flags, _bytes(data) if data else None
    )
    _check(result, "mount {} on {}".format(fstype or source, target))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def join_cgroups(procs_fds: Sequence[int]) -> None:
    """Move this process into the run's cgroups: ``0`` written to each group's ``tasks``.

    The host opened each file (the kernel checks the opener's credentials, cgroup v1's rule);
    ``0`` is the writing thread, which is the whole process: a fork of the single-threaded
    zygote. Moving one thread skips the threadgroup lock that ``cgroup.procs`` takes
    (`runner.backends.namespace.cgroups.Cgroups.tasks_files`). Everything it forks later is
    born in the groups.
    """
    for fd in procs_fds:
        try:
            os.write(fd, b"0")
        except OSError as exc:
            raise SetupError("cannot join the run's cgroup: {}".format(exc)) from exc
        finally:
            os.close(fd)


def enter_namespaces(uid: int, gid: int, rlimits: Sequence[Tuple[int, int]]) -> None:
    """Set the run's rlimits, then enter fresh namespaces mapping ``uid``/``gid`` onto ours.

    Raises:
        SetupError: a limit, the ``unshare`` or a map write failed.
    """
    for which, value in rlimits:
        try:
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as exc:
            raise SetupError("setrlimit {}: {}".format(which, exc)) from exc
    outer_uid, outer_gid = os.getuid(), os.getgid()
    _check(_libc().unshare(CLONE_NAMESPACES), "unshare")
    # already "deny" in the zygote's user namespace (inherited, and enough) when this fails
    with contextlib.suppress(OSError):
        _write("/proc/self/setgroups", "deny")
    try:
        _write("/proc/self/uid_map", "{} {} 1\n".format(uid, outer_uid))
        _write("/proc/self/gid_map", "{} {} 1\n".format(gid, outer_gid))
    except OSError as exc:
        raise SetupError("cannot map the sandbox user: {}".format(exc)) from exc


def _mount_root(
    template: str,
    tmpfs_bytes: int,
    cgroups: Sequence[Tuple[str, str]],
) -> None:
    """Bind the run's root onto itself and mount what is the run's own in it (module doc)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount(template, template, None, MS_BIND | MS_REC)
    plain = MS_NOSUID | MS_NODEV
    mount("proc", template + "/proc", "proc", plain | MS_NOEXEC)
    size = "mode=1777,size={}".format(tmpfs_bytes)
    # the run's own tmpfs (not the host's: S108 does not apply)
    mount("tmpfs", template + "/tmp", "tmpfs", plain, size)  # noqa: S108
    mount("tmpfs", template + "/dev/shm", "tmpfs", plain, size)  # noqa: S108
    pts = "newinstance,ptmxmode=0666,mode=620"
    mount("devpts", template + "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, pts)
    for source, target in cgroups:
        # read-only as its source, the zygote's read-only bind of the cgroup folders (locked)
        mount(source, template + target, None, MS_BIND)
    os.chdir(template)
    _check(_libc().syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc().umount2(b".", MNT_DETACH), "detach the zygote's root")
    os.chdir("/")


def _loopback_up() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        found = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0))
        flags = struct.unpack(_IFREQ, found)[1] | IFF_UP | IFF_RUNNING
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags))
    except OSError as exc:
        raise SetupError("cannot bring up loopback: {}".format(exc)) from exc
    finally:
        sock.close()


def _drop_capabilities() -> None:
    libc = _libc()
    with open("/proc/sys/kernel/cap_last_cap", "rb") as handle:
        last = int(handle.read().strip())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capability {}".format(cap))
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient")
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.syscall(SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)), "capset")


def _install_seccomp(program: bytes) -> None:
    libc = _libc()
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if not program:
        return
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.addressof(buffer))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def become_sandbox(config: Dict[str, Any], tmpfs_bytes: int, group: str) -> None:
    """Make this process (PID 1 of fresh namespaces) the run's sandbox (module docstring).

    Args:
        config: the zygote's ``config`` message (`runner.wire.zygote`).
        tmpfs_bytes: the size of ``/tmp`` and ``/dev/shm``.
        group: the run's cgroup folder name ("" without cgroups).

    Raises:
        SetupError: a step failed; nothing of the run ran.
    """
    template, base = config["root"], config["cgroup_dir"]
    cgroups: List[Tuple[str, str]] = []
    if group:
        for controller in config["cgroups"]:
            cgroups.append(
                ("{}/{}/{}".format(base, controller, group), "/sys/fs/cgroup/" + controller)
            )
    _mount_root(template, tmpfs_bytes, cgroups)
    hostname = config["hostname"].encode("ascii")
    _check(_libc().sethostname(hostname, len(hostname)), "sethostname")
    _loopback_up()
    os.setsid()
    _drop_capabilities()
    _install_seccomp(bytes.fromhex(config["seccomp"]))
    os.chdir(config["workdir"])
