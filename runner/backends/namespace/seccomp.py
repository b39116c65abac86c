"""The namespace sandbox's seccomp filter: what Docker's default profile refuses, as classic BPF.

bwrap installs no filter of its own; ``--seccomp FD`` loads one (a ``struct sock_filter`` array,
read from a pipe) after the sandbox is set up, before the command runs, for every process of
the sandbox. This one is a deny list for x86-64 modelled on Docker's default profile
(moby ``profiles/seccomp/default.json``): namespace and mount syscalls (``unshare``, ``setns``,
``mount`` and the new mount API, ``pivot_root``, ``chroot``; ``clone`` with any ``CLONE_NEW*``
flag), kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``, module
and kexec loading, clocks, swap, reboot, quotas, ``open_by_handle_at`` and the obsolete ones.
Each returns ``EPERM``; ``clone3`` returns ``ENOSYS``, as with Docker, so the C library falls
back to ``clone``, whose flags a filter can see. Another architecture or the x32 ABI of
x86-64 kills the process. ``ptrace`` stays allowed, as in Docker (the runtime, PID 1, is not
dumpable: `runner.runtime.pid1`).

Hosts other than x86-64 get no filter (`program` returns None; doctor says so).
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED_X86_64", "program"]

# x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl)
DENIED_X86_64 = {
    "syslog": 103,
    "uselib": 134,
    "personality": 135,
    "ustat": 136,
    "sysfs": 139,
    "vhangup": 153,
    "pivot_root": 155,
    "_sysctl": 156,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "get_kernel_syms": 177,
    "query_module": 178,
    "quotactl": 179,
    "nfsservctl": 180,
    "afs_syscall": 183,
    "tuxcall": 184,
    "security": 185,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "vserver": 236,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "quotactl_fd": 443,
}
_CLONE = 56
_CLONE3 = 435
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (| NEWTIME 0x80)
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
_CLONE_NEW |= 0x40000000 | 0x00000080
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16


def _assemble(code: list[tuple[int, str | int, str | int, int]], labels: dict[str, int]) -> bytes:
    out = b""
    for index, (op, jt, jf, k) in enumerate(code):

        def jump(target: str | int, here: int = index) -> int:
            if isinstance(target, int):
                return target
            offset = labels[target] - (here + 1)
            if not 0 <= offset <= 255:
                raise ValueError(f"seccomp jump out of range: {target}")
            return offset

        out += struct.pack("<HBBI", op, jump(jt), jump(jf), k)
    return out


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine as bwrap's ``--seccomp`` reads it; None off x86-64."""
    if (machine or platform.machine()) not in ("x86_64", "AMD64"):
        return None
    code: list[tuple[int, str | int, str | int, int]] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _OFF_NR),
        (_JGE, "kill", 0, _X32_BIT),
        (_JEQ, "clone", 0, _CLONE),
        (_JEQ, "enosys", 0, _CLONE3),
    ]
    code += [(_JEQ, "deny", 0, nr) for nr in sorted(DENIED_X86_64.values())]
    code.append((_RET, 0, 0, _ALLOW))
    labels = {"clone": len(code)}
    code += [(_LD_W_ABS, 0, 0, _OFF_ARG0), (_JSET, "deny", 0, _CLONE_NEW), (_RET, 0, 0, _ALLOW)]
    labels["deny"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    labels["enosys"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.ENOSYS))
    labels["kill"] = len(code)
    code.append((_RET, 0, 0, _KILL_PROCESS))
    return _assemble(code, labels)
