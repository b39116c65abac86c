"""Demultiplexed sandbox output (byte frames) → protocol messages, with bounded memory.

A backend yields ``(stream, payload)`` frames whose boundaries have nothing to do with lines or
UTF-8 characters (DOCKER-NOTES.md: attach frames up to 32 KiB). `Channel.feed` reassembles
stdout into protocol lines, decodes each whole line (so a character split across frames is
intact) and returns `ChannelEvent`s; stderr never mixes with the protocol: it is kept apart as
the last `STDERR_TAIL_LINES` lines (for a ``crashed`` episode) and a byte count.

Invariants (the memory bound: 50 MB of output keeps the host's RSS under 200 MB):
- at most one partial stdout line is buffered, and never more than ``max_message_bytes``: a
  longer line switches to *discarding*, its bytes are counted as they stream and dropped, and
  at its newline a ``message_too_large`` event reports its size; the next line parses normally;
- stderr keeps at most ``STDERR_TAIL_LINES`` lines of at most ``STDERR_LINE_BYTES`` bytes each;
- stdout beyond ``max_total_bytes`` is not parsed: one ``truncated`` event says so and
  `Channel.dropped_bytes` counts the rest (truncation is recorded, never silent);
- a line that is not a JSON object with a known ``type`` is an ``invalid`` event, never a crash:
  lines are decoded by the one strict decoder (`runner.trace.strictjson` through
  `runner.wire.protocol.decode`), so nesting deeper than ``MAX_DEPTH``, NaN and infinities,
  duplicate keys and non-UTF-8 are ``invalid`` like any other decode failure.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.backends.base import STDOUT
from runner.wire.protocol import MAX_MESSAGE_BYTES, MESSAGE_TYPES_FROM_RUNTIME, decode

STDERR_TAIL_LINES = 100
STDERR_LINE_BYTES = 4096
# Total protocol bytes parsed per episode; beyond this the host stops reading the protocol.
MAX_TOTAL_BYTES = 256 * 1024 * 1024

EventKind = Literal["message", "message_too_large", "invalid", "truncated", "incomplete"]


@dataclass(frozen=True)
class ChannelEvent:
    """One thing the channel found on stdout.

    Attributes:
        kind: ``message`` (a protocol message), ``message_too_large`` (a line over the cap,
            discarded), ``invalid`` (a line that is not a protocol message), ``truncated`` (the
            total-output cap was reached; nothing after it is parsed), ``incomplete`` (output
            ended in the middle of a line).
        message: the decoded message (``kind == "message"``), else None.
        size: the line's length in bytes without its newline.
        line: 1-based number of the stdout line.
        detail: for ``invalid``, why, with the first bytes of the line.

    """

    kind: EventKind
    message: dict[str, Any] | None = None
    size: int = 0
    line: int = 0
    detail: str = ""


@dataclass
class _StderrTail:
    max_lines: int
    max_line_bytes: int
    lines: deque[str] = field(init=False)
    partial: bytearray = field(default_factory=bytearray)
    partial_cut: bool = False
    total_bytes: int = 0

    def __post_init__(self) -> None:
        self.lines = deque(maxlen=self.max_lines)

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        start = 0
        while True:
            newline = data.find(b"\n", start)
            piece = data[start:] if newline < 0 else data[start:newline]
            room = self.max_line_bytes - len(self.partial)
            if len(piece) > room:
                self.partial += piece[: max(room, 0)]
                self.partial_cut = True
            else:
                self.partial += piece
            if newline < 0:
                return
            self._finish()
            start = newline + 1

    def _finish(self) -> None:
        text = bytes(self.partial).decode("utf-8", "replace").rstrip("\r")
        if self.partial_cut:
            text += " [line cut]"
        self.lines.append(text)
        self.partial.clear()
        self.partial_cut = False

    def close(self) -> None:
        if self.partial or self.partial_cut:
            self._finish()


class Channel:
    """Incremental decoder of one sandbox's output.

    Args:
        max_message_bytes: per-line cap on stdout (without the newline).
        max_total_bytes: stdout bytes parsed in all; the rest is counted and dropped.
        stderr_lines: stderr lines kept (the tail).

    """

    def __init__(
        self,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        stderr_lines: int = STDERR_TAIL_LINES,
    ) -> None:
        self.max_message_bytes = max_message_bytes
        self.max_total_bytes = max_total_bytes
        self._pending = bytearray()
        self._discarding = 0  # bytes of the current oversized line seen so far (0: not)
        self._line = 0
        self._stderr = _StderrTail(stderr_lines, STDERR_LINE_BYTES)
        self.stdout_bytes = 0
        self.dropped_bytes = 0
        self.too_large: list[int] = []
        self.invalid = 0
        self._truncated = False

    @property
    def truncated(self) -> bool:
        """True once stdout passed ``max_total_bytes``."""
        return self._truncated

    @property
    def stderr_bytes(self) -> int:
        """Bytes received on stderr."""
        return self._stderr.total_bytes

    def stderr_tail(self) -> list[str]:
        """Return the last stderr lines (decoded with replacement; cut lines are marked)."""
        lines = list(self._stderr.lines)
        if self._stderr.partial:
            tail = bytes(self._stderr.partial).decode("utf-8", "replace")
            lines = [*lines, tail][-self._stderr.max_lines :]
        return lines

    def feed(self, stream: int, data: bytes) -> list[ChannelEvent]:
        """Take one frame; return the events it completed, in order.

        Args:
            stream: ``STDOUT`` or ``STDERR``; anything but stdout counts as stderr, never protocol.
            data: the frame's payload.

        """
        if stream != STDOUT:
            self._stderr.feed(data)
            return []
        if not data:
            return []
        events: list[ChannelEvent] = []
        if self._truncated:
            self.dropped_bytes += len(data)
            return events
        room = self.max_total_bytes - self.stdout_bytes
        if len(data) > room:
            self.dropped_bytes += len(data) - room
            data = data[:room]
            self._truncated = True
        self.stdout_bytes += len(data)
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            self._take(data, start, end)
            if newline < 0:
                break
            events.append(self._end_line())
            start = newline + 1
        if self._truncated:
            events.append(
                ChannelEvent(
                    "truncated",
                    size=self.stdout_bytes,
                    line=self._line + 1,
                    detail=f"stdout passed {self.max_total_bytes} bytes",
                )
            )
        return events

    def close(self) -> list[ChannelEvent]:
        """End of output: report a last line without its newline as ``incomplete``."""
        self._stderr.close()
        events: list[ChannelEvent] = []
        if (self._pending or self._discarding) and not self._truncated:
            size = self._discarding or len(self._pending)
            self._line += 1
            events.append(
                ChannelEvent(
                    "incomplete", size=size, line=self._line, detail="output ended inside a line"
                )
            )
        self._pending = bytearray()
        self._discarding = 0
        return events

    def _take(self, data: bytes, start: int, end: int) -> None:
        """Append ``data[start:end]`` (no newline inside) to the current line, or count it."""
        length = end - start
        if self._discarding:
            self._discarding += length
            return
        if len(self._pending) + length > self.max_message_bytes:
            # Switch to discarding: forget what was buffered, keep only the count.
            self._discarding = len(self._pending) + length
            self._pending = bytearray()
            return
        self._pending += data[start:end]

    def _end_line(self) -> ChannelEvent:
        self._line += 1
        if self._discarding:
            size, self._discarding = self._discarding, 0
            self.too_large.append(size)
            return ChannelEvent("message_too_large", size=size, line=self._line)
        raw = bytes(self._pending)
        self._pending = bytearray()
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            message = decode(raw)
        except ValueError as exc:  # every decode failure (runner.trace.strictjson) is an event
            self.invalid += 1
            preview = raw[:80].decode("utf-8", "replace")
            return ChannelEvent(
                "invalid", size=len(raw), line=self._line, detail=f"{exc}: {preview!r}"[:300]
            )
        if message["type"] not in MESSAGE_TYPES_FROM_RUNTIME:
            self.invalid += 1
            return ChannelEvent(
                "invalid",
                size=len(raw),
                line=self._line,
                detail=f"unknown message type {message['type'][:40]!r}",
            )
        return ChannelEvent("message", message=message, size=len(raw), line=self._line)
