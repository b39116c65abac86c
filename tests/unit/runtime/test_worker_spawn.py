"""`runner.runtime.worker.spawn.start` on its own: a fresh worker without the egress witness.

The forked worker and the witnessed one are started by every runtime test
(test_worker_fork.py runs the same episode forked and exec'd); this pins what `start` hands the
client: the pid and ``Popen``, the runtime's pipe ends, no bootstrap socket and the partial
coverage saying why.
"""

from __future__ import annotations

import os

import pytest

from runner.runtime.worker import fork, spawn
from runner.wire.env import ENV_WITNESS


def test_a_fresh_worker_without_the_witness_says_partial_and_ends_with_its_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_WITNESS, "off")
    monkeypatch.setenv(fork.ENV_WORKER_START, "exec")
    started = spawn.start()
    assert started.process is not None and started.process.pid == started.pid
    try:
        assert started.bootstrap is None
        assert started.coverage is not None and started.coverage["partial"] is True
        assert "egress witness off" in started.coverage["reason"]
        assert os.get_inheritable(started.read_fd) is False
        assert os.get_inheritable(started.write_fd) is False
    finally:
        os.close(started.write_fd)  # the runtime goes away: the worker ends
        code = started.process.wait(timeout=60)
        with os.fdopen(started.read_fd, "rb") as from_worker:
            rest = from_worker.read()  # its end is closed: end of file, not a hang
    assert code == 0 and rest == b""
