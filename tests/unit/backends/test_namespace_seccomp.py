"""The namespace sandbox's seccomp filter, loaded for real in a child process (x86-64 Linux)."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner.backends.namespace.seccomp import DENIED_X86_64, program

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64", reason="x86-64 Linux filter"
)

CHILD = r"""
import ctypes, errno, json, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
code = sys.stdin.buffer.read()
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
prog = Prog(len(code) // 8, code)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP filter
def err(rc):
    return "OK" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
out = {"unshare_mount": err(libc.unshare(0x00020000))}
if out["unshare_mount"] != "EPERM":  # the filter did not hold: try nothing that could mount
    print(json.dumps(out))
    sys.exit(0)
out.update({
    "unshare_net": err(libc.unshare(0x40000000)),
    "mount": err(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "chroot": err(libc.chroot(b"/")),
    "keyctl": err(libc.syscall(250, 0, 0, 0, 0, 0)),
    "clone_newuser": err(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)),
    "clone3": err(libc.syscall(435, 0, 0)),
})
t = threading.Thread(target=lambda: None); t.start(); t.join()  # threads still start
pid = os.fork()  # and processes
if pid == 0:
    os._exit(7)
out["fork_status"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(out))
"""


def test_the_filter_refuses_namespaces_mounts_keyrings_and_keeps_threads_and_fork() -> None:
    filt = program("x86_64")
    assert filt is not None and len(filt) % 8 == 0
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=filt, capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    import json

    assert json.loads(done.stdout) == {
        "unshare_mount": "EPERM",
        "unshare_net": "EPERM",
        "mount": "EPERM",
        "chroot": "EPERM",
        "keyctl": "EPERM",
        "clone_newuser": "EPERM",
        "clone3": "ENOSYS",
        "fork_status": 7,
    }


def test_no_filter_off_x86_64() -> None:
    assert program("aarch64") is None


def test_the_numbers_are_the_kernels_where_its_header_is_installed() -> None:
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no kernel header here (linux-libc-dev)")
    numbers = {
        m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+) (\d+)", header.read_text())
    }
    assert {k: numbers.get(k) for k in DENIED_X86_64} == DENIED_X86_64
