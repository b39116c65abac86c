"""The runtime as the sandbox's init: not dumpable, the hard cap, the reaper (runner.runtime.pid1).

The kernel's rules for a PID namespace's init (signals dropped, /proc owned by root, no ptrace)
are proven in real containers by tests/integration/test_attacks_pid1.py; these pin the parts
that do not need one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from runner.runtime import pid1


def test_make_undumpable_makes_the_process_not_dumpable() -> None:
    code = (
        "import ctypes\n"
        "from runner.runtime import pid1\n"
        "before = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)\n"
        "problem = pid1.make_undumpable()\n"
        "print(before, problem, ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "None", "0"], out


def test_the_cap_kills_and_exits_137_at_its_time() -> None:
    exits: list[int] = []
    timer = pid1.arm_cap(0.2, exit=exits.append, kill=lambda *_: None)
    timer.thread.join(5)
    assert exits == [pid1.EXIT_CAP] == [137]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "x"])
def test_a_bad_cap_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        pid1.cap_of({pid1.ENV_HARD_CAP: value})


def test_no_cap_variable_means_no_cap() -> None:
    assert pid1.cap_of({}) is None
    assert pid1.cap_of({pid1.ENV_HARD_CAP: "12"}) == 12.0


def test_the_reaper_keeps_a_watched_status_and_reaps_the_rest() -> None:
    reaper = pid1.Reaper()
    watched = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 3"], os.environ)
    reaper.watch(watched)
    others = [os.posix_spawn("/bin/sh", ["sh", "-c", "exit 0"], os.environ) for _ in range(3)]
    reaper.start()
    try:
        assert reaper.wait(watched, 10) == 3
        deadline = time.monotonic() + 10
        while reaper.reaped < len(others) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        reaper.stop()
    assert reaper.reaped == len(others)
    for pid in others:  # reaped: no zombie left
        assert not os.path.exists(f"/proc/{pid}")


def test_wait_on_a_live_pid_times_out() -> None:
    reaper = pid1.Reaper()
    proc = os.posix_spawn("/bin/sleep", ["sleep", "5"], os.environ)
    reaper.watch(proc)
    reaper.start()
    try:
        assert reaper.wait(proc, 0.3) is None
        os.kill(proc, 9)
        assert reaper.wait(proc, 10) == -9
    finally:
        reaper.stop()


def test_rearming_moves_the_caps_end_from_now() -> None:
    # a pooled sandbox: its idle cap until ``start``, then the run's cap from the assignment
    exits: list[int] = []
    timer = pid1.arm_cap(0.3, exit=exits.append, kill=lambda *_: None)
    timer.rearm(1.5)
    time.sleep(0.8)
    assert exits == [] and timer.seconds == 1.5
    timer.thread.join(5)
    assert exits == [pid1.EXIT_CAP]
