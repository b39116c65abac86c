"""The egress witness's filter program and sockaddr decoding (`runner.runtime.egress`).

The filter is run here by a small classic-BPF interpreter over the instructions it assembles,
so each rule (foreign ABI and x32 to the witness, io_uring ENOSYS, SCTP refused, connect/sendmsg
trapped, sendto trapped only with an address) is checked without a kernel.
"""

from __future__ import annotations

import socket
import struct

import pytest

from runner.runtime.egress import bpf, kernel, sockaddr

NR = kernel.SYSCALLS["x86_64"]


def _run(
    program: bytes, nr: int, arch: int = kernel.AUDIT_ARCH_X86_64, args: tuple[int, ...] = (0,) * 6
) -> int:
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = insns[pc]
        if op == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += 1 + (jt if hit else jf)
        elif op == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_network_calls_are_trapped_and_others_allowed(machine: str) -> None:
    program = bpf.program(machine)
    nr, arch = kernel.SYSCALLS[machine], kernel.AUDIT_ARCH[machine]
    for name in ("connect", "sendmsg", "sendmmsg"):
        assert _run(program, nr[name], arch) == bpf.RET_USER_NOTIF, name
    assert _run(program, nr["sendto"], arch) == bpf.RET_ALLOW  # no address: send()
    assert _run(program, nr["sendto"], arch, (3, 0, 1, 0, 0x7FFF0000, 16)) == bpf.RET_USER_NOTIF
    assert _run(program, nr["sendto"], arch, (3, 0, 1, 0, 1 << 40, 16)) == bpf.RET_USER_NOTIF
    fastopen = (3, 0, bpf.MSG_FASTOPEN, bpf.MSG_FASTOPEN, 0, 0)
    for name in ("sendmsg", "sendmmsg"):
        assert _run(program, nr[name], arch, fastopen) == bpf.RET_ERRNO | bpf.EOPNOTSUPP
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert _run(program, nr[name], arch) == bpf.RET_ERRNO | bpf.ENOSYS
    sctp = (2, 1, bpf.IPPROTO_SCTP, 0, 0, 0)
    assert _run(program, nr["socket"], arch, sctp) == bpf.RET_ERRNO | bpf.EPROTONOSUPPORT
    assert _run(program, nr["socket"], arch, (2, 1, 0, 0, 0, 0)) == bpf.RET_ALLOW
    assert _run(program, 0, arch) == bpf.RET_ALLOW


def test_foreign_abis_go_to_the_witness() -> None:
    # the witness kills the caller with SIGSYS and names it (a kernel kill is seen by nobody)
    program = bpf.program("x86_64")
    assert _run(program, 102, arch=0x40000003) == bpf.RET_USER_NOTIF  # i386 socketcall
    assert _run(program, NR["connect"] | kernel.X32_SYSCALL_BIT) == bpf.RET_USER_NOTIF


def test_assembler_refuses_backward_and_unknown_jumps() -> None:
    with pytest.raises(ValueError):
        bpf.assemble(["top", (0x15, 0, "top", None), (0x06, 0, None, None)])
    with pytest.raises(ValueError):
        bpf.assemble([(0x15, 0, "nowhere", None)])


def test_sockaddr_decoding_is_strict_and_bounded() -> None:
    inet = struct.pack("=H", socket.AF_INET) + struct.pack("!H", 443) + bytes([203, 0, 113, 1])
    assert sockaddr.decode(inet + bytes(8)) == {
        "family": "inet",
        "address": "203.0.113.1",
        "port": 443,
    }
    mapped = struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", 80, 0)
    mapped += bytes(10) + b"\xff\xff" + bytes([127, 0, 0, 1]) + bytes(4)
    assert sockaddr.decode(mapped)["address"] == "127.0.0.1"
    assert sockaddr.decode(inet[:5])["family"] == "truncated"
    assert sockaddr.decode(b"\x01")["family"] == "truncated"
    unix = struct.pack("=H", socket.AF_UNIX)
    assert sockaddr.decode(unix + b"/tmp/s\0junk")["address"] == "/tmp/s"
    assert sockaddr.decode(unix + b"\0abstract")["address"] == "@abstract"
    assert sockaddr.decode(struct.pack("=H", 99) + bytes(14))["family"] == "af99"
    assert sockaddr.is_loopback("::1") and not sockaddr.is_loopback("203.0.113.1")
