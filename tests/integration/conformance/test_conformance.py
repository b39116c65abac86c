"""The conformance suite every sandboxing backend must pass (issue 11, the Inspect pattern).

Each test runs once per entry of `tests.integration.conformance.backends.BACKENDS` (the test id
names the backend): a sandbox from the real image, the stdio channel both ways, no network (a
connect fails; a loopback listener inside the same sandbox is the positive control), a read-only
root with a writable ``/tmp``, a non-root user without capabilities, only the spec's environment,
read-only mounts (and of ``runner`` only the sandbox-side packages), the memory, pids and CPU
limits, the host's kill, the timeout and the lifetime cap in the exit state, owner labels the
reaper reads, and no sandbox left behind. Where a backend legitimately differs it says so in its
`Capabilities`; the suite asserts the stronger property wherever a flag is set.

Every network attempt happens inside the sandbox (TEST-NET-1 address 192.0.2.1, never reachable
from there). An unusable engine fails these tests under ``CI=true`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner import resources
from runner.backends.base import STDOUT, Backend, LifetimeCap, Mount, ResourceLimits, SandboxSpec
from runner.runtime.protocol import RUNTIME_ROOT, SANDBOX_PACKAGES
from tests.integration._episodes import Project
from tests.integration.conformance.backends import MountSeen, SandboxingBackend

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

ECHO = (
    "import sys; data = sys.stdin.buffer.read(int(sys.argv[1]));"
    " sys.stdout.buffer.write(data[::-1])"
)

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


def _run_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def run(backend: Backend, spec: SandboxSpec, timeout_s: float = 30.0) -> tuple[Any, bytes, bytes]:
    out, err = bytearray(), bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + timeout_s
        for frame in box.frames(0.2):
            if frame is not None:
                (out if frame[0] == STDOUT else err).extend(frame[1])
            assert time.monotonic() < deadline + 5, "frames() did not end"
        state = box.wait(max(0.1, deadline - time.monotonic()))
    return state, bytes(out), bytes(err)


def _json_line(out: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


# --- a sandbox from the real image, and its channel ---------------------------------------------


def test_runs_the_real_image_and_keeps_stdout_stderr_and_the_exit_code_apart(
    backend: Backend, image: str
) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    spec = SandboxSpec(run_id=_run_id("image"), image=image, command=("python3", "-c", code))
    state, out, err = run(backend, spec)
    assert (state.exit_code, state.killed_by_host, state.oom_killed) == (3, False, False)
    assert out == b"out\n" and err == b"err\n"


def test_the_channel_carries_bytes_both_ways(backend: Backend, image: str) -> None:
    payload = bytes(range(256)) * 64 + b"\n\x00end"  # every byte value, newlines, NUL
    spec = SandboxSpec(
        run_id=_run_id("channel"), image=image, command=("python3", "-c", ECHO, str(len(payload)))
    )
    out = bytearray()
    with backend.sandbox(spec) as box:
        box.write(payload, timeout_s=10)
        for frame in box.frames(0.2):
            if frame is not None and frame[0] == STDOUT:
                out.extend(frame[1])
        state = box.wait(30)
    assert state.exit_code == 0
    assert bytes(out) == payload[::-1]


# --- hardening: one probe container, one property a test (from test_hardening.py) ----------------


@pytest.fixture(scope="module")
def mount_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mounts") / "dir with spaces, ü, 日本 and a:colon"
    folder.mkdir()
    (folder / "data.txt").write_text("grüße from the host\n", encoding="utf-8")
    folder.chmod(0o755)
    (folder / "data.txt").chmod(0o644)  # readable by the sandbox user 10001
    return folder


@pytest.fixture(scope="module")
def probe(backend: Backend, image: str, mount_dir: Path) -> dict[str, Any]:
    spec = SandboxSpec(
        run_id=_run_id("hardening"),
        image=image,
        command=("python3", "-I", "-c", PROBE),
        mounts=(Mount(mount_dir, "/sandbox/ro"),),
        env={"TZ": "UTC"},
        limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
    )
    state, out, err = run(backend, spec)
    assert state.exit_code == 0, (out, err)
    assert b"probe done" in err  # stderr arrives demultiplexed
    return _json_line(out)


def test_tcp_connect_by_ip_is_network_unreachable(probe: dict[str, Any]) -> None:
    assert probe["connect"] == "ENETUNREACH"
    assert probe["loopback"] == "ping"  # positive control: sockets work, inside only


def test_dns_lookup_fails_within_two_seconds(probe: dict[str, Any]) -> None:
    assert probe["dns"] == "gaierror"
    assert probe["dns_s"] < 2.0


def test_localhost_resolves_to_loopback_from_the_hosts_file(probe: dict[str, Any]) -> None:
    """Docker writes ``/etc/hosts`` into every container; the namespace backend's exported root
    filesystem must say the same of ``localhost`` (the image's own file is empty)."""
    assert probe["localhost"] == ["127.0.0.1", "::1"], probe["localhost"]


def test_root_filesystem_is_read_only_and_tmp_is_writable(probe: dict[str, Any]) -> None:
    assert probe["root_write"] == "EROFS"
    assert probe["tmp_write"] == "ok"
    assert probe["home"] == "/tmp" and probe["tmpdir"] == "/tmp"


def test_runs_as_non_root_without_capabilities(probe: dict[str, Any]) -> None:
    assert probe["uid"] != 0
    assert int(probe["cap_eff"], 16) == 0
    assert probe["no_new_privs"] == "1"


def test_image_has_no_compilers_or_network_tools(probe: dict[str, Any]) -> None:
    assert probe["tools"] == []


def test_environment_is_only_what_the_spec_gives(probe: dict[str, Any]) -> None:
    # The image's own ENV (PATH, LANG, PYTHON*) plus HOME/TMPDIR and the spec's TZ: no host vars.
    allowed = {
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
    assert set(probe["env_keys"]) <= allowed, set(probe["env_keys"]) - allowed


def test_read_only_bind_mount_with_spaces_colon_and_non_ascii(
    probe: dict[str, Any], mount_dir: Path
) -> None:
    assert probe["ro_read"] == "grüße from the host\n"
    assert probe["ro_write"] == "EROFS"
    assert not (mount_dir / "new-file").exists()


# --- of runner, only the sandbox-side packages are mounted (from test_runner_mounts.py) ---------

LOOK_TOOLS = """
import importlib.util
import os

from runner.sdk import Effect, tool

@tool("runner.look", effect=Effect.PURE)
def look() -> dict:
    root = "/opt/sandbox-replay/runner"
    host = ["runner.cli", "runner.ledger", "runner.episode", "runner.settings", "runner.domain"]
    return {
        "entries": sorted(e for e in os.listdir(root) if e != "__pycache__"),
        "importable": [m for m in host if importlib.util.find_spec(m) is not None],
    }
"""

LOOK_STEPS = """
- id: look
  tool: runner.look
  args: {}
"""


class _Watching:
    """The backend, recording the engine's mounts of each sandbox right after its start."""

    def __init__(self, inner: Backend, entry: SandboxingBackend) -> None:
        self.inner, self.entry = inner, entry
        self.seen: list[list[MountSeen]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Any]:
        with self.inner.sandbox(spec) as box:
            if self.entry.mounts_of is not None:
                self.seen.append(self.entry.mounts_of(self.inner, box))
            yield box


def test_a_container_mounts_only_the_sandbox_side_packages(
    entry: SandboxingBackend, backend: Backend, image: str, tmp_path: Path
) -> None:
    project = Project(tmp_path / "proj", LOOK_TOOLS, module="look_tools")
    watching = _Watching(backend, entry)
    out = project.run(watching, image, project.workflow(LOOK_STEPS), state_dir=tmp_path / "state")
    assert out.result.status == "succeeded", out.end
    assert out.body("look") == {
        "entries": sorted(["__init__.py", *SANDBOX_PACKAGES]),
        "importable": [],
    }
    if entry.mounts_of is None:
        return  # the engine reports no mounts: the view from inside is the check
    assert len(watching.seen) == 1
    target = f"{RUNTIME_ROOT}/runner"
    of_runner = {
        dest: (source, read_only)
        for dest, source, read_only in watching.seen[0]
        if dest == target or dest.startswith(target + "/")
    }
    expected = {f"{target}/__init__.py": resources.package_dir() / "__init__.py"}
    expected |= {f"{target}/{name}": resources.package_dir() / name for name in SANDBOX_PACKAGES}
    assert sorted(of_runner) == sorted(expected)
    for destination, (source, read_only) in of_runner.items():
        assert Path(source) == expected[destination]
        assert read_only is True


# --- limits ------------------------------------------------------------------------------------


def test_memory_limit_is_enforced_and_reported(
    entry: SandboxingBackend, backend: Backend, image: str
) -> None:
    spec = SandboxSpec(
        run_id=_run_id("oom"),
        image=image,
        command=("python3", "-c", "b = bytearray(256 * 1024 * 1024); print(len(b))"),
        limits=ResourceLimits(memory_mb=48),
    )
    state, out, _ = run(backend, spec)
    assert out == b"" and state.exit_code != 0 and not state.killed_by_host
    if entry.capabilities.reports_oom:
        assert state.oom_killed  # the episode's status is then `oom` (runner.episode.status)


def test_pids_limit_is_enforced(entry: SandboxingBackend, backend: Backend, image: str) -> None:
    if not entry.capabilities.pids_limit:
        pytest.skip(f"{entry.name} declares pids_limit=False")
    spec = SandboxSpec(
        run_id=_run_id("pids"),
        image=image,
        command=("python3", "-c", THREADS),
        limits=ResourceLimits(pids_limit=32),
    )
    state, out, err = run(backend, spec)
    assert state.exit_code == 0, (out, err)
    result = _json_line(out)
    assert result["refused"] is not None and result["started"] < 32, result


def test_cpu_limit_is_a_cfs_quota(entry: SandboxingBackend, backend: Backend, image: str) -> None:
    if not entry.capabilities.cpu_limit:
        pytest.skip(f"{entry.name} declares cpu_limit=False")
    spec = SandboxSpec(
        run_id=_run_id("cpus"),
        image=image,
        command=("python3", "-c", CPU_QUOTA),
        limits=ResourceLimits(cpus=0.5),
    )
    state, out, err = run(backend, spec)
    assert state.exit_code == 0, (out, err)
    result = _json_line(out)
    assert int(result["quota"]) / int(result["period"]) == pytest.approx(0.5), result


# --- the host's kill, the timeout and the lifetime cap in the exit state -------------------------


def test_timeout_is_a_host_kill(backend: Backend, image: str) -> None:
    spec = SandboxSpec(run_id=_run_id("timeout"), image=image, command=("sleep", "60"))
    started = time.monotonic()
    with backend.sandbox(spec) as box:
        state = box.wait(0.5)
    assert state.killed_by_host and state.exit_code == 137 and not state.oom_killed
    assert time.monotonic() - started < 10


def test_kill_is_a_host_kill(backend: Backend, image: str) -> None:
    spec = SandboxSpec(run_id=_run_id("kill"), image=image, command=("sleep", "60"))
    with backend.sandbox(spec) as box:
        box.kill()
        state = box.wait(10)
    assert state.killed_by_host and state.exit_code == 137 and not state.oom_killed


def test_cap_ends_a_sandbox_the_host_waits_on_and_the_exit_state_says_so(
    backend: Backend, image: str
) -> None:
    spec = SandboxSpec(
        run_id=_run_id("cap"),
        image=image,
        command=("python3", "-c", "import time; time.sleep(3600)"),
        cap=LifetimeCap(2.0, grace_s=1.0),
    )
    started = time.monotonic()
    with backend.sandbox(spec) as box:
        state = box.wait(60)  # the host would kill only after a minute
    elapsed = time.monotonic() - started
    assert not state.killed_by_host and state.exit_code == 137 and not state.oom_killed
    assert state.ran_s is not None and 2.5 < state.ran_s < 6, state
    assert elapsed < 15, elapsed


# --- labels for the reaper, and cleanup ----------------------------------------------------------

CRASHING_OWNER = """
import sys, time
from runner.backends.base import SandboxSpec
{connect}
spec = SandboxSpec(run_id=sys.argv[1] + "-run", image=sys.argv[2], command=("sleep", "120"))
with backend.sandbox(spec):
    print("started", flush=True)
    time.sleep(120)
"""


# serial: a reaper elsewhere meanwhile (every `run` starts with one) would take this dead
# owner's sandbox first: it has no ledger (pyproject.toml's markers)
@pytest.mark.serial
def test_reaper_removes_a_crashed_owners_container_but_not_a_live_ones(
    entry: SandboxingBackend, backend: Backend, image: str, request: pytest.FixtureRequest
) -> None:
    crashed_session = f"crash-{uuid.uuid4().hex[:10]}"
    owner = CRASHING_OWNER.format(connect=entry.connect_code)
    child = subprocess.Popen(
        [sys.executable, "-c", owner, crashed_session, image], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        seen = []
        for line in child.stdout:  # log lines may come first; EOF ends the loop
            seen.append(line.strip())
            if seen[-1] == "started" or len(seen) > 50:
                break
        assert seen and seen[-1] == "started", seen
    finally:
        child.kill()  # SIGKILL: the owner dies without cleaning up
        child.wait(timeout=30)
    of_crashed = entry.connect(request, crashed_session)
    assert len(entry.leftovers(of_crashed)) == 1

    live_spec = SandboxSpec(run_id=_run_id("live"), image=image, command=("sleep", "60"))
    with backend.sandbox(live_spec) as live:
        removed = entry.connect(request, f"reaper-{uuid.uuid4().hex[:6]}").reap()
        crashed = [r for r in removed if r.run_id == f"{crashed_session}-run"]
        assert len(crashed) == 1, removed
        assert crashed[0].sandbox_s is not None and crashed[0].sandbox_s > 0  # read before removal
        assert live.wait(0.5).killed_by_host  # still running: a live owner's is never reaped
    assert entry.leftovers(of_crashed) == []


def test_a_sandbox_is_removed_when_the_body_raises(
    entry: SandboxingBackend, backend: Backend, image: str
) -> None:
    spec = SandboxSpec(run_id=_run_id("raises"), image=image, command=("sleep", "60"))
    with pytest.raises(ZeroDivisionError), backend.sandbox(spec):
        assert len(entry.leftovers(backend)) == 1
        _ = 1 / 0
    assert entry.leftovers(backend) == []


def test_no_container_of_the_session_remains(
    entry: SandboxingBackend, backend: Backend, probe: dict[str, Any]
) -> None:
    assert entry.leftovers(backend) == []
