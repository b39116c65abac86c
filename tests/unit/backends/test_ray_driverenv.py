"""The Ray driver keeps its provider keys out of every readable process environment
(runner/backends/ray/driverenv.py): measured on real processes through
/proc/PID/environ, as the review's attacker read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.backends.ray import driverenv
from runner.errors import InfrastructureError
from tests.support.paths import REPO

SECRET = "sk-test-N01-driver-key-0123456789abcdef"
NOBODY = 65534

# The system's Python for processes of uid 65534 (this venv's lives under root's home folder).
SYSTEM_PYTHON = "/usr/bin/python3"
# A driver: seals itself when asked, says so, then waits to be read. The module is loaded from
# its file (standard library and runner.errors only), not through its package (which imports
# ray), so that the system's Python can run it.
DRIVER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("driverenv", sys.argv[2])
driverenv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(driverenv)
if sys.argv[1] == "seal":
    print(",".join(driverenv.seal_driver()), flush=True)
else:
    print("-", flush=True)
time.sleep(60)
"""


def _start(mode: str, *, as_nobody: bool = False) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "OPENAI_API_KEY": SECRET,
        "SANDBOX_REPLAY_ANTHROPIC_API_KEY": SECRET + "-2",
        "XOPENAI_API_KEY": "kept",
    }
    extra = {"user": NOBODY, "group": NOBODY} if as_nobody else {}
    python = SYSTEM_PYTHON if as_nobody else sys.executable
    proc = subprocess.Popen(
        [python, "-c", DRIVER, mode, str(REPO / "runner/backends/ray/driverenv.py")],
        env=env,
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
        **extra,  # type: ignore[call-overload]
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def _read_environ(pid: int, *, as_nobody: bool = False) -> bytes | str:
    """/proc/PID/environ as root (this test) or as uid 65534 (another process of that uid)."""
    if not as_nobody:
        return Path(f"/proc/{pid}/environ").read_bytes()
    read = f"import sys; sys.stdout.buffer.write(open('/proc/{pid}/environ', 'rb').read())"
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", read],
        capture_output=True,
        user=NOBODY,
        group=NOBODY,
        cwd="/",
        timeout=30,
    )  # fmt: skip
    return out.stdout if out.returncode == 0 else "refused: " + out.stderr.decode()[-200:]


def test_block_entries_are_wiped_whole_and_in_place() -> None:
    block = b"A=1\0OPENAI_API_KEY=sk-x\0XOPENAI_API_KEY=y\0OPENAI_API_KEY_B=z\0B=2\0"
    new, found = driverenv.wipe_from_block(block, ("OPENAI_API_KEY",))
    assert found == ["OPENAI_API_KEY"] and len(new) == len(block)
    assert new.split(b"\0")[0] == b"A=1" and b"sk-x" not in new
    assert b"XOPENAI_API_KEY=y" in new and b"OPENAI_API_KEY_B=z" in new


def test_stat_bounds_survive_a_command_name_with_parentheses() -> None:
    fields = " ".join(str(n) for n in range(3, 53))  # fields 3..52 hold their own number
    start, end = driverenv.environment_block_bounds(f"42 (a) b (c)) {fields}")
    assert (start, end) == (50, 51)


def test_the_key_leaves_the_environment_block_that_proc_shows() -> None:
    control = _start("no-seal")
    sealed = _start("seal")
    try:
        assert SECRET.encode() in _read_environ(control.pid)  # the review's read, old code
        block = _read_environ(sealed.pid)
        assert isinstance(block, bytes)
        assert SECRET.encode() not in block
        assert b"XOPENAI_API_KEY=kept" in block and b"PYTHONPATH=" in block
    finally:
        for proc in (control, sealed):
            proc.kill()
            proc.wait()


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="runs the two processes as uid 65534 with the system's Python",
)
def test_a_process_of_the_same_user_cannot_read_the_sealed_driver() -> None:
    control = _start("no-seal", as_nobody=True)
    sealed = _start("seal", as_nobody=True)
    try:
        assert SECRET.encode() in _read_environ(control.pid, as_nobody=True)  # old code
        answer = _read_environ(sealed.pid, as_nobody=True)
        assert isinstance(answer, str) and "Permission" in answer, answer
    finally:
        for proc in (control, sealed):
            proc.kill()
            proc.wait()


def test_a_started_child_inherits_no_key() -> None:
    script = (
        "import os, subprocess, sys\n"
        "from runner.backends.ray.driverenv import seal_driver\n"
        "seal_driver()\n"
        "sys.stdout.write(subprocess.run(['env'], capture_output=True, text=True).stdout)\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "OPENAI_API_KEY": SECRET}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout and "PYTHONPATH=" in out.stdout


def test_off_linux_a_driver_holding_a_key_refuses() -> None:
    env = {"OPENAI_API_KEY": SECRET}
    with pytest.raises(InfrastructureError, match="OPENAI_API_KEY"):
        driverenv.seal_driver(env, platform="darwin")
    assert driverenv.seal_driver({}, platform="darwin") == []


def test_a_mapping_of_the_caller_loses_every_provider_variable() -> None:
    env = {name: "v" for name in driverenv.PROVIDER_VARIABLES} | {"HOME": "/root"}
    removed = driverenv.seal_driver(env, platform="linux")
    assert sorted(removed) == sorted(driverenv.PROVIDER_VARIABLES) and env == {"HOME": "/root"}
