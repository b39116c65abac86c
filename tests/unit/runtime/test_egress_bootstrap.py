"""The runtime's side of the witness bootstrap against a hostile or failing worker.

`runner.runtime.egress.seccomp.attach` reads the worker's lines over the socketpair; here the
"worker" is this test writing to the other end: every bad line ends the bootstrap with a
reason (coverage ``partial``), never an exception, never a listener.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

import pytest

from runner.runtime.egress import seccomp
from runner.runtime.egress.witness import serve


def _attach_with(lines: list[bytes], timeout_s: float = 2.0) -> tuple[int | None, str, bytes]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for line in lines:
            theirs.sendall(line)
        listener, reason = seccomp.attach(os.getpid(), ours.fileno(), timeout_s)
        theirs.setblocking(False)
        try:
            answer = theirs.recv(4096)
        except BlockingIOError:
            answer = b""
    return listener, reason, answer


def test_the_workers_own_refusal_is_the_reason() -> None:
    listener, reason, _ = _attach_with([b"E seccomp filter refused: Operation not permitted\n"])
    assert listener is None and reason == "seccomp filter refused: Operation not permitted"


@pytest.mark.parametrize(
    "line",
    [b"hello\n", b"P notanumber 00\n", b"P 1 zz\n", b"P 1 " + b"00" * 16 + b"\n", b"x" * 300],
)
def test_bad_probe_lines_are_refused(line: bytes) -> None:
    listener, reason, answer = _attach_with([line])
    assert listener is None and reason
    assert answer.startswith(b"N ") or not answer  # an over-long line gets no answer


def test_a_correct_probe_without_a_listener_is_refused() -> None:
    nonce = os.urandom(16)
    buf = ctypes.create_string_buffer(nonce, 16)
    probe = f"P {ctypes.addressof(buf)} {nonce.hex()}\n".encode()
    listener, reason, answer = _attach_with([probe, b"L\n"])  # "L" without SCM_RIGHTS
    assert listener is None and reason == "no listener from the worker"
    assert answer == b"G\nN no listener from the worker\n"


def test_a_silent_worker_times_out() -> None:
    listener, reason, _ = _attach_with([], timeout_s=0.2)
    assert listener is None and "timed out" in reason


def test_serve_names_the_reason_as_partial_coverage() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        threading.Thread(target=theirs.sendall, args=(b"E no seccomp here\n",)).start()
        witness, coverage = serve(os.getpid(), ours.fileno(), None, lambda attempt: None)
    assert witness is None
    assert coverage == {
        "type": "coverage",
        "partial": True,
        "reason": "egress witness unavailable: no seccomp here",
    }
