"""The real DockerBackend over a fake low-level docker client (no Docker needed).

The fake records every call, serves the attach stream from one end of a socketpair, and lets a
test script failures. Asserts the exact create flags, the lifecycle order, removal in every
path, retries only of idempotent calls, and the owner-aware reaper.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests
import urllib3.exceptions

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import STDERR, STDOUT, Mount, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.frames import FrameDecoder, FrameError, encode_frame
from runner.backends.docker.hardening import _CAP_SCRIPT as CAP_SCRIPT
from runner.errors import InfrastructureError, TransientInfrastructureError

OWNER = L.Owner(host="h0st", pid=4242, start="777")


def api_error(status: int, message: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    cls = docker.errors.NotFound if status == 404 else docker.errors.APIError
    return cls(f"{status}", response=response, explanation=message)


class FakeAPI:
    """Stands in for docker.APIClient: same method names, records calls."""

    api_version = "1.41"

    def __init__(self, output: list[bytes] | None = None, exit_code: int = 0) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.host_end, self.engine_end = socket.socketpair()
        self.output = output if output is not None else []
        self.exit_code = exit_code
        self.oom = False
        self.running = False
        self.killed = False
        self.fail: dict[str, list[BaseException]] = {}
        self.created: dict[str, dict[str, Any]] = {}
        self.listing: list[dict[str, Any]] = []
        self.stdin = bytearray()

    def _record(self, method: str, /, *args: Any, **kwargs: Any) -> None:
        self.calls.append((method, args, kwargs))
        errors = self.fail.get(method)
        if errors:
            raise errors.pop(0)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def create_container(self, **kwargs: Any) -> dict[str, str]:
        # The engine creates it even when the answer is then lost; a taken name stays as it is.
        self.created.setdefault(kwargs["name"], kwargs)
        self._record("create_container", **kwargs)
        return {"Id": "cid-1"}

    def attach_socket(self, container: str, params: dict[str, int]) -> socket.socket:
        self._record("attach_socket", container, params=params)
        return self.host_end

    def start(self, container: str) -> None:
        self._record("start", container)
        self.running = True

        def engine() -> None:
            for chunk in self.output:
                self.engine_end.sendall(chunk)
                time.sleep(0.01)
            if self.exit_code >= 0:
                self.running = False
                self.engine_end.close()

        threading.Thread(target=engine, daemon=True).start()

    def inspect_container(self, container: str) -> dict[str, Any]:
        self._record("inspect_container", container)
        if container in self.created:  # lookup by name
            kwargs = self.created[container]
            return {
                "Id": "cid-1",
                "Config": {"Labels": kwargs["labels"]},
                "State": {"Status": "created"},
            }
        return {
            "Id": container,
            "State": {
                "Running": self.running,
                "ExitCode": 137 if self.killed else self.exit_code,
                "OOMKilled": self.oom,
                "Error": "",
            },
        }

    def kill(self, container: str) -> None:
        self._record("kill", container)
        if not self.running:
            raise api_error(409, f"Container {container} is not running")
        self.running = False
        self.killed = True
        self.engine_end.close()

    def wait(self, container: str, timeout: float | None = None) -> dict[str, int]:
        self._record("wait", container, timeout=timeout)
        return {"StatusCode": self.exit_code}

    def remove_container(self, container: str, force: bool = False) -> None:
        self._record("remove_container", container, force=force)

    def containers(self, all: bool = False, filters: Any = None) -> list[dict[str, Any]]:
        self._record("containers", all=all, filters=filters)
        return self.listing

    def volumes(self, filters: Any = None) -> dict[str, Any]:  # copy mode's tool volumes
        self._record("volumes", filters=filters)
        return {"Volumes": []}


def backend_for(api: FakeAPI) -> DockerBackend:
    return DockerBackend(api, address="unix:///fake.sock", session_id="sess1", owner=OWNER)


def spec(**overrides: Any) -> SandboxSpec:
    values: dict[str, Any] = {
        "run_id": "run-1",
        "image": "sandbox-replay:latest",
        "command": ("python3", "-u", "-m", "runner.runtime"),
        "mounts": (Mount(Path("/host/dir with spaces/ü"), "/sandbox/run"),),
        "env": {"TZ": "UTC", "PYTHONHASHSEED": "0"},
        "limits": ResourceLimits(memory_mb=256, pids_limit=64, cpus=1.5, tmpfs_mb=32),
        "labels": {"io.sandbox-replay.job": "job-7", L.RUN: "spoofed"},
    }
    values.update(overrides)
    return SandboxSpec(**values)


def collect(box: Any, poll_s: float = 0.05, limit_s: float = 5.0) -> list[tuple[int, bytes]]:
    frames: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + limit_s
    for frame in box.frames(poll_s):
        if frame is not None:
            frames.append(frame)
        assert time.monotonic() < deadline, "frames() did not end"
    return frames


def test_create_flags_are_exactly_the_hardened_set() -> None:
    api = FakeAPI()
    with backend_for(api).sandbox(spec()) as box:
        box.wait(5)
    (name, args, kwargs) = api.calls[0]
    assert name == "create_container" and args == ()
    host_config = kwargs.pop("host_config")
    assert dict(host_config) == {
        "NetworkMode": "none",
        "ReadonlyRootfs": True,
        "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=32m,mode=1777"},
        "IpcMode": "private",
        "ShmSize": 32 * 1024 * 1024,
        "Ulimits": [{"Name": "msgqueue", "Soft": 0, "Hard": 0}],
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "PidsLimit": 64,
        "Memory": 256 * 1024 * 1024,
        "MemorySwap": 256 * 1024 * 1024,
        "NanoCpus": 1_500_000_000,
        "Init": False,  # PID 1 is the lifetime cap (coreutils timeout), see the command
        "LogConfig": {"Type": "none", "Config": {}},
        "Mounts": [
            {
                "Target": "/sandbox/run",
                "Source": "/host/dir with spaces/ü",
                "Type": "bind",
                "ReadOnly": True,
            }
        ],
    }
    assert kwargs == {
        "image": "sandbox-replay:latest",
        "command": [
            "/bin/sh",
            "-c",
            CAP_SCRIPT,
            "310",  # the default timeout 300 s + the 10 s grace
            "python3",
            "-u",
            "-m",
            "runner.runtime",
        ],
        "name": "sandbox-replay-run-1-sess1",
        "user": "10001:10001",
        "detach": False,  # with stdin_open: StdinOnce, so a closed attach is EOF inside
        "stdin_open": True,
        "tty": False,
        "environment": {"HOME": "/tmp", "TMPDIR": "/tmp", "TZ": "UTC", "PYTHONHASHSEED": "0"},
        "working_dir": "/tmp",
        "labels": {
            "io.sandbox-replay.job": "job-7",
            L.MANAGED: "1",
            L.SESSION: "sess1",
            L.RUN: "run-1",  # ours win over a caller's label of the same key
            L.OWNER: "h0st:4242:777",
            L.OWNER_HOST: "h0st",
            L.OWNER_PID: "4242",
            L.OWNER_START: "777",
            L.VERSION: __version__,
        },
        "use_config_proxy": False,
    }


def test_environment_carries_nothing_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "leak")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    api = FakeAPI()
    with backend_for(api).sandbox(spec(env={})):
        pass
    assert api.calls[0][2]["environment"] == {"HOME": "/tmp", "TMPDIR": "/tmp"}


def test_lifecycle_attaches_before_start_and_removes_after_reading_state() -> None:
    api = FakeAPI(output=[encode_frame(STDOUT, b"hello\n")])
    with backend_for(api).sandbox(spec()) as box:
        assert collect(box) == [(STDOUT, b"hello\n")]
        state = box.wait(5)
    assert state.exit_code == 0 and not state.killed_by_host
    names = api.names()
    assert names[:3] == ["create_container", "attach_socket", "start"]
    assert api.calls[1][2]["params"] == {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
    assert names[-1] == "remove_container" and api.calls[-1][2] == {"force": True}
    assert names.index("inspect_container") < names.index("remove_container")


def test_frames_are_demultiplexed_across_arbitrary_chunking() -> None:
    stream = (
        encode_frame(STDOUT, b'{"type":"hel')
        + encode_frame(STDERR, b"warn\n")
        + encode_frame(STDOUT, b'lo"}\n')
    )
    chunks = [stream[:3], stream[3:11], stream[11:20], stream[20:]]
    api = FakeAPI(output=chunks)
    with backend_for(api).sandbox(spec()) as box:
        frames = collect(box)
    assert frames == [(STDOUT, b'{"type":"hel'), (STDERR, b"warn\n"), (STDOUT, b'lo"}\n')]


def test_a_container_that_exits_at_once_never_hangs_frames() -> None:
    api = FakeAPI(output=[])
    started = time.monotonic()
    with backend_for(api).sandbox(spec()) as box:
        assert collect(box, poll_s=1.0) == []
    assert time.monotonic() - started < 2.0


def test_frames_yield_none_while_silent() -> None:
    api = FakeAPI(output=[], exit_code=-1)  # keeps running until killed
    with backend_for(api).sandbox(spec()) as box:
        it = box.frames(0.05)
        assert next(it) is None
        box.write(b'{"type":"shutdown"}\n')
    assert api.engine_end.fileno() == -1 or api.names().count("kill") == 1
    assert "remove_container" in api.names()


def test_stdin_reaches_the_engine_side() -> None:
    api = FakeAPI(output=[], exit_code=-1)
    with backend_for(api).sandbox(spec()) as box:
        box.write(b"ping\n")
        assert api.engine_end.recv(16) == b"ping\n"


def test_a_running_sandbox_is_killed_then_removed_when_the_body_raises() -> None:
    api = FakeAPI(output=[], exit_code=-1)
    with pytest.raises(RuntimeError, match="boom"), backend_for(api).sandbox(spec()):
        raise RuntimeError("boom")
    names = api.names()
    assert names.index("kill") < names.index("remove_container")


def test_start_failure_still_removes_and_is_an_infrastructure_error() -> None:
    api = FakeAPI()
    api.fail["start"] = [api_error(400, 'exec: "nope": executable file not found in $PATH')]
    with (
        pytest.raises(InfrastructureError, match="executable file not found") as info,
        backend_for(api).sandbox(spec()),
    ):
        pytest.fail("body must not run")
    assert not isinstance(info.value, TransientInfrastructureError)
    assert api.names().count("start") == 1  # permanent: not retried
    assert api.names()[-1] == "remove_container"


def test_wait_deadline_kills_on_the_server_side_and_records_it() -> None:
    api = FakeAPI(output=[], exit_code=-1)
    timeout = requests.exceptions.ConnectionError(
        urllib3.exceptions.ReadTimeoutError(None, None, "Read timed out.")  # type: ignore[arg-type]
    )
    api.fail["wait"] = [timeout]
    with backend_for(api).sandbox(spec()) as box:
        state = box.wait(0.2)
    assert state.killed_by_host and state.exit_code == 137 and not state.oom_killed
    names = api.names()
    assert names.index("kill") < names.index("remove_container")
    assert next(c[2]["timeout"] for c in api.calls if c[0] == "wait") == pytest.approx(0.2)


def test_oom_is_read_before_removal() -> None:
    api = FakeAPI(output=[], exit_code=137)
    api.oom = True
    with backend_for(api).sandbox(spec()) as box:
        state = box.wait(5)
    assert state.oom_killed and not state.killed_by_host


def test_transient_remove_errors_are_retried() -> None:
    api = FakeAPI()
    api.fail["remove_container"] = [api_error(503, "engine busy, try again")]
    with backend_for(api).sandbox(spec()):
        pass
    assert api.names().count("remove_container") == 2


def test_lost_create_answer_is_adopted_not_duplicated() -> None:
    api = FakeAPI()
    api.fail["create_container"] = [api_error(503, "try again")]
    with backend_for(api).sandbox(spec()):
        pass
    assert api.names().count("create_container") == 1
    assert ("inspect_container", ("sandbox-replay-run-1-sess1",), {}) in api.calls


def test_name_conflict_with_a_foreign_container_fails_and_touches_nothing() -> None:
    api = FakeAPI()
    api.created["sandbox-replay-run-1-sess1"] = {"labels": {L.RUN: "run-1", L.OWNER: "other:1:2"}}
    api.fail["create_container"] = [api_error(409, "Conflict. The container name is in use")]
    with (
        pytest.raises(InfrastructureError, match="already exists"),
        backend_for(api).sandbox(spec()),
    ):
        pass
    assert "remove_container" not in api.names() and "start" not in api.names()


def test_interrupt_during_create_still_removes_our_container() -> None:
    api = FakeAPI()
    api.fail["create_container"] = [KeyboardInterrupt()]
    with pytest.raises(KeyboardInterrupt), backend_for(api).sandbox(spec()):
        pytest.fail("body must not run")
    assert api.names()[-1] == "remove_container" and api.calls[-1][1] == ("cid-1",)


def test_frame_decoder_rejects_unknown_streams_and_buffers_partial_headers() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(STDERR, b"x" * 40000)
    assert decoder.feed(frame[:5]) == [] and decoder.pending == 5
    assert decoder.feed(frame[5:]) == [(STDERR, b"x" * 40000)] and decoder.pending == 0
    with pytest.raises(FrameError):
        FrameDecoder().feed(b"\x07\x00\x00\x00\x00\x00\x00\x01x")


def test_container_names_are_deterministic_and_distinct() -> None:
    assert L.container_name("run-1") == L.container_name("run-1") == "sandbox-replay-run-1"
    assert L.container_name("run-1", "s1") == "sandbox-replay-run-1-s1"
    assert L.container_name("run-1", "s1") != L.container_name("run-1", "s2")
    assert L.container_name("r", "a b").startswith("sandbox-replay-r-a-b-")
    weird_a, weird_b = L.container_name("a/b"), L.container_name("a:b")
    assert weird_a != weird_b
    for name in (weird_a, weird_b):
        assert name.startswith("sandbox-replay-a-b-")
    with pytest.raises(ValueError):
        L.container_name("")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_owner_liveness_is_conservative() -> None:
    me = L.current_owner()
    assert not L.owner_is_dead(me)
    assert not L.owner_is_dead(L.Owner(host="elsewhere", pid=dead_pid(), start="1"))
    assert L.owner_is_dead(L.Owner(host=me.host, pid=dead_pid(), start="1"))
    parent = os.getppid()
    reused = L.Owner(host=me.host, pid=parent, start="not-its-start-time")
    assert L.owner_is_dead(reused) == (L.process_start_time(parent) is not None)


def test_reaper_removes_only_containers_of_dead_owners_on_this_host() -> None:
    me = L.current_owner()
    gone = dead_pid()

    def summary(name: str, owner: L.Owner) -> dict[str, Any]:
        labels = L.sandbox_labels(session_id="s", run_id=name, owner=owner, version="0", extra={})
        return {"Id": f"id-{name}", "Names": [f"/{name}"], "Labels": labels}

    api = FakeAPI()
    api.listing = [
        summary("dead", L.Owner(me.host, gone, "1")),
        summary("live", me),
        summary("other-host", L.Owner("another-host", gone, "1")),
        {"Id": "id-nolabels", "Names": ["/nolabels"], "Labels": {L.MANAGED: "1"}},
    ]
    backend = DockerBackend(api, address="unix:///fake.sock", session_id="s", owner=me)
    assert [r.name for r in backend.reap()] == ["dead"]
    removed = [c[1][0] for c in api.calls if c[0] == "remove_container"]
    assert removed == ["id-dead"]
    assert api.calls[0] == (
        "containers",
        (),
        {"all": True, "filters": {"label": [f"{L.MANAGED}=1"]}},
    )
