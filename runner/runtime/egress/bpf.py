"""The egress witness's seccomp filter, assembled here (classic BPF; standard library only).

What the program does, in order (``linux/seccomp.h``,
``Documentation/userspace-api/seccomp_filter.rst``):

1. ``seccomp_data.arch`` is not this machine's native ABI (i386 through ``int 0x80`` on x86_64,
   or any other), or the x32 ABI (x86_64 numbers with bit 30 set): a user notification, which
   the witness answers by killing the caller with ``SIGSYS`` and naming it in the log (a
   foreign ABI has other syscall numbers, so the checks below would not hold for it; the call
   itself never runs: without a listener it fails with ``ENOSYS``).
2. ``io_uring_setup``/``io_uring_enter``/``io_uring_register``: ``ENOSYS`` (an io_uring ring
   performs connects and sends the filter never sees).
3. ``socket`` with protocol ``IPPROTO_SCTP``: ``EPROTONOSUPPORT`` (SCTP connects through
   ``setsockopt``, which carries the address in memory the filter cannot match).
4. ``connect``, ``sendmsg``, ``sendmmsg``: a user notification (their address is in memory);
   ``sendmsg``/``sendmmsg`` with ``MSG_FASTOPEN`` (a TCP connect to the header's name, which
   the witness could not hold still): ``EOPNOTSUPP``. ``sendto``: a notification when its
   address argument is not NULL, else allowed.
5. Everything else: allowed.
"""

import struct
from typing import Dict, List, Tuple, Union

from runner.runtime.egress import kernel

# BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_ALLOW = 0x7FFF0000
ENOSYS = 38
EPROTONOSUPPORT = 93
EOPNOTSUPP = 95
MSG_FASTOPEN = 0x20000000
IPPROTO_SCTP = 132
_OFF_NR = 0
_OFF_ARCH = 4


def _arg_lo(index: int) -> int:
    return 16 + 8 * index  # little-endian: the low 32 bits first


def _arg_hi(index: int) -> int:
    return 20 + 8 * index


# One instruction: (opcode, k, jump-if-true label or None, jump-if-false label or None), or a
# label name (a str) marking the next instruction.
_Insn = Union[str, Tuple[int, int, object, object]]


def assemble(lines: List[_Insn]) -> bytes:
    """``struct sock_filter[]`` bytes of ``lines``; jumps name labels (forward only).

    Raises:
        ValueError: a backward or unknown label, or a jump over more than 255 instructions.
    """
    labels: Dict[str, int] = {}
    code: List[Tuple[int, int, object, object]] = []
    for line in lines:
        if isinstance(line, str):
            labels[line] = len(code)
        else:
            code.append(line)
    out = b""
    for index, (op, k, jt, jf) in enumerate(code):
        offsets = []
        for target in (jt, jf):
            if target is None:
                offsets.append(0)
                continue
            if target not in labels or labels[str(target)] <= index:
                raise ValueError("bad jump target {!r}".format(target))
            offset = labels[str(target)] - index - 1
            if offset > 255:
                raise ValueError("jump too far: {!r}".format(target))
            offsets.append(offset)
        out += struct.pack("<HBBI", op, offsets[0], offsets[1], k)
    return out


def program(machine: str) -> bytes:
    """The witness filter for ``machine`` (``x86_64`` or ``aarch64``), as bytes.

    Raises:
        KeyError: a machine without a syscall table in `kernel.SYSCALLS`.
    """
    nr = kernel.SYSCALLS[machine]
    lines: List[_Insn] = [
        (_LD_W_ABS, _OFF_ARCH, None, None),
        (_JEQ_K, kernel.AUDIT_ARCH[machine], None, "notify"),
        (_LD_W_ABS, _OFF_NR, None, None),
    ]
    if machine == "x86_64":
        lines.append((_JGE_K, kernel.X32_SYSCALL_BIT, "notify", None))
    lines += [
        (_JEQ_K, nr["connect"], "notify", None),
        (_JEQ_K, nr["sendmsg"], "sendmsg", None),
        (_JEQ_K, nr["sendmmsg"], "sendmmsg", None),
        (_JEQ_K, nr["sendto"], "sendto", None),
        (_JEQ_K, nr["socket"], "socket", None),
        (_JEQ_K, nr["io_uring_setup"], "enosys", None),
        (_JEQ_K, nr["io_uring_enter"], "enosys", None),
        (_JEQ_K, nr["io_uring_register"], "enosys", None),
        (_RET_K, RET_ALLOW, None, None),
        "sendmsg",
        (_LD_W_ABS, _arg_lo(2), None, None),
        (_JSET_K, MSG_FASTOPEN, "noop", "notify"),
        "sendmmsg",
        (_LD_W_ABS, _arg_lo(3), None, None),
        (_JSET_K, MSG_FASTOPEN, "noop", "notify"),
        "sendto",
        (_LD_W_ABS, _arg_lo(4), None, None),
        (_JEQ_K, 0, None, "notify"),
        (_LD_W_ABS, _arg_hi(4), None, None),
        (_JEQ_K, 0, "allow", "notify"),
        "socket",
        (_LD_W_ABS, _arg_lo(2), None, None),
        (_JEQ_K, IPPROTO_SCTP, "noproto", "allow"),
        "noproto",
        (_RET_K, RET_ERRNO | EPROTONOSUPPORT, None, None),
        "allow",
        (_RET_K, RET_ALLOW, None, None),
        "noop",
        (_RET_K, RET_ERRNO | EOPNOTSUPP, None, None),
        "notify",
        (_RET_K, RET_USER_NOTIF, None, None),
        "enosys",
        (_RET_K, RET_ERRNO | ENOSYS, None, None),
    ]
    return assemble(lines)
