"""The event-stream reader shared by ``runner.sdk.record`` (in the agent's process) and the
host's MCP forwarder (runner/sdk/mcphttp.py `SseReader`): hostile servers' streams."""

from __future__ import annotations

import time

from runner.sdk.mcphttp import SseReader

CHUNK = 512
TOTAL = 2 << 20


def _feed_s(chunks: list[bytes]) -> float:
    reader = SseReader()
    started = time.perf_counter()
    for chunk in chunks:
        reader.feed(chunk)
    return time.perf_counter() - started


def test_a_long_line_in_small_chunks_costs_what_short_lines_do() -> None:
    """Review: each chunk was joined to the whole partial line and split again, so one long
    ``data:`` line trickled in small chunks cost the square of its length (16 MiB in 4 KiB
    chunks: 44 s of CPU in the agent's process, at load 4 on 2 cores). The same bytes in the
    same chunks, as complete lines, are the baseline measured in this run (a ratio, not a
    time: the old reader was ~1,000 times slower on the long line)."""
    long_line = [b"data: "] + [b"x" * CHUNK] * (TOTAL // CHUNK)
    short_lines = [b"data: "] + [b"x" * (CHUNK - 1) + b"\n"] * (TOTAL // CHUNK)
    baseline = min(_feed_s(short_lines) for _ in range(3))
    measured = min(_feed_s(long_line) for _ in range(3))
    assert measured < 10 * baseline + 0.05, (measured, baseline)


def test_events_split_anywhere_give_the_same_messages() -> None:
    stream = b'data: {"a":\ndata: 1}\n\n: ping\n\ndata: {"b": 2}\r\n\r\ndata: [3]\r\rdata: x\n\n'
    whole = SseReader().feed(stream)
    assert whole == [{"a": 1}, {"b": 2}, [3]]
    for size in (1, 2, 3, 7):
        reader = SseReader()
        found = []
        for at in range(0, len(stream), size):
            found += reader.feed(stream[at : at + size])
        assert found == whole, size
