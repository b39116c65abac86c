"""DockerSandbox's attach side over a local socket pair (no engine): backpressure and timed writes.

The far end of the pair plays the engine: it sends attach frames and reads (or does not read)
what the host writes to the sandbox's stdin.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from runner.backends.docker.frames import encode_frame
from runner.backends.docker.sandbox import QUEUE_MAX_BYTES, DockerSandbox
from runner.backends.timed_write import TimedWriter
from runner.errors import InfrastructureError

FRAME = 32 * 1024


@pytest.fixture
def pair() -> Iterator[tuple[DockerSandbox, socket.socket]]:
    host, engine = socket.socketpair()
    box = DockerSandbox(None, "cid", "sr-test", "run-1", host)  # type: ignore[arg-type]
    box.start_reader()
    yield box, engine
    box.close()
    engine.close()


def test_a_host_that_does_not_consume_stops_the_reader_and_blocks_the_sender(
    pair: tuple[DockerSandbox, socket.socket],
) -> None:
    box, engine = pair
    total = 40 * 1024 * 1024
    sent = threading.Event()

    def flood() -> None:
        for _ in range(total // FRAME):
            engine.sendall(encode_frame(1, b"j" * FRAME))
        sent.set()

    threading.Thread(target=flood, daemon=True).start()
    time.sleep(1.0)  # the host consumes nothing meanwhile
    assert not sent.is_set(), "the sender was never held back"
    assert box._queued_bytes <= QUEUE_MAX_BYTES + FRAME
    received = 0
    give_up = time.monotonic() + 60
    for frame in box.frames(poll_s=0.05):
        if frame is not None:
            received += len(frame[1])
        if received >= total or time.monotonic() > give_up:
            break
    assert received == total and sent.wait(5)  # nothing lost: held back, not dropped
    assert box._queued_bytes == 0


def test_close_releases_a_reader_waiting_for_room(
    pair: tuple[DockerSandbox, socket.socket],
) -> None:
    box, engine = pair
    engine.setblocking(False)
    try:
        while True:
            engine.send(encode_frame(2, b"e" * FRAME))
    except BlockingIOError:
        pass
    time.sleep(0.3)
    assert box._reader.is_alive()
    box.close()
    assert not box._reader.is_alive()


def test_a_write_the_sandbox_never_reads_gives_up_at_its_timeout(
    pair: tuple[DockerSandbox, socket.socket],
) -> None:
    box, _engine = pair
    box.write(b"small\n", timeout_s=1.0)  # a reader with room takes it at once
    started = time.monotonic()
    with pytest.raises(InfrastructureError, match="stdin of sr-test") as info:
        box.write(b"r" * (16 * 1024 * 1024), timeout_s=0.5)
    assert 0.4 < time.monotonic() - started < 3.0
    assert isinstance(info.value.__cause__, TimeoutError)
    started = time.monotonic()
    with pytest.raises(InfrastructureError) as info:  # the stream is unusable from now on
        box.write(b"more\n", timeout_s=5.0)
    assert time.monotonic() - started < 0.5 and isinstance(info.value.__cause__, TimeoutError)


def test_a_broken_stream_is_not_a_timeout(pair: tuple[DockerSandbox, socket.socket]) -> None:
    box, engine = pair
    engine.close()
    with pytest.raises(InfrastructureError) as info:
        for _ in range(100):  # the first writes may still land in the buffer
            box.write(b"x" * 65536, timeout_s=5.0)
    assert not isinstance(info.value.__cause__, TimeoutError)


def test_timed_writer_hands_back_the_send_error_and_keeps_order() -> None:
    seen: list[bytes] = []

    def send(data: bytes) -> None:
        if data == b"bad":
            raise ValueError("closed")
        seen.append(data)

    writer = TimedWriter(send, "t")
    writer.write(b"a", 1.0)
    writer.write(b"b")
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"bad", 1.0)
    writer.write(b"c", 1.0)  # an error is not a timeout: the writer stays usable
    assert seen == [b"a", b"b", b"c"]


class _Engine:
    """The engine's API as a sandbox's ``wait`` uses it: records every call."""

    def __init__(self, running_at_first: bool) -> None:
        self.calls: list[str] = []
        self.running = running_at_first

    def inspect_container(self, container_id: str) -> dict[str, object]:
        self.calls.append("inspect")
        state = {"Running": self.running, "ExitCode": 0 if not self.running else None}
        return {"State": {**state, "OOMKilled": False, "StartedAt": "", "FinishedAt": ""}}

    def wait(self, container_id: str, timeout: float) -> dict[str, int]:
        self.calls.append("wait")
        self.running = False
        return {"StatusCode": 0}


@pytest.mark.parametrize(
    ("running_at_eof", "calls"),
    [(False, ["inspect"]), (True, ["inspect", "wait", "inspect"])],
)
def test_after_its_output_ended_one_inspect_reads_the_exit_unless_it_still_runs(
    running_at_eof: bool, calls: list[str]
) -> None:
    """The engine's ``wait`` round trip is skipped when the output has ended and the
    engine already reports the container exited (the usual case); otherwise it waits."""
    host, engine_end = socket.socketpair()
    api = _Engine(running_at_eof)
    box = DockerSandbox(api, "cid", "sr-test", "run-1", host)  # type: ignore[arg-type]
    box.start_reader()
    engine_end.sendall(encode_frame(1, b"bye\n"))
    engine_end.close()
    assert [f for f in box.frames(poll_s=0.05) if f is not None] == [(1, b"bye\n")]
    state = box.wait(5)
    box.close()
    assert state.exit_code == 0 and api.calls == calls


def test_a_write_on_a_plain_socket_starts_no_thread(
    pair: tuple[DockerSandbox, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attach socket is written from the caller's thread (`SocketWriter`), not
    by a helper thread per message (`TimedWriter`, still used for TLS and named pipes)."""
    box, engine = pair
    started: list[str] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    box.write(b'{"type":"start"}\n', timeout_s=1.0)
    assert engine.recv(64) == b'{"type":"start"}\n'
    assert started == []
