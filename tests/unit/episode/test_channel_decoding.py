"""Every channel line the strict decoder refuses is an invalid event: the sandbox is killed,
the episode is ``crashed`` and the trace still ends with its ``end`` line (items 4
and 15). The "runtime" is a local script speaking the protocol (tests/support/fakes.py), as in
tests/unit/episode/test_episode_host.py; the real-container attack is in
tests/integration/test_attacks_runtime.py.
"""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from runner.episode.channel import Channel
from runner.trace.strictjson import MAX_DEPTH
from runner.wire import protocol
from tests.unit.episode.test_episode_host import _run, setup

__all__ = ["setup"]  # fixture

FORGING_RUNTIME = textwrap.dedent(
    r"""
    import json, os, sys
    mode = sys.argv[1]
    out = sys.stdout.buffer
    def send(raw):
        out.write(raw + b"\n"); out.flush()
    hello = {"type": "hello", "protocol": 1, "python": "3.11", "pid": os.getpid()}
    send(json.dumps(hello).encode())
    assert json.loads(sys.stdin.buffer.readline())["type"] == "start"
    deep = "[" * 980 + "]" * 980
    forged = {
        "deep_call": ('{"type":"call","record":{"index":0,"step_id":"fetch","tool":"kb.search",'
                      '"args":{"q":' + deep + '},"body":"1","body_encoding":"text"}}'),
        "deep_output": '{"type":"episode","status":"succeeded","output":' + deep + '}',
        "nan_output": '{"type":"episode","status":"succeeded","output":NaN,"not_run":[]}',
        "huge_number": '{"type":"meter","tokens_in":1e400,"tokens_out":0}',
        "duplicate_key": '{"type":"meter","type":"episode","tokens_in":1}',
        "not_utf8": '{"type":"meter","pad":"\xff"}',
    }[mode]
    send(forged.encode("latin-1"))
    send(json.dumps({"type": "episode", "status": "succeeded", "output": "after",
                     "error": None, "not_run": []}).encode())
    line = sys.stdin.buffer.readline()
    sys.exit(0)
    """
)


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("deep_call", f"nested too deeply (more than {MAX_DEPTH}"),
        ("deep_output", f"nested too deeply (more than {MAX_DEPTH}"),
        ("nan_output", "NaN is not JSON"),
        ("huge_number", "1e400 is not JSON"),
        ("duplicate_key", "duplicate key"),
        ("not_utf8", "not UTF-8"),
    ],
)
def test_a_line_the_strict_decoder_refuses_kills_the_sandbox_and_the_trace_ends(
    setup: SimpleNamespace, mode: str, why: str
) -> None:
    setup.script.write_text(FORGING_RUNTIME)
    result, lines, backend = _run(setup, mode)  # no RecursionError, no traceback
    end = lines[-1]
    assert end["type"] == "end" and result.status == "crashed", end
    assert "protocol error" in end["reason"] and why in end["reason"], end["reason"]
    assert "stdout line 2" in end["reason"]
    assert end["sandbox"]["killed_for"] == "invalid_message"
    assert end["channel"]["invalid_lines"] == 1
    assert backend.sandboxes[0].proc.poll() is not None
    text = result.trace_path.read_text()
    assert '"NaN"' not in text and "Infinity" not in text  # never turned into a string


def test_channel_reports_deep_lines_as_invalid_without_recursing() -> None:
    channel = Channel()
    deep = b'{"type":"meter","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    events = channel.feed(1, deep + b'{"type":"meter","tokens_in":1,"tokens_out":0}\n')
    assert [e.kind for e in events] == ["invalid", "message"]
    assert f"nested too deeply (more than {MAX_DEPTH}" in events[0].detail


def test_protocol_decode_is_the_strict_decoder_on_both_sides() -> None:
    """The runtime decodes the host's lines with the same function (runner/runtime/channel)."""
    for line in (b'{"type":"start","x":NaN}', b'{"type":"a","type":"b"}', b"\xff"):
        with pytest.raises(ValueError):
            protocol.decode(line)
    nested = b'{"type":"m","v":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert protocol.decode(nested)["type"] == "m"
    with pytest.raises(ValueError, match="nested too deeply"):
        protocol.decode(b'{"type":"m","v":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}")
