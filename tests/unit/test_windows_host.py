"""The host side on a simulated Windows: no POSIX-only call where Windows goes.

No Windows here: each test takes away what Windows lacks (``os.killpg``, ``os.fork``,
``os.WNOHANG``, ``os.getuid``, ``fcntl``, ``resource``, ``pwd``, ``grp``, ``pass_fds``) or gives
what only it has (a ``STARTUPINFO`` handle list, ``npipe`` addresses), and checks that the code
takes its Windows branch. Line endings (CRLF checkouts) are tested in
tests/unit/domain/test_line_endings.py; the project's CI runs the unit tests on
``windows-latest`` too (.github/workflows/ci.yml).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import PureWindowsPath
from typing import Any

import pytest

from runner.backends import processgroup
from runner.backends.docker.engine import _socket_path, discover_engine
from runner.runtime import pid1
from runner.runtime.worker import spawn as worker_spawn
from tests.support.paths import REPO


class FakeProcess:
    def __init__(self, pid: int = 4321) -> None:
        self.pid = pid
        self.killed = False

    def poll(self) -> int | None:
        return 1 if self.killed else None

    def kill(self) -> None:
        self.killed = True


def test_record_starts_and_kills_its_runtime_without_killpg(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "killpg")
    kwargs = processgroup.group_kwargs()
    assert "start_new_session" not in kwargs
    assert kwargs["creationflags"] == 0x00000200  # CREATE_NEW_PROCESS_GROUP
    ran: list[list[str]] = []
    monkeypatch.setattr(processgroup.subprocess, "run", lambda argv, **kw: ran.append(argv))
    process = FakeProcess()
    processgroup.kill_group(process)  # type: ignore[arg-type]
    assert ran == [["taskkill", "/F", "/T", "/PID", "4321"]]  # the whole tree
    assert process.killed  # and the child itself when taskkill left it


def test_on_posix_the_group_is_a_session_killed_with_killpg(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not hasattr(os, "killpg"):
        pytest.skip("a POSIX host's branch")
    assert processgroup.group_kwargs() == {"start_new_session": True}
    child = subprocess.Popen(  # a child and its grandchild, both in the new session
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.Popen([sys.executable,"
            " '-c', 'import time; time.sleep(60)']); time.sleep(60)",
        ],
        **processgroup.group_kwargs(),
    )
    processgroup.kill_group(child)  # type: ignore[arg-type]
    assert child.wait(timeout=30) < 0


class StartupInfo:
    def __init__(self) -> None:
        self.lpAttributeList: dict[str, Any] = {}


def test_the_worker_gets_its_pipes_as_inherited_handles_not_pass_fds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inheritable: list[tuple[int, bool]] = []
    monkeypatch.setattr(subprocess, "STARTUPINFO", StartupInfo, raising=False)
    monkeypatch.setattr(
        os, "set_handle_inheritable", lambda h, on: inheritable.append((h, on)), raising=False
    )
    tail, options = worker_spawn.spawn_options(
        7, 8, None, 9, handles=True, get_handle=lambda fd: 1000 + fd
    )
    assert tail == ["--handles", "1007", "1008"]
    assert "pass_fds" not in options and "start_new_session" not in options
    assert options["startupinfo"].lpAttributeList == {"handle_list": [1007, 1008]}
    assert options["creationflags"] == 0x00000200
    assert inheritable == [(1007, True), (1008, True)]
    # POSIX: the fds themselves, in a session of its own
    tail, options = worker_spawn.spawn_options(7, 8, 9, 9, handles=False)
    assert tail == ["7", "8", "9"]
    assert options == {"pass_fds": (7, 8, 9), "start_new_session": True}


def test_the_reaper_polls_the_worker_where_waitpid_minus_one_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "WNOHANG")
    reaper = pid1.Reaper(blocking=False)
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    reaper.watch(child.pid, child)
    deadline = time.monotonic() + 30
    while reaper.reap_once() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reaper.wait(child.pid, timeout_s=1) == 3


def test_the_docker_desktop_pipe_is_looked_for_as_a_windows_path() -> None:
    assert PureWindowsPath(_socket_path("npipe:////./pipe/docker_engine") or "") == PureWindowsPath(
        r"\\.\pipe\docker_engine"
    )
    seen: list[str] = []
    engine = discover_engine(
        environ={},
        platform="win32",
        exists=lambda p: seen.append(p) or True,  # type: ignore[func-returns-value]
    )
    assert engine.address == "npipe:////./pipe/docker_engine"
    assert seen == [r"\\.\pipe\docker_engine"]


# A host without the POSIX-only modules and calls: the CLI's quick commands still work, and the
# modules `run`, `submit`, `reproduce` and `record` load import cleanly.
WINDOWS_LIKE = r"""
import os, sys
import subprocess  # the standard library's own POSIX module reads os.WNOHANG at import
for name in ("fcntl", "resource", "pwd", "grp", "termios"):
    sys.modules[name] = None  # import fails as on Windows
for name in ("killpg", "fork", "setsid", "getuid", "geteuid", "getgid", "WNOHANG", "getpgid"):
    if hasattr(os, name):
        delattr(os, name)
import importlib
for module in ("runner.cli.commands.run", "runner.cli.commands.submit",
               "runner.cli.commands.reproduce", "runner.cli.commands.record",
               "runner.cli.commands.doctor", "runner.runs.record", "runner.episode.driver",
               "runner.backends.unsandboxed", "runner.backends.docker.backend",
               "runner.backends.docker.hostfiles", "runner.backends.capacity",
               "runner.submit.job", "runner.reproduce.reproducer", "runner.runtime.main",
               "runner.runtime.worker.client", "runner.runtime.worker.spawn",
               "runner.runtime.worker.process"):
    importlib.import_module(module)
from runner.backends.base import sandbox_user
assert sandbox_user() == "10001:10001", sandbox_user()
from runner.cli.entry import main
sys.argv = ["sandbox-replay", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(("workflow", "code"), [("v1.yaml", 0), ("v3.yaml", 3)])
def test_check_runs_without_posix_calls(workflow: str, code: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", WINDOWS_LIKE, "check", workflow],
        cwd=REPO / "examples" / "helpdesk",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    if code == 3:
        assert "ticket.close" in proc.stdout


@pytest.mark.parametrize(
    ("system", "names"), [("Darwin", "colima start"), ("MINGW64_NT", "Podman")]
)
def test_make_s_engine_step_says_what_to_start_off_linux(
    tmp_path: Any, system: str, names: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, script in (("uname", f"echo {system}"), ("docker", "exit 1")):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", str(REPO / ".ci" / "ensure-engine.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 6, proc.stderr
    assert "Docker Desktop" in proc.stderr and names in proc.stderr
    assert "docker context use" in proc.stderr
    assert "root" not in proc.stderr and "apt" not in proc.stderr
