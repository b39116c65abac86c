"""`runner.runtime.channel.close_in_child`: a fork closes the descriptors, a fork of it does not.

The forked worker's first files get the numbers of the runtime's closed channel copies; a fork
the worker makes (a tool's ``os.fork``, a ``multiprocessing`` fork pool) must keep them. The
attack in a real sandbox: tests/integration/test_attacks_worker.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="os.fork")

# In a fresh interpreter (the handler stays out of pytest's process): exit code 0 when the
# child lost the registered fd and the grandchild kept the child's own file at that number.
CHILD = r"""
import os, sys
from runner.runtime.channel import close_in_child

read_fd, write_fd = os.pipe()
close_in_child(read_fd)

def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False

pid = os.fork()
if pid == 0:
    if is_open(read_fd):
        os._exit(3)  # the child kept the registered descriptor
    os.dup2(write_fd, read_fd)  # the child's own file now has that number
    grandchild = os.fork()
    if grandchild == 0:
        os._exit(0 if is_open(read_fd) else 4)  # 4: a fork of the child closed it again
    os._exit(os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1]))
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
sys.exit(code if is_open(read_fd) else 5)  # 5: the registering process lost its own
"""


def test_a_fork_closes_them_and_a_fork_of_the_fork_keeps_its_own() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, timeout=30, check=False)
    assert proc.returncode == 0
