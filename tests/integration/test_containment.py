"""No sandbox outlives its orchestrator, in real containers.

Three layers, each shown on its own: end-of-file on stdin ends the runtime when the host's end
of the attach connection closes (the orchestrator was SIGKILLed: ``StdinOnce``); the runtime's
watchdog ends a run the host did not kill a grace after its deadline (exit 124); the sandbox's
hard lifetime cap (PID 1 ``timeout -s KILL``, fixed at creation) ends a sandbox that ignores
stdin or freezes the runtime (exit 137). A sandbox that ended itself past its deadline is
classified ``timeout``, as a host kill would be.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from runner.backends.base import SandboxSpec
from runner.backends.docker import DockerBackend
from tests.integration._episodes import Project

pytestmark = pytest.mark.docker

CLI = [sys.executable, "-c", "from runner.cli import main; main()"]

TOOLS = """
import re, subprocess, sys, time
from runner.sdk import Effect, tool

IGNORE_TERM = "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"


@tool("spin.forever", effect=Effect.PURE)
def forever() -> str:
    # a child that ignores SIGTERM and sleeps, and a parent that spins: neither ever ends
    subprocess.Popen([sys.executable, "-c", IGNORE_TERM + "time.sleep(3600)"])
    while True:
        pass


@tool("spin.gil", effect=Effect.PURE)
def gil() -> str:
    # catastrophic backtracking: the regex engine never releases the GIL, so no other thread
    # of the runtime (channel reader, watchdog) runs again
    return str(re.match(r"(a+)+$", "a" * 64 + "b"))
"""


@pytest.fixture(scope="module")
def backend(docker_client: Any) -> Iterator[DockerBackend]:
    b = DockerBackend.connect(session_id=f"contain-{uuid.uuid4().hex[:10]}")
    yield b
    b.close()


def _running(docker_client: Any, label: str) -> list[dict[str, Any]]:
    return list(docker_client.api.containers(filters={"label": [label]}))  # running only


def _all(docker_client: Any, label: str) -> list[dict[str, Any]]:
    return list(docker_client.api.containers(all=True, filters={"label": [label]}))


def _wait_until(predicate: Any, limit_s: float, poll_s: float = 0.25) -> float:
    """Seconds until ``predicate()`` held; fails after ``limit_s``."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit_s:
            pytest.fail(f"not within {limit_s} s")
        time.sleep(poll_s)
    return time.monotonic() - started


def _ends(docker_client: Any, label: str, since: float) -> dict[str, dict[str, Any]]:
    """How each container with ``label`` ended since ``since`` (epoch s), from engine events.

    ``{name: {"died": epoch s | None, "killed": bool, "exit_code": str | None}}``. ``killed``
    means the engine was asked to kill it (``docker kill``/``rm -f``: a reaper, a host) before
    it died; a container that ended by itself (EOF, its cap) has ``died`` and not ``killed``.
    On a shared engine other sessions' reapers remove dead owners' containers: the events, not
    the container list, tell who ended a container.
    """
    events = docker_client.api.events(
        since=int(since),
        until=int(time.time()) + 1,
        filters={"type": "container", "label": [label]},
        decode=True,
    )
    ends: dict[str, dict[str, Any]] = {}
    for event in events:
        attributes = event.get("Actor", {}).get("Attributes", {})
        entry = ends.setdefault(
            attributes.get("name", "?"), {"died": None, "killed": False, "exit_code": None}
        )
        if event.get("Action") == "kill" and entry["died"] is None:
            entry["killed"] = True
        elif event.get("Action") == "die" and entry["died"] is None:
            entry["died"] = event.get("timeNano", 0) / 1e9
            entry["exit_code"] = attributes.get("exitCode")
    return ends


def test_sigkilled_submit_leaves_no_running_sandbox(
    tmp_path: Path, sandbox_image: str, docker_client: Any
) -> None:
    """kill -9 of ``submit`` with four spinning runs: each container ends itself at once.

    With the warm pool (``submit``'s default) the pooled sandboxes, assigned or still waiting,
    are the owner's containers too, and end the same way (end-of-file on stdin).
    """
    project = Project(tmp_path / "project", TOOLS, module="spin_tools")
    variants: list[str] = []
    for name in ("spin-a", "spin-b"):
        workflow = project.workflow("- {id: spin, tool: spin.forever}\n", name=name)
        variants += ["--variant", str(workflow)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "t1", "input": {}}\n{"task_id": "t2", "input": {}}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_REPLAY")}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
        SANDBOX_REPLAY_CPUS="0.25",  # four spinning sandboxes on a shared machine
        SANDBOX_REPLAY_TIMEOUT_S="120",  # the cap (130 s) is not what ends them here
    )
    proc = subprocess.Popen(
        [*CLI, "submit", "--json", "--concurrency", "4", "--tasks", str(tasks), *variants],
        cwd=project.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    owner = f"{L.OWNER_PID}={proc.pid}"
    try:
        # four runs, and the warm pool's sandboxes beside them (submit's default): every
        # container of the owner must end itself once the owner is gone
        _wait_until(lambda: len(_running(docker_client, owner)) >= 4 or proc.poll() is not None, 90)
        assert proc.poll() is None, "submit ended before its four runs were up"
        time.sleep(2.0)  # every run is inside its spinning tool by now
        names = {str(c["Names"][0]).lstrip("/") for c in _running(docker_client, owner)}
        assert len(names) >= 4
        assert sum(not n.startswith("sandbox-replay-pool-") for n in names) <= 4
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        _wait_until(lambda: not _running(docker_client, owner), 20)
    finally:
        if proc.poll() is None:
            proc.kill()
    ends = _ends(docker_client, owner, killed_at - 1)
    assert set(ends) >= names, ends
    for name in names:
        assert ends[name]["died"] is not None and not ends[name]["killed"], (name, ends[name])
        assert ends[name]["exit_code"] == "0", ends[name]  # the runtime's EOF exit
    slowest = max(ends[n]["died"] for n in names) - killed_at
    print(f"{len(names)} orphaned sandboxes ended themselves within {slowest:.2f} s of kill -9")
    assert slowest < 10
    for container in _all(docker_client, owner):  # stopped, not removed: the next command
        docker_client.api.remove_container(container["Id"], force=True)  # of that state reaps


OWNER_SCRIPT = """
import sys, time
from runner.backends import labels as L
from runner.backends.base import LifetimeCap, SandboxSpec
from runner.backends.docker import DockerBackend
from runner.backends.docker.client import connect
# ignores stdin (closed at once), ignores SIGTERM, sleeps for an hour
SLEEPER = ("import os, signal, time\\nos.close(0)\\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\ntime.sleep(3600)")
# labelled with the test process as owner: it is alive, so no reaper of any session removes
# the sandbox before its cap ends it
owner = L.Owner(host=L.host_id(), pid=int(sys.argv[3]), start=sys.argv[4])
backend = DockerBackend(connect(None), session_id=sys.argv[1], owner=owner)
spec = SandboxSpec(run_id=sys.argv[1] + "-run", image=sys.argv[2],
                   command=("python3", "-c", SLEEPER), cap=LifetimeCap(3.0, grace_s=1.0))
with backend.sandbox(spec):
    print("started", flush=True)
    time.sleep(3600)
"""


def test_a_sandbox_ignoring_stdin_still_dies_at_its_cap_after_its_owner_is_killed(
    sandbox_image: str, docker_client: Any
) -> None:
    session = f"capped-{uuid.uuid4().hex[:10]}"
    me = L.current_owner()
    since = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, session, sandbox_image, str(me.pid), me.start],
        stdout=subprocess.PIPE,
        text=True,
    )
    label = f"{L.SESSION}={session}"
    try:
        assert child.stdout is not None
        seen: list[str] = []
        for line in child.stdout:  # structlog's default prints debug lines on stdout first
            seen.append(line.strip())
            if seen[-1] == "started" or len(seen) > 50:
                break
        assert seen and seen[-1] == "started", seen
    finally:
        child.kill()  # SIGKILL: the attach connection closes, nobody kills the sandbox
        child.wait(timeout=30)
    assert _running(docker_client, label), "the sandbox ignores stdin: EOF does not end it"
    _wait_until(lambda: not _running(docker_client, label), 15)
    (found,) = _all(docker_client, label)
    state = docker_client.api.inspect_container(found["Id"])["State"]
    name = str(found["Names"][0]).lstrip("/")
    end = _ends(docker_client, label, since - 1)[name]
    assert not end["killed"] and end["exit_code"] == "137", end  # its own cap, not a kill
    assert not state["OOMKilled"]
    from runner.backends.docker.sandbox import ran_seconds

    ran_s = ran_seconds(state)
    print(f"stdin-ignoring sandbox ended by its 4 s cap after {ran_s:.2f} s")
    assert ran_s is not None and 3.8 < ran_s < 6
    docker_client.api.remove_container(found["Id"], force=True)


def _slow_host_clock() -> Any:
    """A host clock at a tenth of real speed: the host's own deadline comes ten times late."""
    origin = time.monotonic()
    return lambda: origin + (time.monotonic() - origin) / 10


def test_watchdog_ends_a_run_the_host_did_not_kill_and_it_is_a_timeout(
    tmp_path: Path, backend: DockerBackend, sandbox_image: str
) -> None:
    project = Project(tmp_path / "project", TOOLS, module="spin_tools")
    started = time.monotonic()
    out = project.run(
        backend,
        sandbox_image,
        project.workflow("- {id: spin, tool: spin.forever}\n- {id: after, tool: spin.gil}\n"),
        state_dir=tmp_path / "state",
        monotonic=_slow_host_clock(),
        timeout_s=3.0,
        cpus=0.5,
    )
    elapsed = time.monotonic() - started
    assert out.result.status == "timeout", out.end
    sandbox = out.end["sandbox"]
    assert sandbox["killed_by_host"] is False and sandbox["exit_code"] == 124, sandbox
    assert "watchdog" in out.end["reason"], out.end["reason"]
    assert out.end["exit_code"] == 124 and out.end["not_run"] == ["after"]
    assert 6.0 <= sandbox["ran_s"] < 10, sandbox  # 3 s deadline + the watchdog's 3 s grace
    assert elapsed < 20, elapsed


def test_a_tool_holding_the_gil_cannot_freeze_the_runtime_and_it_is_a_timeout(
    tmp_path: Path, backend: DockerBackend, sandbox_image: str
) -> None:
    """The tool holds its interpreter's GIL for ever: that is the worker's, not the runtime's
    (runner/runtime/worker/), so the runtime's watchdog still ends the run at its deadline plus
    the grace (before the worker, this froze the runtime and only the lifetime cap ended it)."""
    project = Project(tmp_path / "project", TOOLS, module="spin_tools")
    out = project.run(
        backend,
        sandbox_image,
        project.workflow("- {id: gil, tool: spin.gil}\n"),
        state_dir=tmp_path / "state",
        monotonic=_slow_host_clock(),
        timeout_s=2.0,
        cpus=0.5,
    )
    assert out.result.status == "timeout", out.end
    sandbox = out.end["sandbox"]
    assert sandbox["killed_by_host"] is False and sandbox["exit_code"] == 124, sandbox
    assert "watchdog" in out.end["reason"], out.end["reason"]
    assert 5.0 <= sandbox["ran_s"] < 10, sandbox  # 2 s deadline + the watchdog's 3 s grace


FREEZER = r"""
import ctypes, errno, json, os, signal, time
result = {"pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode()}
for sig in (signal.SIGSTOP, signal.SIGKILL):  # the kernel ignores both for a namespace's init
    os.kill(1, sig)
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
if libc.ptrace(PTRACE_SEIZE, 1, 0, 0) == 0:
    libc.ptrace(PTRACE_INTERRUPT, 1, 0, 0)  # would freeze the cap
    result["ptrace"] = "attached"
else:
    result["ptrace"] = errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(result), flush=True)
time.sleep(3600)
"""


def test_tool_code_can_neither_stop_kill_nor_ptrace_the_cap(
    backend: DockerBackend, sandbox_image: str
) -> None:
    import json

    from runner.backends.base import STDOUT, LifetimeCap

    spec = SandboxSpec(
        run_id=f"freeze-{uuid.uuid4().hex[:10]}",
        image=sandbox_image,
        command=("python3", "-c", FREEZER),
        cap=LifetimeCap(2.0, grace_s=1.0),
    )
    out = bytearray()
    deadline = time.monotonic() + 15  # the cap is 3 s; a frozen cap would hold us for ever
    with backend.sandbox(spec) as box:
        for frame in box.frames(0.2):
            if frame is not None and frame[0] == STDOUT:
                out.extend(frame[1])
            if time.monotonic() > deadline:
                break
        state = box.wait(max(0.1, deadline - time.monotonic()))  # kills when still running
    result = json.loads(out.decode().splitlines()[0])
    assert result["pid1"] == "/usr/local/sbin/sandbox-replay-cap", (
        f"{sandbox_image} has no execute-only cap program (PID 1 is {result['pid1']}): rebuild"
        " it (make image)",
        result,
    )
    assert result["ptrace"] == "EPERM", result  # not dumpable: no same-uid ptrace
    assert not state.killed_by_host and state.exit_code == 137, state  # the cap still fired
    assert state.ran_s is not None and state.ran_s < 8, state
