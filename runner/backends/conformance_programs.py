"""The programs the conformance checks run inside sandboxes (`runner.backends.conformance`).

Each is Python source for ``python3 -c`` in the sandbox image (standard library only) that
prints one JSON object, or a step of a check (`CRASHING_OWNER` runs on the host, in a child
process that is then killed). Every network attempt stays inside the sandbox: TEST-NET-1
(192.0.2.1, RFC 5737) is never routed, and the positive control is a loopback listener in the
same sandbox.
"""

__all__ = [
    "ALLOWED_ENV",
    "CPU_QUOTA",
    "CRASHING_OWNER",
    "ECHO",
    "LOOK",
    "PROBE",
    "RUNTIME_IMPORTS",
    "THREADS",
]

PROBE = r"""
import errno, json, os, shutil, socket, sys, time
r = {"tools": [t for t in ("gcc", "cc", "make", "curl", "wget", "nc", "ssh", "socat")
               if shutil.which(t)],
     "uid": os.getuid(), "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
     "env_keys": sorted(os.environ)}
def err(e):
    return errno.errorcode.get(e.errno or 0, type(e).__name__)
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("192.0.2.1", 80)); r["connect"] = "connected"
except OSError as e:
    r["connect"] = err(e)
s.close()
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2); a, _ = srv.accept()
c.sendall(b"ping"); r["loopback"] = a.recv(4).decode(); c.close(); a.close(); srv.close()
t = time.monotonic()
try:
    socket.getaddrinfo("example.com", 443); r["dns"] = "resolved"
except OSError as e:
    r["dns"] = type(e).__name__
r["dns_s"] = time.monotonic() - t
try:
    r["localhost"] = sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80)})
except OSError as e:
    r["localhost"] = type(e).__name__
for key, path in (("root_write", "/probe"), ("tmp_write", "/tmp/probe"),
                  ("ro_write", "/sandbox/ro/new-file")):
    try:
        with open(path, "w") as f:
            f.write("x")
        r[key] = "ok"
    except OSError as e:
        r[key] = err(e)
r["ro_read"] = open("/sandbox/ro/data.txt", encoding="utf-8").read()
r["cap_eff"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")][0]
r["no_new_privs"] = [l.split()[1] for l in open("/proc/self/status")
                     if l.startswith("NoNewPrivs:")][0]
print(json.dumps(r))
print("probe done", file=sys.stderr)
"""
"""Run with ``python3 -I -c`` in the probe sandbox; prints one JSON object, then a stderr line."""

ECHO = "import sys; d = sys.stdin.buffer.read(int(sys.argv[1])); sys.stdout.buffer.write(d[::-1])"

THREADS = r"""
import json, threading
hold = threading.Event()
started, refused = 0, None
try:
    for _ in range(200):
        threading.Thread(target=hold.wait, daemon=True).start()
        started += 1
except RuntimeError as exc:  # can't start new thread: the pids limit took it
    refused = str(exc)
hold.set()
print(json.dumps({"started": started, "refused": refused}))
"""

CPU_QUOTA = r"""
import json
def read(path):
    try:
        return open(path).read().split()
    except OSError:
        return None
v2 = read("/sys/fs/cgroup/cpu.max")
v1 = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
quota, period = (v2[0], v2[1]) if v2 else (v1[0][0], v1[1][0])
print(json.dumps({"quota": quota, "period": period}))
"""

LOOK = """
import importlib.util, json, os
root = "/opt/sandbox-replay/runner"
host = ["runner.cli", "runner.ledger", "runner.episode", "runner.settings", "runner.domain"]
print(json.dumps({
    "entries": sorted(e for e in os.listdir(root) if e != "__pycache__"),
    "importable": [m for m in host if importlib.util.find_spec(m) is not None],
}))
"""

RUNTIME_IMPORTS = (
    "import runner.runtime.main, runner.runtime.worker.process, runner.runtime.egress.seccomp"
)

CRASHING_OWNER = """
import sys, time
from runner.backends.base import SandboxSpec
{connect}
spec = SandboxSpec(run_id=sys.argv[1] + "-run", image=sys.argv[2], command=("sleep", "120"))
with backend.sandbox(spec):
    print("started", flush=True)
    time.sleep(120)
"""

ALLOWED_ENV = {
    "PATH",
    "LANG",
    "HOME",
    "TMPDIR",
    "TZ",
    "HOSTNAME",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "GPG_KEY",
    "PYTHON_VERSION",
    "PYTHON_SHA256",
}
"""The image's own ENV, HOME/TMPDIR and the spec's TZ: nothing of the host's."""
