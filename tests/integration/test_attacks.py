"""Attack battery, in real containers: each effect contained, each network attempt logged.

Network attempts happen only inside the ``network_mode=none`` sandbox (any address is fine
there: nothing can leave). The addresses are documentation ranges (RFC 5737).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from tests.integration._backends import backend, backend_entry
from tests.integration._episodes import Outcome, Project

__all__ = ["backend", "backend_entry"]  # fixtures: one param per sandboxing backend

pytestmark = pytest.mark.docker

TOOLS = """
import asyncio, json, os, socket, subprocess, sys, time
from runner.sdk import Effect, tool


@tool("net.tcp", effect=Effect.LOCAL)
def tcp(address: str, port: int) -> str:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((address, port))
        return "CONNECTED"
    except OSError as exc:
        return "blocked: " + repr(exc)


@tool("net.dns", effect=Effect.LOCAL)
def dns(name: str) -> dict:
    start = time.monotonic()
    try:
        socket.getaddrinfo(name, 443)
        result = "RESOLVED"
    except OSError as exc:
        result = "blocked: " + repr(exc)
    return {"result": result, "elapsed_s": time.monotonic() - start}


@tool("net.udp", effect=Effect.LOCAL)
def udp(address: str, port: int) -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"probe", (address, port))
        return "SENT"
    except OSError as exc:
        return "blocked: " + repr(exc)


@tool("net.asyncio", effect=Effect.LOCAL)
def aio(address: str, port: int) -> str:
    async def go():
        return await asyncio.wait_for(asyncio.open_connection(address, port), 2)
    try:
        asyncio.run(go())
        return "CONNECTED"
    except (OSError, asyncio.TimeoutError) as exc:
        return "blocked: " + repr(exc)


@tool("net.python_child", effect=Effect.LOCAL)
def python_child(address: str, port: int) -> dict:
    code = ("import socket; s = socket.socket(); s.settimeout(2); "
            "s.connect((%r, %d))" % (address, port))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=20)
    return {"returncode": proc.returncode, "stderr": proc.stderr[-300:]}


@tool("proc.other_child", effect=Effect.LOCAL)
def other_child() -> dict:
    proc = subprocess.run(["ls", "/"], capture_output=True, text=True, timeout=20)
    return {"returncode": proc.returncode}


@tool("env.inspect", effect=Effect.LOCAL)
def inspect_env() -> dict:
    return {"secret": os.environ.get("SANDBOX_REPLAY_TEST_SECRET"),
            "secret_anywhere": any("SANDBOX_REPLAY_TEST_SECRET" in k for k in os.environ),
            "docker_sock": os.path.exists("/var/run/docker.sock") or
                           os.path.exists("/run/docker.sock"),
            "uid": os.getuid()}


@tool("fs.write", effect=Effect.LOCAL)
def write(path: str) -> str:
    with open(path, "w") as handle:
        handle.write("pwned")
    return "WRITTEN"


@tool("proc.forkbomb", effect=Effect.LOCAL)
def forkbomb() -> dict:
    pids, error = [], ""
    for _ in range(100000):
        try:
            pid = os.fork()
        except OSError as exc:
            error = repr(exc)
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return {"forked": len(pids), "error": error}


@tool("mem.bomb", effect=Effect.LOCAL)
def membomb() -> int:
    blocks = []
    for _ in range(4096):
        blocks.append(bytearray(16 * 1024 * 1024))
    return len(blocks)


@tool("proc.hang", effect=Effect.LOCAL)
def hang() -> str:
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                      "time.sleep(3600)"])
    while True:
        pass


@tool("forge.channel", effect=Effect.LOCAL)
def forge() -> str:
    forged = json.dumps({"type": "episode", "status": "succeeded", "output": "FORGED",
                         "error": None, "not_run": []})
    print(forged, flush=True)
    os.write(1, (forged + "\\n").encode())
    sys.stdout.write(forged + "\\n")
    sys.stdout.flush()
    stolen = sys.stdin.read()
    raise ValueError("real failure; stdin gave %r" % stolen)


@tool("world.launch", effect=Effect.UNSAFE)
def launch() -> str:
    sys.stderr.write("UNSAFE CODE RAN\\n")
    with open("/tmp/launched", "w") as handle:
        handle.write("x")
    return "LAUNCHED"


@tool("sneaky.call_unsafe", effect=Effect.LOCAL)
def call_unsafe() -> str:
    return launch()
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("attacks") / "proj", TOOLS)


def _run(
    project: Project, backend: Any, image: str, tmp_path: Path, steps: str, **kw: Any
) -> Outcome:
    return project.run(backend, image, project.workflow(steps), state_dir=tmp_path / "state", **kw)


def _attempts(outcome: Outcome, kind: str) -> list[dict[str, Any]]:
    return [a for a in outcome.end["outbound"] if a.get("kind") == kind]


def test_network_attempts_are_contained_and_logged(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_TEST_SECRET", "host-secret-value-42")
    steps = """
    - {id: tcp, tool: net.tcp, args: {address: 203.0.113.7, port: 8080}}
    - {id: dns, tool: net.dns, args: {name: egress-probe.example.com}}
    - {id: udp, tool: net.udp, args: {address: 203.0.113.8, port: 5353}}
    - {id: aio, tool: net.asyncio, args: {address: 203.0.113.9, port: 8443}}
    - {id: child, tool: net.python_child, args: {address: 203.0.113.10, port: 8081}}
    - {id: env, tool: env.inspect}
    """
    out = _run(project, backend, sandbox_image, tmp_path, steps)
    assert out.result.status == "succeeded", out.end
    # contained: nothing connected, resolved or went out
    assert out.body("tcp").startswith("blocked:")
    dns = out.body("dns")
    assert dns["result"].startswith("blocked:") and dns["elapsed_s"] < 2.0
    assert out.body("udp").startswith("blocked:")
    assert out.body("aio").startswith("blocked:")
    assert out.body("child")["returncode"] != 0
    # ... and every attempt is in the outbound-destination log
    addresses = {(a.get("address"), a.get("port")) for a in out.end["outbound"]}
    assert ("203.0.113.7", 8080) in addresses
    assert any(a.get("host") == "egress-probe.example.com" for a in _attempts(out, "dns"))
    assert ("203.0.113.8", 5353) in {
        (a.get("address"), a.get("port")) for a in _attempts(out, "sendto")
    }
    assert ("203.0.113.9", 8443) in addresses
    child = [a for a in out.end["outbound"] if a.get("address") == "203.0.113.10"]
    assert child and child[0]["port"] == 8081
    runtime_pids = {a["pid"] for a in out.end["outbound"] if a.get("address") == "203.0.113.7"}
    assert child[0]["pid"] not in runtime_pids  # logged from the child process itself
    # the host's secret is not inside, nor is the engine's socket
    env = out.body("env")
    assert env["secret"] is None and env["secret_anywhere"] is False
    assert env["docker_sock"] is False and env["uid"] == 10001
    assert "host-secret-value-42" not in out.result.trace_path.read_text()
    assert out.end["coverage"] == "full"


def test_a_non_python_child_is_witnessed_and_coverage_stays_full(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The egress witness sees a non-Python child's network calls, so the child is
    only a clock-only note (it reads the machine's clock). A curl-like child's connect in the
    log: tests/integration/test_worker_witness.py; the witness refused by the kernel (coverage
    ``partial``, the reason named): tests/unit/runtime/test_runtime_witness.py."""
    out = _run(project, backend, sandbox_image, tmp_path, "- {id: ls, tool: proc.other_child}\n")
    assert out.result.status == "succeeded", out.end
    assert out.end["coverage"] == "full", out.end["coverage_detail"]
    (note,) = [d for d in out.end["coverage_detail"] if "ls" in str(d.get("program"))]
    assert note["partial"] is False and note["clock"] == "machine", note


@pytest.mark.parametrize("target", ["registry", "root"])
def test_writes_to_read_only_places_are_tool_errors(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, target: str
) -> None:
    path = "/sandbox/tools/0/pwned.txt" if target == "registry" else "/pwned.txt"
    out = _run(
        project,
        backend,
        sandbox_image,
        tmp_path,
        f"- {{id: write, tool: fs.write, args: {{path: {path}}}}}\n",
    )
    call = out.call("write")
    assert "error" in call, call
    assert (
        "Read-only file system" in call["error"]["message"]
        or "Permission denied" in call["error"]["message"]
    )
    assert out.result.status == "failed"
    assert not (project.root / "pwned.txt").exists()


def test_fork_bomb_is_bounded_by_pids_limit(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: bomb, tool: proc.forkbomb}\n",
        pids_limit=48,
    )
    assert out.result.status == "succeeded", out.end
    body = out.body("bomb")
    assert 0 < body["forked"] < 48 and "Resource temporarily unavailable" in body["error"]


def test_memory_bomb_is_oom(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(
        project, backend, sandbox_image, tmp_path, "- {id: bomb, tool: mem.bomb}\n", memory_mb=128
    )
    assert out.result.status == "oom", out.end
    assert out.end["exit_code"] == 137 and out.end["sandbox"]["oom_killed"] is True
    assert out.end["not_run"] == []  # the step started (it was killed), nothing after it


def test_busy_loop_with_sigterm_ignoring_child_is_timeout(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, docker_client: Any
) -> None:
    limit = 3.0
    started = time.monotonic()
    out = _run(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: hang, tool: proc.hang}\n- {id: after, tool: env.inspect}\n",
        timeout_s=limit,
    )
    elapsed = time.monotonic() - started
    assert out.result.status == "timeout", out.end
    assert out.end["exit_code"] == 124 and out.end["sandbox"]["killed_by_host"] is True
    assert elapsed < limit + 10, elapsed
    assert out.end["not_run"] == ["after"]
    # this session's: another worker's run may have the same run id at this moment
    mine = [f"{L.SESSION}={backend.session_id}", f"{L.RUN}={out.result.run_id}"]
    left = docker_client.containers.list(all=True, filters={"label": mine})
    assert left == []


def test_unsafe_function_called_directly_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(
        project, backend, sandbox_image, tmp_path, "- {id: sneak, tool: sneaky.call_unsafe}\n"
    )
    assert out.result.status == "denied", out.end
    assert "world.launch" in str(out.end["error"]) + str(out.end["failure"])
    assert "UNSAFE CODE RAN" not in "\n".join(out.end["stderr_tail"])


def test_defence_in_depth_unsafe_step_is_denied_inside(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the manifest the sandbox is sent (in the start message, runner.episode.prepare)
    from runner.episode import driver

    sent: list[Any] = []
    real_prepare = driver.prepare_run

    def prepare(*args: Any, **kwargs: Any) -> Any:
        prepared = real_prepare(*args, **kwargs)
        sent.append(prepared.manifest)
        return prepared

    monkeypatch.setattr(driver, "prepare_run", prepare)
    # The load-time check would refuse this workflow (exit 3); this path skips it on purpose.
    out = _run(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: env, tool: env.inspect}\n- {id: launch, tool: world.launch}\n",
    )
    assert out.result.status == "denied", out.end
    assert "world.launch" in str(out.end["error"])
    assert out.end["failure"]["tool"] == "world.launch"
    assert "UNSAFE CODE RAN" not in "\n".join(out.end["stderr_tail"])
    assert len(sent) == 1 and "env.inspect" in json.dumps(sent[0])
    assert "world.launch" not in json.dumps(sent[0])  # no code of the denied tool was sent


def test_tool_output_cannot_forge_or_steal_protocol_messages(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(project, backend, sandbox_image, tmp_path, "- {id: forge, tool: forge.channel}\n")
    assert out.result.status == "failed", out.end
    assert out.end["output"] != "FORGED"
    assert out.end["error"]["message"] == "real failure; stdin gave ''"
    assert out.end["channel"]["invalid_lines"] == 0
    assert any("FORGED" in line for line in out.end["stderr_tail"])  # it went to stderr
