"""As PID 1 the reaper blocks in ``waitpid`` instead of polling (idle CPU).

A pooled sandbox waits for its run with the worker as its only child; the reaper woke ten
times a second to poll ``waitpid(WNOHANG)`` (measured: ~2.7 ms of CPU per second per waiting
sandbox). In blocking mode (the default when the process is PID 1) it sleeps in
``waitpid(-1, 0)`` until a child exits. The check runs in a child interpreter: a blocking
reaper in the test process would take the statuses of pytest's own children.
"""

from __future__ import annotations

import os
import subprocess
import sys

from runner.runtime import pid1
from tests.support.paths import REPO

SCRIPT = r"""
import os, sys, time
from runner.runtime import pid1

polls = []
real_waitpid = os.waitpid
def counting(pid, options):
    if options & os.WNOHANG:
        polls.append(1)
    return real_waitpid(pid, options)
os.waitpid = counting

reaper = pid1.Reaper(blocking=True)
child = os.posix_spawn("/bin/sh", ["sh", "-c", "sleep 1; exit 4"], os.environ)
reaper.watch(child)
orphan = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 0"], os.environ)
reaper.start()
code = reaper.wait(child, 20)
deadline = time.monotonic() + 10
while reaper.reaped < 1 and time.monotonic() < deadline:
    time.sleep(0.05)
print(code, reaper.reaped, len(polls))
"""


def test_a_blocking_reaper_keeps_statuses_and_does_not_poll_while_children_live() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    code, reaped, polls = (int(v) for v in proc.stdout.split())
    assert (code, reaped) == (4, 1)
    # polling would have made ~10 WNOHANG calls during the child's second; blocking makes
    # none while a child lives (a few may come after the last child is gone)
    assert polls <= 3, polls


def test_the_reaper_blocks_only_as_pid_1_by_default() -> None:
    assert os.getpid() != 1
    assert pid1.Reaper().blocking is False
    assert pid1.Reaper(blocking=True).blocking is True
