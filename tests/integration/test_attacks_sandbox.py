"""Hostile tool code against the sandbox itself: network, files, secrets, processes, floods.

Real containers (``network_mode=none``); network attempts stay inside the sandbox or go to
loopback listeners this file starts on the host. Hostile tools: tests/fixtures/attacks/
hostile_tools.py. ``xfail(strict=True)`` marks an open weakness (the reason names it); the
passing tests are the proof of containment.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from tests.integration._episodes import Project
from tests.integration._hostile import backend, backend_entry, project, run_steps

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry", "project"]  # fixtures


# --- network ------------------------------------------------------------------------------------


@pytest.fixture()
def loopback_listeners() -> Iterator[tuple[int, str, list[str]]]:
    """A TCP listener on 127.0.0.1 and ::1 (same port) and an abstract unix listener, on the
    host; each records whether anything connected."""
    hits: list[str] = []
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v4.bind(("127.0.0.1", 0))
    port = v4.getsockname()[1]
    sockets = [v4]
    try:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        v6.bind(("::1", port))
        sockets.append(v6)
    except OSError:
        pass
    abstract = f"sandbox-replay-attack-{os.getpid()}-{port}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    sockets.append(unix)
    stop = threading.Event()

    for sock in sockets:  # listening before the fixture returns (the control connects at once)
        sock.listen(4)

    def serve(sock: socket.socket) -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            hits.append(repr(sock.getsockname()))
            conn.close()

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in sockets]
    for thread in threads:
        thread.start()
    yield port, abstract, hits
    stop.set()
    for thread in threads:
        thread.join(2)
    for sock in sockets:
        sock.close()


def test_network_escapes_fail_and_host_loopback_listeners_see_nothing(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    loopback_listeners: tuple[int, str, list[str]],
) -> None:
    port, abstract, hits = loopback_listeners
    # positive control: the host's own listeners answer on loopback
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.connect("\0" + abstract)
    probe.close()
    time.sleep(0.5)
    assert len(hits) == 2
    hits.clear()
    steps = f"- {{id: net, tool: net.probe, args: {{tcp_port: {port}, abstract: {abstract}}}}}\n"
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.end["status"] == "succeeded", out.end
    body = out.body("net")
    assert body["interfaces"] == ["lo"]
    for key in ("loopback_v4", "loopback_v6", "link_local_v6", "abstract_unix"):
        assert body[key].startswith(("blocked", "socket")), (key, body[key])
    for key in [k for k in body if k.startswith("unix /")]:
        assert body[key].startswith("blocked"), (key, body[key])
    assert body["raw_icmp"].startswith("blocked") and body["packet"].startswith("blocked")
    assert body["netlink_new_addr_errno"] == 1  # EPERM: no CAP_NET_ADMIN
    assert "0a63" not in body["addresses_after"]
    time.sleep(0.5)
    assert hits == []  # nothing from the sandbox reached the host's loopback or unix listener
    logged = {(a.get("address"), a.get("port")) for a in out.end["outbound"]}
    assert ("127.0.0.1", port) in logged and ("::1", port) in logged
    assert any(
        a.get("address") == "\0" + abstract or abstract in str(a.get("address"))
        for a in out.end["outbound"]
    )


def test_egress_flood_is_capped_and_counted(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    steps = """
    - {id: flood, tool: net.flood, args: {count: 5000}}
    - {id: childlog, tool: net.child_log_flood}
    """
    out = run_steps(project, backend, sandbox_image, tmp_path, steps, timeout_s=120)
    assert out.end["status"] == "succeeded", out.end
    assert len(out.end["outbound"]) <= 1000
    assert out.end["outbound_dropped"] > 0
    assert out.end["coverage"] == "partial"  # the child log was capped, and said so
    assert any("capped" in str(c.get("reason")) for c in out.end["coverage_detail"])
    assert out.result.trace_path.stat().st_size < 20 * 1024 * 1024


# --- file system ---------------------------------------------------------------------------------

WRITABLE_ONLY = {"/tmp/x"}


def test_only_tmp_is_writable(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: fs, tool: fs.probe}\n")
    body = out.body("fs")
    written = {p for p, v in body.items() if v == "WRITTEN"}
    assert {"/proc/sys/kernel/hostname", "/sandbox/run/x", "/sandbox/tools/0/x"}.isdisjoint(written)
    assert "/opt/sandbox-replay/runner/x.py" not in written and "/etc/passwd" not in written
    assert "/dev/x" not in written  # bwrap's /dev is a tmpfs of half the RAM
    assert "/tmp/x" in written
    assert body["sandbox_dir"] in (["run", "tools"], ["tools"])  # images/Dockerfile's mkdir
    assert body["run_dir"] in ([], None)  # nothing of the run is mounted: it comes in ``start``
    assert not (project.root / "x").exists()


def test_dev_shm_is_bounded_by_tmpfs_mb_and_mqueue_takes_nothing(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    # /dev/shm stays (multiprocessing's semaphores need it) but no larger than /tmp; Docker's
    # default is 64 MiB whatever the policy says. /dev/mqueue: the msgqueue ulimit is 0.
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: fs, tool: fs.probe}\n"
        "- {id: fill, tool: fs.fill_tmp, args: {mb: 200, folder: /dev/shm}}\n",
        tmpfs_mb=16,
        memory_mb=512,
    )
    assert out.end["status"] == "succeeded", out.end
    probe = out.body("fs")
    assert probe["/dev/mqueue/x"] != "WRITTEN" and probe["mqueue_dir"] == [], probe  # no queue
    body = out.body("fill")
    assert body["written_mb"] <= 16 and "errno 28" in body["error"], body  # ENOSPC


def test_tmp_is_bounded_by_tmpfs_mb(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: fill, tool: fs.fill_tmp, args: {mb: 200}}\n",
        tmpfs_mb=32,
        memory_mb=512,
    )
    assert out.end["status"] == "succeeded", out.end
    body = out.body("fill")
    assert body["written_mb"] <= 32 and "errno 28" in body["error"], body  # ENOSPC


# --- secrets -------------------------------------------------------------------------------------


def test_no_host_secret_in_any_process_environment(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-env-secret-77")
    monkeypatch.setenv("SANDBOX_REPLAY_OPENAI_API_KEY", "sk-host-env-secret-78")
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: s, tool: secrets.probe}\n")
    body = out.body("s")
    # PID 1 is the execute-only lifetime cap: its environ cannot be read at
    # all, which is stronger than readable-and-clean; the runtime's own must be readable
    assert isinstance(body["/proc/self/environ"], list), body["/proc/self/environ"]
    assert isinstance(body["/proc/1/environ"], list) or body["/proc/1/environ"] == (
        "blocked: PermissionError"
    )
    for path in ("/proc/1/environ", "/proc/self/environ"):
        if not isinstance(body[path], list):
            continue
        assert not any("sk-host-env-secret" in v for v in body[path])
        assert not any(v.startswith(("OPENAI", "DOCKER")) for v in body[path])


def test_secrets_beside_the_tool_code_are_not_readable(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: s, tool: secrets.probe}\n")
    assert "sk-project-secret" not in out.body("s")["dotenv"]


# --- processes and resources ---------------------------------------------------------------


def test_daemon_holding_stdout_does_not_outlive_the_episode(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, docker_client: Any
) -> None:
    started = time.monotonic()
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: d, tool: proc.daemon}\n")
    elapsed = time.monotonic() - started
    assert out.end["status"] == "succeeded", out.end
    assert out.end["sandbox"]["killed_by_host"] is False  # ended by itself, not by the grace kill
    assert elapsed < 8, elapsed
    # this session's: another worker's run may have the same run id at this moment
    mine = [f"{L.SESSION}={backend.session_id}", f"{L.RUN}={out.result.run_id}"]
    assert docker_client.containers.list(all=True, filters={"label": mine}) == []


def test_sigstop_from_a_tool_never_hangs_the_episode(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """A tool SIGSTOPs its own process. Before the worker process that was the runtime (a
    ``timeout``); now it is the worker, and the runtime (PID 1, which a stop signal from inside
    cannot reach: tests/integration/test_attacks_worker.py) still ends the episode within its
    timeout: the worker is continued and the step returns, or the run times out. Never a hang."""
    started = time.monotonic()
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: s, tool: proc.sigstop_self}\n",
        timeout_s=4,
    )
    assert out.end["type"] == "end" and out.end["status"] in ("succeeded", "timeout"), out.end
    if out.end["status"] == "succeeded":
        assert out.end["output"] == "continued"
    assert time.monotonic() - started < 4 + 15


def test_oom_of_a_child_is_reported_as_oom(
    project: Project, backend: Any, backend_entry: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """A child killed at the memory limit makes the run ``oom``; in a container the runtime
    counted the kill itself (the engine's ``OOMKilled`` can come after the exit it reads)."""
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: c, tool: proc.child_oom}\n",
        memory_mb=96,
    )
    assert out.end["status"] == "oom", out.end
    assert out.end["sandbox"]["oom_killed"] is True
    if backend_entry.name.startswith("docker"):  # the container's memory cgroup is mounted
        assert out.end["sandbox"]["oom_kills"] >= 1, out.end["sandbox"]


# --- the host under a flood of small messages -----------------------------------------------------


class _PeakBlocks:
    """Samples ``sys.getallocatedblocks()`` on a thread; ``peak`` after stop.

    Live interpreter blocks, not RSS: earlier tests may have left freed heap behind that
    would absorb new growth without RSS moving.
    """

    def __init__(self) -> None:
        self.start = sys.getallocatedblocks()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sys.getallocatedblocks())
            time.sleep(0.02)

    def __enter__(self) -> _PeakBlocks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


FLOOD_MB = 24  # ~500k messages; 48 MB proved no more and took twice as long


@pytest.mark.parametrize("unique", [False, True], ids=["same_step_id", "unique_step_ids"])
@pytest.mark.slow
def test_flood_of_small_step_messages_keeps_host_memory_bounded(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, unique: bool
) -> None:
    """24 MB of tiny ``step`` messages (what tool code can write on the channel fd)."""
    from tests.integration._episodes import protocol_script

    body = f"""
    import itertools
    total, batch = 0, []
    for i in itertools.count():
        step = "s%08d" % i if {unique!r} else "s"
        batch.append('{{"type":"step","step_id":"%s","state":"started"}}\\n' % step)
        if len(batch) == 20000:
            data = "".join(batch).encode()
            raw(data)
            total += len(data)
            batch = []
            if total > {FLOOD_MB} * 1024 * 1024:
                break
    """
    with _PeakBlocks() as blocks:
        out = project.run(
            backend,
            sandbox_image,
            project.workflow("- {id: echo, tool: contained.thread}\n"),
            state_dir=tmp_path / "state",
            command=protocol_script(body),
            timeout_s=240,
        )
    assert out.end["status"] == "succeeded", out.end
    assert out.end["channel"]["stdout_bytes"] > FLOOD_MB * 1024 * 1024
    growth = blocks.peak - blocks.start
    # ~500,000 messages: keeping each made-up id would hold 1 million objects at least (a host
    # that kept them, checked: 941,437 more for unique ids)
    assert growth < 200_000, f"{growth} more live objects for {FLOOD_MB} MB of steps"


def test_two_sandboxes_running_at_once_cannot_reach_each_other(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Loopback, abstract unix sockets and /tmp are per sandbox, even for concurrent runs."""
    args = "{port: 47001, name: xrun-probe, wait_s: 6}"
    listen = project.workflow(f"- {{id: l, tool: xrun.listen, args: {args}}}\n")
    connect = project.workflow(f"- {{id: c, tool: xrun.connect, args: {args}}}\n")
    outcomes: dict[str, Any] = {}

    def run(key: str, workflow: Path) -> None:
        outcomes[key] = project.run(
            backend, sandbox_image, workflow, state_dir=tmp_path / key, timeout_s=60
        )

    threads = [
        threading.Thread(target=run, args=("listen", listen)),
        threading.Thread(target=run, args=("connect", connect)),
    ]
    threads[0].start()
    time.sleep(1.0)
    threads[1].start()
    for thread in threads:
        thread.join(120)
    listened, connected = outcomes["listen"], outcomes["connect"]
    assert listened.end["status"] == "succeeded", listened.end
    assert connected.end["status"] == "succeeded", connected.end
    assert listened.body("l")["accepted"] == []
    body = connected.body("c")
    # TCP: the egress witness answers every IP connect ENETUNREACH: OSError
    assert body["tcp"] == "OSError" and body["unix"] == "ConnectionRefusedError"
    assert body["marker"] is False
