"""Demultiplexing of Docker's attach stream (no docker import; pure and unit-tested).

With ``tty`` off, the engine sends stdout and stderr on one connection as frames: an 8-byte
header (stream id: 1 stdout, 2 stderr; three zero bytes; big-endian uint32 payload length)
followed by the payload. Frames are up to 32 KiB and unrelated to line or UTF-8 boundaries, and
a socket read can end anywhere inside a header or a payload: `FrameDecoder` buffers across
reads. Lines are split later, per stream, by the channel above the backend.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">BxxxL")
HEADER_SIZE = HEADER.size  # 8


class FrameError(ValueError):
    """The attach stream does not follow the frame format (unknown stream id)."""


class FrameDecoder:
    """Incremental decoder: feed it raw socket bytes, get ``(stream, payload)`` frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add ``data`` and return every frame completed by it, in order.

        Empty payloads are dropped. Stream 0 (stdin echo, only with a tty) is reported as
        stdout.

        Raises:
            FrameError: a header with a stream id other than 0, 1 or 2.
        """
        self._buffer += data
        frames: list[tuple[int, bytes]] = []
        while len(self._buffer) >= HEADER_SIZE:
            stream, size = HEADER.unpack_from(self._buffer)
            if stream not in (0, 1, 2):
                raise FrameError(f"attach stream: unknown stream id {stream} in frame header")
            if len(self._buffer) < HEADER_SIZE + size:
                break
            payload = bytes(self._buffer[HEADER_SIZE : HEADER_SIZE + size])
            del self._buffer[: HEADER_SIZE + size]
            if payload:
                frames.append((stream or 1, payload))
        return frames

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a complete frame."""
        return len(self._buffer)


def encode_frame(stream: int, payload: bytes) -> bytes:
    """One frame as the engine would send it (used by tests and fakes)."""
    return HEADER.pack(stream, len(payload)) + payload
