"""The namespace sandbox's stdio without threads (runner/backends/namespace/pipeio.py).

A real child process at the other end of the pipes: the episode's thread writes, reads and
waits with ``select`` alone, and still neither deadlocks with a child that writes before it
reads, nor waits past a deadline, nor buffers without bound.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from runner.backends.base import STDERR, STDOUT
from runner.backends.namespace.pipeio import BUFFER_BYTES, PipeIO


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for process in made:
        process.kill()
        process.wait()


def _collect(io: PipeIO, poll_s: float = 0.05) -> dict[int, bytes]:
    out = {STDOUT: b"", STDERR: b""}
    for frame in io.frames(poll_s):
        if frame is not None:
            out[frame[0]] += frame[1]
    return out


def test_a_child_that_echoes_while_reading_never_deadlocks_a_large_write(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    """3 MiB in one write, echoed chunk by chunk: the child's writes fill its stdout pipe
    (64 KiB) long before the host's write ends; the write keeps reading meanwhile (what the
    reader threads did: up to the same bound, `BUFFER_BYTES`)."""
    child = _child(
        "import os\n"
        "while True:\n"
        "    b = os.read(0, 65536)\n"
        "    if not b: break\n"
        "    os.write(1, b)\n"
    )
    processes.append(child)
    assert child.stdin and child.stdout and child.stderr
    io = PipeIO(child.stdin, child.stdout, child.stderr)
    payload = b"x" * (BUFFER_BYTES * 3 // 4)
    io.write(payload, timeout_s=30)
    child.stdin.close()
    out = _collect(io)
    assert out[STDOUT] == payload


def test_a_child_that_never_reads_times_the_write_out_and_it_stays_unusable(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    child = _child("import time; time.sleep(60)")
    processes.append(child)
    assert child.stdin and child.stdout and child.stderr
    io = PipeIO(child.stdin, child.stdout, child.stderr)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="not taken within"):
        io.write(b"y" * (4 << 20), timeout_s=0.5)
    assert time.monotonic() - started < 10
    with pytest.raises(TimeoutError, match="unusable"):
        io.write(b"z", timeout_s=5)


def test_output_of_both_streams_arrives_and_ends_with_the_child(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    child = _child("import os; os.write(1, b'out'); os.write(2, b'err')")
    processes.append(child)
    assert child.stdin and child.stdout and child.stderr
    io = PipeIO(child.stdin, child.stdout, child.stderr)
    assert io.wait_output(30)
    assert _collect(io) == {STDOUT: b"out", STDERR: b"err"}
    assert not io.stdout_open
    with pytest.raises(BrokenPipeError):  # the child is gone: its stdin is closed
        child.wait(30)
        io.write(b"late\n", timeout_s=5)


def test_a_flood_is_buffered_only_up_to_the_bound_while_a_write_waits(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    """A child that floods stdout and never reads: a waiting write buffers at most about
    `BUFFER_BYTES` of it, then stops reading (the child blocks on its own writes)."""
    child = _child("import os\nwhile True:\n    os.write(1, b'f' * 65536)\n")
    processes.append(child)
    assert child.stdin and child.stdout and child.stderr
    io = PipeIO(child.stdin, child.stdout, child.stderr)
    with pytest.raises(TimeoutError):
        io.write(b"w" * (4 << 20), timeout_s=1.0)
    assert BUFFER_BYTES <= io._buffered < BUFFER_BYTES + (64 << 10)
