"""The seccomp egress witness sees every addressed network call, in real sandboxes.

Each test runs `runner.runtime.egress.probe` in a sandbox made by the production backend
(network_mode=none, read-only, cap_drop ALL, no-new-privileges, a non-root uid, Docker's default
seccomp profile): a child installs the filter on itself and ``exec``s the command; the probe's
witness logs what it sees and answers. Addresses are TEST-NET (RFC 5737) or documentation IPv6
ones; nothing can leave the sandbox, and the witness answers before the kernel would try.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from runner.backends.docker import DockerBackend
from runner.backends.docker.witnesscheck import run_witness_probe, witness_check
from runner.episode.prepare import runner_mounts

pytestmark = pytest.mark.docker

GATEWAY = 18080


@pytest.fixture(scope="module")
def backend(docker_client: Any) -> Iterator[DockerBackend]:
    b = DockerBackend.connect(session_id=f"witness-{uuid.uuid4().hex[:10]}")
    yield b
    b.close()


def _run(backend: DockerBackend, image: str, *command: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("timeout_s", 240.0)  # a loaded machine: the races below take seconds
    result = run_witness_probe(backend, image, runner_mounts(), command, **kw)
    assert result["usable"], result
    assert not result["errors"], result
    return result


def _seen(result: dict[str, Any], address: str | None, port: int | None, kind: str) -> None:
    hits = [
        a
        for a in result["attempts"]
        if a["address"] == address and a["port"] == port and a["kind"] == kind
    ]
    assert hits, result
    assert all(a["outcome"] == "denied" and a["event"].startswith("seccomp.") for a in hits)


def _elf(code: bytes) -> bytes:
    """A minimal static x86_64 ELF executable running ``code`` (one RX PT_LOAD)."""
    base = 0x400000
    header = struct.pack(
        "<4sBBBBB7xHHIQQQIHHHHHH",
        b"\x7fELF", 2, 1, 1, 0, 0, 2, 0x3E, 1, base + 120, 64, 0, 0, 64, 56, 1, 0, 0, 0,
    )  # fmt: skip
    total = 120 + len(code)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, total, total, 0x1000)
    return header + phdr + code


# socket(AF_INET, SOCK_STREAM, 0); connect(fd, 203.0.113.9:7, 16); exit(-result)
_CONNECT = (
    b"\xbf\x02\x00\x00\x00\xbe\x01\x00\x00\x00\x31\xd2\xb8\x29\x00\x00\x00\x0f\x05"
    b"\x89\xc7\x48\x8d\x35\x17\x00\x00\x00\xba\x10\x00\x00\x00\xb8\x2a\x00\x00\x00\x0f\x05"
    b"\xf7\xd8\x89\xc7\xb8\x3c\x00\x00\x00\x0f\x05"
    b"\x02\x00\x00\x07\xcb\x00\x71\x09" + b"\x00" * 8
)
# the i386 ABI from a 64-bit program: int 0x80 with eax=1 (exit(0)): must be killed (SIGSYS)
_I386_EXIT = b"\xb8\x01\x00\x00\x00\x31\xdb\xcd\x80"


def _run_binaries(*programs: bytes) -> str:
    """Python running each ELF from a memfd (the sandbox tmpfs is noexec), printing its exit."""
    return (
        "import os, subprocess\n"
        f"for code in {list(programs)!r}:\n"
        "    fd = os.memfd_create('bin', 0); os.write(fd, code)\n"
        "    print('exit', subprocess.call(['/proc/self/fd/%d' % fd], pass_fds=(fd,)))\n"
    )


def test_doctor_check_says_usable(backend: DockerBackend, sandbox_image: str) -> None:
    result = run_witness_probe(backend, sandbox_image, runner_mounts())
    _seen(result, "203.0.113.1", 9, "connect")
    check = witness_check(result)
    assert check.ok and "usable" in check.detail, check


def test_non_python_children_are_seen(backend: DockerBackend, sandbox_image: str) -> None:
    script = (
        "bash -c 'exec 3<>/dev/tcp/203.0.113.5/80'; echo bash=$?; "
        "perl -e 'use Socket; socket(S,PF_INET,SOCK_STREAM,0); "
        'connect(S, sockaddr_in(8443, inet_aton("203.0.113.6"))) or print "perl=$!\\n"\'; '
        "getent hosts example.invalid; echo getent=$?"
    )
    result = _run(backend, sandbox_image, "sh", "-c", script)
    assert "bash=1" in result["stdout"] and "perl=Network is unreachable" in result["stdout"]
    _seen(result, "203.0.113.5", 80, "connect")
    _seen(result, "203.0.113.6", 8443, "connect")


def test_static_binary_and_foreign_abi(backend: DockerBackend, sandbox_image: str) -> None:
    script = _run_binaries(_elf(_CONNECT), _elf(_I386_EXIT))
    result = _run(backend, sandbox_image, "python3", "-I", "-c", script)
    _seen(result, "203.0.113.9", 7, "connect")
    exits = [line for line in result["stdout"].splitlines() if line.startswith("exit")]
    assert exits == ["exit 101", "exit -31"], result  # ENETUNREACH; killed by SIGSYS


CTYPES_AND_UDP = """
import ctypes, errno, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
s = socket.socket()
addr = struct.pack("=H", 2) + struct.pack("!H", 444) + bytes([203, 0, 113, 8]) + bytes(8)
print("ctypes", libc.connect(s.fileno(), addr, 16), ctypes.get_errno())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("198.51.100.7", 53))
except OSError as e:
    print("udp", e.errno)
try:
    u.sendmsg([b"x"], [], 0, ("198.51.100.8", 123))
except OSError as e:
    print("sendmsg", e.errno)
v6 = socket.socket(socket.AF_INET6)
print("v6", v6.connect_ex(("2001:db8::1", 80)))
a, b = socket.socketpair()
a.sendmsg([b"ok"]); print("pair", b.recv(2))
buf = ctypes.create_string_buffer(120)
print("uring", libc.syscall(425, 8, buf), ctypes.get_errno())
"""


def test_ctypes_udp_sendmsg_ipv6_io_uring(backend: DockerBackend, sandbox_image: str) -> None:
    # -I: no site, no sitecustomize, no audit hook in this child: only the witness sees it
    result = _run(backend, sandbox_image, "python3", "-I", "-c", CTYPES_AND_UDP)
    out = result["stdout"]
    assert "ctypes -1 101" in out and "udp 101" in out and "sendmsg 101" in out, out
    assert "v6 101" in out and "pair b'ok'" in out and "uring -1 38" in out, out
    _seen(result, "203.0.113.8", 444, "connect")
    _seen(result, "198.51.100.7", 53, "sendto")
    _seen(result, "198.51.100.8", 123, "sendmsg")
    _seen(result, "2001:db8::1", 80, "connect")


GATEWAY_AND_LOCAL = f"""
import ctypes, os, socket
srv = socket.socket(); srv.bind(("127.0.0.1", {GATEWAY})); srv.listen(8)
c = socket.create_connection(("127.0.0.1", {GATEWAY}), timeout=5)
peer, _ = srv.accept(); c.sendall(b"hi"); print("gateway", peer.recv(2))
n = socket.socket(); n.setblocking(False)
print("nonblocking", n.connect_ex(("127.0.0.1", {GATEWAY})) in (0, 115))
print("other", socket.socket().connect_ex(("127.0.0.1", {GATEWAY + 1})))
u = socket.socket(socket.AF_UNIX); u.bind("/tmp/u.sock"); u.listen(1)
k = socket.socket(socket.AF_UNIX); os.chdir("/tmp"); k.connect("u.sock"); print("unix ok")
libc = ctypes.CDLL(None, use_errno=True); libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
print("undumpable", socket.socket().connect_ex(("203.0.113.10", 1)))
"""


def test_gateway_port_and_local_sockets_go_through(
    backend: DockerBackend, sandbox_image: str
) -> None:
    result = _run(backend, sandbox_image, "python3", "-I", "-c", GATEWAY_AND_LOCAL, gateway=GATEWAY)
    out = result["stdout"]
    assert "gateway b'hi'" in out and "nonblocking True" in out and "unix ok" in out, out
    assert "other 101" in out and "undumpable 101" in out, out
    _seen(result, "127.0.0.1", GATEWAY + 1, "connect")
    _seen(result, None, None, "connect")  # a caller whose memory cannot be read: no address
    assert not [a for a in result["attempts"] if a["port"] == GATEWAY], result


RACE = f"""
import ctypes, socket, struct, sys, threading
sys.setswitchinterval(0.0005)
libc = ctypes.CDLL(None, use_errno=True)
other = socket.socket(); other.bind(("127.0.0.1", {GATEWAY + 2})); other.listen(4096)
other.setblocking(False)
gw = socket.socket(); gw.bind(("127.0.0.1", {GATEWAY})); gw.listen(4096); gw.setblocking(False)
def addr(port):
    return struct.pack("=H", 2) + struct.pack("!H", port) + bytes([127, 0, 0, 1]) + bytes(8)
buf = ctypes.create_string_buffer(addr({GATEWAY}), 16)
stop = []
def flip():
    a, b = addr({GATEWAY}), addr({GATEWAY + 2})
    while not stop:
        ctypes.memmove(buf, b, 16); ctypes.memmove(buf, a, 16)
threading.Thread(target=flip, daemon=True).start()
held = []
for _ in range(400):
    s = socket.socket(); libc.connect(s.fileno(), buf, 16); held.append(s)
stop.append(1)
leaked = 0
while True:
    try:
        other.accept()[0].close(); leaked += 1
    except BlockingIOError:
        break
print("leaked", leaked)
"""


def test_a_racing_thread_cannot_redirect_a_gateway_connect(
    backend: DockerBackend, sandbox_image: str
) -> None:
    # the address flips between the gateway's port and another loopback listener while the
    # witness decides: a connect the witness let through must still reach only the gateway
    result = _run(backend, sandbox_image, "python3", "-I", "-c", RACE, gateway=GATEWAY)
    assert "leaked 0" in result["stdout"], result
    assert any(a["port"] == GATEWAY + 2 for a in result["attempts"]), result


FLIPS = f"""
import ctypes, socket, struct, sys, threading
sys.setswitchinterval(0.0005)
libc = ctypes.CDLL(None, use_errno=True)
tcp = socket.socket(); tcp.bind(("127.0.0.1", {GATEWAY + 3})); tcp.listen(4096)
tcp.setblocking(False)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", {GATEWAY + 3}))
udp.setblocking(False)
inet = struct.pack("=H", 2) + struct.pack("!H", {GATEWAY + 3}) + bytes([127, 0, 0, 1]) + bytes(8)
unix = struct.pack("=H", 1) + b"/tmp/none".ljust(14, b"\\0")
buf = ctypes.create_string_buffer(unix, 16)
stop = []
def flip_family():
    while not stop:
        ctypes.memmove(buf, inet, 16); ctypes.memmove(buf, unix, 16)
t = threading.Thread(target=flip_family, daemon=True); t.start()
for _ in range(200):
    s = socket.socket(); libc.connect(s.fileno(), buf, 16); s.close()
stop.append(1); t.join()

class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class Msg(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p),
                ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]
data = ctypes.create_string_buffer(b"x", 1)
iov = Iov(ctypes.cast(data, ctypes.c_void_p), 1)
msg = Msg(None, 0, ctypes.cast(ctypes.pointer(iov), ctypes.c_void_p), 1, None, 0, 0)
name = ctypes.cast(ctypes.create_string_buffer(inet, 16), ctypes.c_void_p).value
stop.clear()
def flip_name():
    while not stop:
        msg.name, msg.namelen = name, 16
        msg.name, msg.namelen = None, 0
t = threading.Thread(target=flip_name, daemon=True); t.start()
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(200):
    libc.sendmsg(d.fileno(), ctypes.byref(msg), 0)
stop.append(1); t.join()
leaked = 0
for sock in (tcp, udp):
    while True:
        try:
            got = sock.accept()[0] if sock is tcp else sock.recv(10)
            leaked += 1
        except BlockingIOError:
            break
print("leaked", leaked)
"""


def test_rewriting_the_address_meanwhile_leaks_nothing(
    backend: DockerBackend, sandbox_image: str
) -> None:
    # a connect whose address flips between AF_UNIX (local) and AF_INET, and an unnamed
    # sendmsg on a UDP socket whose header gains a name: nothing may reach the loopback peers
    result = _run(backend, sandbox_image, "python3", "-I", "-c", FLIPS)
    assert "leaked 0" in result["stdout"], result


def test_a_runtime_that_is_not_dumpable_still_witnesses(
    backend: DockerBackend, sandbox_image: str
) -> None:
    # the PID-1 runtime makes itself not dumpable; its exec'ed worker is dumpable again, and
    # the ptrace access check that /proc/PID/mem needs is about the target only
    result = run_witness_probe(backend, sandbox_image, runner_mounts(), not_dumpable=True)
    assert result["usable"], result
    _seen(result, "203.0.113.1", 9, "connect")
