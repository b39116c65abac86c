"""The channel: frames → protocol messages, stderr apart, caps, bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from runner.backends.base import STDERR, STDOUT
from runner.episode.channel import Channel, ChannelEvent
from runner.wire.protocol import encode


def _messages(events: list[ChannelEvent]) -> list[dict]:
    return [e.message for e in events if e.kind == "message" and e.message is not None]


def _stream() -> bytes:
    return (
        encode({"type": "hello", "protocol": 1, "python": "3.11", "pid": 7})
        + encode({"type": "call", "record": {"body": "naïve 日本語 🎉🎉 Ω"}})
        + encode({"type": "episode", "status": "succeeded", "output": "é" * 3})
    )


def test_every_split_point_including_inside_utf8() -> None:
    data = _stream()
    # the non-ASCII text must really be there as raw UTF-8 for splits inside characters to
    # matter: encode() escapes it, so build one line with raw UTF-8 too
    raw_line = (
        json.dumps(
            {"type": "step", "step_id": "日本🎉", "state": "started"}, ensure_ascii=False
        ).encode()
        + b"\n"
    )
    data = data + raw_line
    multibyte = [i for i, b in enumerate(data) if b >= 0x80]
    assert multibyte, "the stream must contain multi-byte UTF-8"
    expected = _messages(Channel().feed(STDOUT, data))
    assert len(expected) == 4
    for cut in range(1, len(data)):
        channel = Channel()
        events = channel.feed(STDOUT, data[:cut]) + channel.feed(STDOUT, data[cut:])
        assert _messages(events) == expected, cut
        assert channel.invalid == 0


def test_one_byte_frames_with_stderr_noise_between() -> None:
    text = "🎉日本語テキスト" * 2000
    line = json.dumps({"type": "call", "record": {"body": text}}, ensure_ascii=False).encode()
    channel = Channel()
    events: list[ChannelEvent] = []
    for i, byte in enumerate(line + b"\n"):
        events += channel.feed(STDOUT, bytes([byte]))
        if i % 97 == 0:
            events += channel.feed(STDERR, b'noise {"type": "episode"}\n')
    msgs = _messages(events)
    assert len(msgs) == 1
    assert msgs[0]["record"]["body"] == text
    assert channel.stderr_tail()[-1] == 'noise {"type": "episode"}'


def test_stderr_never_becomes_protocol_and_keeps_last_100_lines() -> None:
    channel = Channel()
    events = []
    for i in range(250):
        events += channel.feed(STDERR, encode({"type": "episode", "status": "succeeded", "i": i}))
    assert events == []
    tail = channel.stderr_tail()
    assert len(tail) == 100
    assert json.loads(tail[0])["i"] == 150 and json.loads(tail[-1])["i"] == 249


def test_stderr_long_line_is_cut_not_buffered() -> None:
    channel = Channel()
    channel.feed(STDERR, b"x" * 1_000_000 + b"\nlast")
    tail = channel.stderr_tail()
    assert tail[0].endswith("[line cut]") and len(tail[0]) < 5000
    assert tail[-1] == "last"
    assert channel.stderr_bytes == 1_000_005


def test_20mb_line_is_too_large_and_next_message_parses() -> None:
    channel = Channel()
    events: list[ChannelEvent] = []
    events += channel.feed(STDOUT, encode({"type": "hello", "protocol": 1}))
    chunk = b"A" * 32768
    size = 20 * 1024 * 1024
    events += channel.feed(STDOUT, b'{"type":"call","record":"')
    sent = len(b'{"type":"call","record":"')
    while sent < size:
        events += channel.feed(STDOUT, chunk)
        sent += len(chunk)
        # the oversized line is never buffered
        assert len(channel._pending) <= channel.max_message_bytes
    events += channel.feed(STDOUT, b'"}\n' + encode({"type": "episode", "status": "failed"}))
    kinds = [e.kind for e in events]
    assert kinds == ["message", "message_too_large", "message"]
    assert events[1].size == sent + 2
    assert events[2].message == {"type": "episode", "status": "failed"}
    assert channel.too_large == [sent + 2]


def test_small_cap_boundary() -> None:
    channel = Channel(max_message_bytes=10)
    ok = b'{"type":1}'  # 10 bytes: allowed, but invalid (type not a string)
    events = channel.feed(STDOUT, ok + b"\n" + b"y" * 11 + b"\n")
    assert [e.kind for e in events] == ["invalid", "message_too_large"]
    assert events[1].size == 11


def test_invalid_lines_and_unknown_types_are_events() -> None:
    channel = Channel()
    events = channel.feed(
        STDOUT,
        b"not json\n[1,2]\n"
        + encode({"type": "start"})
        + b"\xff\xfe\n"
        + encode({"type": "meter", "tokens_in": 1}),
    )
    assert [e.kind for e in events] == ["invalid", "invalid", "invalid", "invalid", "message"]
    assert "unknown message type" in events[2].detail
    assert channel.invalid == 4


def test_crlf_and_incomplete_last_line() -> None:
    channel = Channel()
    events = channel.feed(STDOUT, b'{"type":"hello"}\r\n{"type":"step"')
    assert _messages(events) == [{"type": "hello"}]
    closing = channel.close()
    assert [e.kind for e in closing] == ["incomplete"]


def test_total_cap_truncates_and_records() -> None:
    channel = Channel(max_total_bytes=100)
    line = encode({"type": "meter", "tokens_in": 1})
    events: list[ChannelEvent] = []
    for _ in range(20):
        events += channel.feed(STDOUT, line)
    kinds = [e.kind for e in events]
    assert kinds.count("truncated") == 1
    assert channel.truncated
    assert channel.stdout_bytes == 100
    assert channel.dropped_bytes == 20 * len(line) - 100


def test_50mb_of_output_keeps_rss_under_200mb() -> None:
    # A fresh interpreter, so the peak RSS is the channel's and not pytest's.
    script = textwrap.dedent(
        """
        import resource, json
        from runner.backends.base import STDOUT, STDERR
        from runner.episode.channel import Channel
        from runner.wire.protocol import encode
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # after the imports
        ch = Channel()
        n = 0
        total = 0
        frame = 32768
        # 20 MB oversized line, 20 MB of 1 MB messages, 10 MB of stderr
        big = b"B" * frame
        ch.feed(STDOUT, b'{"type":"call","x":"')
        for _ in range(20 * 1024 * 1024 // frame):
            ch.feed(STDOUT, big); total += frame
        ch.feed(STDOUT, b'"}\\n')
        msg = encode({"type": "call", "record": {"body": "m" * (1024 * 1024)}})
        for _ in range(20):
            for i in range(0, len(msg), frame):
                for e in ch.feed(STDOUT, msg[i:i + frame]):
                    n += e.kind == "message"
            total += len(msg)
        for _ in range(10 * 1024 * 1024 // 1000 + 1):
            ch.feed(STDERR, b"e" * 999 + b"\\n"); total += 1000
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"messages": n, "too_large": ch.too_large, "total": total,
                          "peak_mb": (peak_kb - base_kb) / 1024}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(out.stdout)
    assert result["messages"] == 20
    assert len(result["too_large"]) == 1
    assert result["total"] >= 50 * 1024 * 1024
    # growth over the interpreter with runner.episode imported (that package's surface alone is
    # ~50 MB since the layout gathered the episode code under it; the channel is what is bounded)
    assert result["peak_mb"] < 185, result
    print("channel peak RSS MB", result["peak_mb"])
