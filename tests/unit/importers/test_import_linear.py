"""Importers are linear in output: a turn's history is written by reference.

Before, every model and user turn's request held the whole conversation so far: a τ²
conversation of 2,000 messages (0.75 MB) made a 400 MB trace. Now each role's later turns
carry ``messages_from`` and only their new messages; `read_trace` resolves them into the same
whole requests as before (what ``reproduce`` matches). The reader checks every reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.importers.openai_messages import read_openai_messages
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.tracetools.reader import MAX_RESOLVED_MESSAGES, read_trace
from runner.tracetools.reader import TraceLines as Lines

TAU2 = Path(__file__).parents[2] / "fixtures" / "import" / "tau2-mini"


def _long_tau2(path: Path, exchanges: int) -> int:
    """The τ² fixture with its first simulation made ``exchanges`` exchanges long."""
    doc = json.loads((TAU2 / "results.json").read_text(encoding="utf-8"))
    sim = doc["simulations"][0]
    head = sim["messages"][:2]  # greeting, first user message
    messages = list(head)
    for n in range(exchanges):
        messages += [
            {
                "role": "assistant",
                "content": f"looking {n}",
                "tool_calls": [{"id": f"c{n}", "name": "get_order", "arguments": {"order_id": n}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            },
            {"id": f"c{n}", "role": "tool", "content": "x" * 200, "error": False},
            {"role": "assistant", "content": "y" * 200, "usage": {"prompt_tokens": 1}},
            {"role": "user", "content": "z" * 200, "usage": {"completion_tokens": 1}},
        ]
    sim["messages"] = messages
    doc["simulations"] = [sim]
    path.write_text(json.dumps(doc), encoding="utf-8")
    (path.parent / "mini_tools.json").write_bytes((TAU2 / "mini_tools.json").read_bytes())
    return path.stat().st_size


def _trace_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in (out / "traces").glob("*.jsonl"))


def test_a_long_tau2_conversation_makes_a_trace_of_its_own_size(tmp_path: Path) -> None:
    sizes = {}
    for exchanges in (100, 400):
        folder = tmp_path / str(exchanges)
        folder.mkdir()
        source_bytes = _long_tau2(folder / "results.json", exchanges)
        write_import(read_tau2(folder / "results.json"), folder / "out", {})
        sizes[exchanges] = (source_bytes, _trace_bytes(folder / "out"))
    # each model line repeats the offered tools (linear); the old writer made 400 exchanges
    # (0.4 MB) into 75 MB of trace
    for source_bytes, trace_bytes in sizes.values():
        assert trace_bytes < 10 * source_bytes
    growth = sizes[400][1] / sizes[100][1]
    assert growth < 5  # 4x the messages, 4x the trace (quadratic growth would be 16x)


def test_resolved_requests_are_the_whole_conversation(tmp_path: Path) -> None:
    _long_tau2(tmp_path / "results.json", 5)
    write_import(read_tau2(tmp_path / "results.json"), tmp_path / "out", {})
    (path,) = (tmp_path / "out" / "traces").glob("*.jsonl")
    raw = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    turns = [x for x in raw if x.get("tool") == "model"]
    assert "messages_from" not in turns[0]
    assert all("messages_from" in t for t in turns[1:])
    trace = read_trace(path)
    models = [c for c in trace.calls if c.tool == "model"]
    history: list[Any] = []
    previous = None
    for call in models:
        assert call.messages_from is None and call.request is not None
        messages = call.request["messages"]
        if previous is not None:  # each request continues the one before it
            assert messages[: len(previous)] == previous
        previous = messages
        history = messages
    assert history[0]["role"] == "system"
    assert sum(1 for m in history if m["role"] == "tool") == 5
    # every user turn continues the previous one too, and starts with its instructions
    users = [c for c in trace.calls if c.tool == "user"]
    assert users and all(u.request and u.request["messages"][0]["role"] == "system" for u in users)
    assert "messages_from" not in users[-1].to_json()  # resolved records read as if whole


def test_openai_messages_are_written_by_reference_too(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for n in range(50):
        messages += [
            {"role": "user", "content": f"question {n} " + "q" * 300},
            {"role": "assistant", "content": f"answer {n} " + "a" * 300},
        ]
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps({"id": "c1", "messages": messages}) + "\n", encoding="utf-8")
    write_import(read_openai_messages(source), tmp_path / "out", {})
    assert _trace_bytes(tmp_path / "out") < 5 * source.stat().st_size
    (path,) = (tmp_path / "out" / "traces").glob("*.jsonl")
    last = [c for c in read_trace(path).calls if c.tool == "model"][-1]
    assert last.request is not None and len(last.request["messages"]) == 100


def _trace(calls: list[dict[str, Any]]) -> bytes:
    run = {
        "v": 1,
        "type": "run",
        "run_id": "r",
        "task_id": "t",
        "task_input": {},
        "workflow": {"name": "w", "version": "1", "hash": "0" * 64, "content": ""},
        "purpose": "live",
        "backend": "import:test",
        "clock": {"start": 0.0, "step_s": 0.0},
        "seed": 0,
        "environment": {
            "python": None,
            "platform": None,
            "packages": {},
            "image_id": None,
            "tools": {},
            "policy_hash": None,
        },
    }
    end = {"v": 1, "type": "end", "status": "succeeded", "exit_code": 0}
    lines = [run, *calls, end]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def _turn(index: int, tool: str, messages: list[Any], ref: Any = None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "v": 1,
        "type": "call",
        "index": index,
        "tool": tool,
        "request": {"messages": messages},
        "body": "{}",
        "body_encoding": "text",
    }
    if ref is not None:
        call["messages_from"] = ref
    return call


@pytest.mark.parametrize(
    ("calls", "problem"),
    [
        ([_turn(0, "model", [1], {"call": 5, "count": 1})], "no earlier model or user call"),
        (
            [_turn(0, "user", [1]), _turn(1, "model", [2], {"call": 0, "count": 1})],
            "a user turn, not a model turn",
        ),
        (
            [_turn(0, "model", [1, 2]), _turn(1, "model", [3], {"call": 0, "count": 3})],
            "takes 3 messages of call 0, whose request has 2",
        ),
    ],
)
def test_a_bad_reference_is_malformed_naming_its_field(
    tmp_path: Path, calls: list[dict[str, Any]], problem: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(_trace(calls))
    with pytest.raises(InputError) as caught:
        read_trace(path)
    assert problem in str(caught.value)
    assert caught.value.fields.get("field") == "messages_from"
    assert caught.value.fields.get("line") == len(calls) + 1


def test_references_cannot_blow_up_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # each line takes all of the previous request: n lines resolve to n^2/2 messages
    monkeypatch.setattr("runner.tracetools.reader.MAX_RESOLVED_MESSAGES", 10_000)
    calls = [_turn(0, "model", list(range(100)))]
    for i in range(1, 300):
        calls.append(_turn(i, "model", [i], {"call": i - 1, "count": 99 + i}))
    path = tmp_path / "t.jsonl"
    path.write_bytes(_trace(calls))
    with pytest.raises(InputError) as caught, path.open("rb") as stream:
        for _ in Lines(stream, file=str(path)):
            pass
    assert "more than 10000 messages" in str(caught.value)
    assert MAX_RESOLVED_MESSAGES >= 10_000_000  # the real bound leaves long traces readable
