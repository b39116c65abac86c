"""The episode as a conversation, and the filter attributes of every list, without a browser.

The request and reply shapes below are the three APIs' documented shapes (OpenAI Chat
Completions and Responses, Anthropic Messages, streamed and not), as the gateway records them
(docs/trace-format.md); the helpdesk traces are the project's recorded examples; the τ²-bench
retail results are public (realdata, SANDBOX_REPLAY_REALDATA_DIR).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from runner.cli.render.html import render_job, render_reproduce, render_trace
from runner.cli.render.html.conversation import History, call_view, denial
from runner.cli.render.html.episodes import Capper, read_episode
from runner.cli.render.html.messages import reply_of, request_messages
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.reproduce.report import ReproduceReport
from runner.submit.jobreport import JobReport
from tests.support.realdata import realdata

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT / "examples" / "helpdesk" / "traces"
RUN_LINE = json.loads((TRACES / "failing.jsonl").read_text().splitlines()[0])
# markup a trace may carry: a script, a way out of the style and script blocks, a javascript: URL
ATTACK = (
    '</style><script>window.__pwned=1</script></script><a href="javascript:alert(1)">x</a>'
    "<img src=x onerror=alert(2)>"
)


def _sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e.get('type', 'x')}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_chat_completions_request_and_reply() -> None:
    request = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "kb__search", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "[]"},
        ]
    }
    messages = request_messages(request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[1]["text"] == "hi\n[image_url]"
    assert messages[2]["tool_calls"] == [{"name": "kb__search", "arguments": "{}", "id": "c1"}]
    assert messages[3]["ref"] == "c1"
    body = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}
    assert reply_of(json.dumps(body)) == {"role": "assistant", "text": "done"}
    chunks = [
        {"choices": [{"delta": {"content": "do"}}]},
        {"choices": [{"delta": {"content": "ne"}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
    ]
    streamed = reply_of("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n")
    assert streamed is not None and streamed["text"] == "done"
    assert streamed["tool_calls"] == [{"name": "f", "arguments": "{}", "id": ""}]


def test_anthropic_messages_request_and_reply() -> None:
    request = {
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "name": "f", "input": {"a": 1}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "7"}],
            },
        ],
    }
    messages = request_messages(request, "messages")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2]["tool_calls"][0] == {"name": "f", "arguments": '{"a": 1}', "id": ""}
    assert messages[3] == {"role": "tool", "text": "7", "ref": "t1"}
    body = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    assert reply_of(json.dumps(body)) == {"role": "assistant", "text": "ok"}
    stream = _sse(
        [
            {"type": "message_start", "message": {"model": "m"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "o"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "k"},
            },
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "name": "g"},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"b":'},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": " 2}"},
            },
            {"type": "message_stop"},
        ]
    )
    streamed = reply_of(stream)
    assert streamed is not None and streamed["text"] == "ok"
    assert streamed["tool_calls"] == [{"name": "g", "arguments": '{"b": 2}', "id": ""}]


def test_responses_request_and_reply() -> None:
    request = {
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c9"},
            {"type": "function_call_output", "call_id": "c9", "output": "3"},
        ],
    }
    messages = request_messages(request, "responses")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert request_messages({"input": "just text"}) == [{"role": "user", "text": "just text"}]
    output = [
        {"type": "reasoning", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
        {"type": "function_call", "name": "g", "arguments": "{}", "call_id": "c2"},
    ]
    reply = reply_of(json.dumps({"object": "response", "output": output}))
    assert reply is not None and reply["text"] == "ok" and reply["tool_calls"][0]["name"] == "g"
    completed = _sse([{"type": "response.completed", "response": {"output": output}}])
    assert reply_of(completed) == reply


def test_what_is_not_understood_gives_nothing_never_an_error() -> None:
    for body in (None, "", "plain text", "{not json", "[1, 2]", '{"choices": [7]}', "data: {bad"):
        assert reply_of(body) is None
    assert reply_of("{" + " " * (1 << 20) + "}") is None  # past BODY_CHARS: not parsed
    assert request_messages({"messages": "no list"}) == []
    assert request_messages({"messages": [7, None, {"role": "user", "content": {"x": 1}}]}) == [
        {"role": "user", "text": "[part]"}
    ]


def test_each_turn_shows_its_new_messages_and_not_the_echo_of_the_last_reply() -> None:
    history = History()
    first = [{"role": "system", "text": "s"}, {"role": "user", "text": "q"}]
    reply = {"role": "assistant", "text": "", "tool_calls": [{"name": "f", "arguments": "{}"}]}
    assert history.turn(0, "model", first, None, reply) == (first, None)
    tool = {"role": "tool", "text": "7", "ref": "c1"}
    second = [*first, {**reply}, tool]
    assert history.turn(2, "model", second, None, None) == ([tool], None)
    # a rewritten history (the same system message, the rest summarised): all of it, and said
    summarised = [first[0], {"role": "user", "text": "summary"}]
    shown, note = history.turn(4, "model", summarised, None, None)
    assert shown == summarised and note is not None
    # a request that starts anew is a new conversation: all of it, nothing to say
    fresh = [{"role": "user", "text": "other"}]
    assert history.turn(6, "model", fresh, None, None) == (fresh, None)
    # another step's agent holds a conversation of its own
    assert history.turn(8, "model/other-step", first, None, None) == (first, None)
    # history by reference (messages_from): the request holds only what follows the reference
    history = History()
    history.turn(0, "model", first, None, reply)
    assert history.turn(2, "model", [tool], (0, 2), None) == ([tool], None)


def test_the_recorded_helpdesk_trace_reads_as_a_conversation() -> None:
    episode = read_episode(TRACES / "incomplete.jsonl")
    turns = [c for c in episode["calls"] if c["kind"] == "turn"]
    first, second = (t["conversation"] for t in turns)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["reply"]["tool_calls"][0]["name"] == "kb__search"
    # the second turn: the tool's result sent back, not the whole history again
    assert [m["role"] for m in second["messages"]] == ["tool"]
    assert "Duplicate charges" in second["reply"]["text"]["t"]
    assert [c["at_s"] for c in episode["calls"]] == [1.0, 2.0, 3.0, 5.0, 6.0, 7.0]
    timing = episode["timing"]
    assert (timing["model_calls"], timing["tool_calls"]) == (2, 4)
    assert abs(timing["model_s"] - (0.001157 + 0.000419)) < 1e-9
    html = render_trace(TRACES / "incomplete.jsonl")
    assert "1.6 ms in 2 model turns, 418 µs in 4 tool calls" in html


def _line(index: int, **call: Any) -> dict[str, Any]:
    return {"v": 1, "type": "call", "index": index, "step_id": "s", **call}


def test_a_refused_call_says_the_rule_and_why(tmp_path: Path) -> None:
    rule = {
        "allowed": False,
        "rule": "no-refunds",
        "action": "deny",
        "matched": True,
        "reason": "x",
    }
    error = {"class": "runner.errors.CapabilityDenied", "message": "refused by no-refunds"}
    assert denial(error, {"argument_rule": rule}) == {"rule": "no-refunds", "reason": "x"}
    assert denial({"class": "KeyError", "message": "k"}, None) is None
    trace = tmp_path / "d.jsonl"
    lines = [
        RUN_LINE,
        _line(
            0,
            tool="refund.issue",
            effect="read",
            args={"usd": 5},
            error=error,
            meta={"argument_rule": rule},
        ),
        {"v": 1, "type": "end", "status": "denied", "exit_code": 1},
    ]
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    call = read_episode(trace)["calls"][0]
    assert call["denied"] == {"rule": "no-refunds", "reason": "x"}


def test_reproduce_shows_both_sides_of_the_first_difference_as_calls() -> None:
    recorded = _line(
        2,
        tool="model",
        request={"messages": [{"role": "user", "content": "refund?"}]},
        body=json.dumps({"choices": [{"message": {"role": "assistant", "content": "yes"}}]}),
    )
    replayed = {**recorded, "request": {"messages": [{"role": "user", "content": ATTACK}]}}
    view = call_view(recorded, Capper().text)
    assert view is not None and view["reply"]["text"] == {"t": "yes"}
    assert call_view(None, Capper().text) is None
    report = ReproduceReport(
        input="t.jsonl",
        outcome="not_reproduced",
        reason="r",
        first_difference={"index": 2, "tool": "model", "kind": "request", "message": "m"},
        difference_calls={"recorded": recorded, "replayed": replayed},
        recorded={"status": "failed"},
        replayed={"status": "failed"},
    )
    html = render_reproduce([report])
    assert html.count('<div class="msg role-user">') == 2
    assert "refund?" in html and "&lt;/style&gt;&lt;script&gt;" in html
    assert "<script>window" not in html and "</style><script>" not in html


class _Items(HTMLParser):
    """Every element inside a ``data-filter`` block that names a task, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str | None]] = []
        self.items: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag not in ("br", "input", "meta"):
            self.stack.append((tag, found.get("data-filter")))
        blocks = [label for _, label in self.stack if label is not None]
        if blocks and "data-task" in found:
            self.items.append((blocks[-1], found))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break


def _pairs(tmp_path: Path) -> list[dict[str, Any]]:
    trace = tmp_path / "a.jsonl"
    trace.write_text((TRACES / "incomplete.jsonl").read_text())
    out = []
    for n, (variant, status) in enumerate((("A", "succeeded"), ("B", "failed"), ("A", "failed"))):
        out.append(
            {
                "variant": variant,
                "task_id": f"t{n // 2}",
                "repeat": 0,
                "status": status,
                "attempt": 1,
                "trace": str(trace),
            }
        )
    out.append({"variant": "B", "task_id": "t1", "repeat": 0, "status": "not_run"})
    return out


def test_every_filtered_row_and_item_names_its_variant_status_and_task(tmp_path: Path) -> None:
    pairs = _pairs(tmp_path)
    report = {
        "job_id": "job-1",
        "status": "complete",
        "exit_code": 0,
        "plan": {"formula": "2 x 2", "repeats": 1},
        "pairs": pairs,
        "not_run": [{"variant": "B", "task_id": "t1", "repeat": 0, "reason": "ceiling"}],
        "stopped_by_ceiling": [],
        "incomplete": [],
        "grading": {
            "variants": [],
            "tasks": [
                {
                    "task_id": "t0",
                    "ranking": [
                        {"variant": "A", "rank": 1, "score": 1.0},
                        {"variant": "B", "rank": 2, "score": 0.0},
                    ],
                },
            ],
            "ungraded": [{"task_id": "t1", "reason": "one result"}],
        },
        "unrecorded": {
            "A": {
                "count": 1,
                "calls": [
                    {
                        "task_id": "t1",
                        "repeat": 0,
                        "index": 3,
                        "tool": "kb.search",
                        "args": {"q": "x"},
                    }
                ],
            }
        },
        "gate": {
            "baseline": "A",
            "verdicts": [{"variant": "B", "verdict": "INCONCLUSIVE", "reason": "r"}],
            "flaky": [{"variant": "B", "tasks": ["t0"]}],
        },
    }
    parser = _Items()
    parser.feed(render_job(JobReport.from_json(report, file="report.json")))
    labels = {label for label, _ in parser.items}
    assert labels == {
        "episodes",
        "",  # the episode sections, counted as the episodes table's rows
        "per-task rows",
        "pairs not run",
        "ungraded groups",
        "unrecorded reads",
        "flaky tasks",
    }
    for label, attrs in parser.items:
        variants = attrs.get("data-variant") or attrs.get("data-variants")
        statuses = attrs.get("data-status") or attrs.get("data-statuses")
        assert variants and statuses and statuses != "[]", (label, attrs)
    rows = {a["data-variant"]: a["data-status"] for lb, a in parser.items if lb == "per-task rows"}
    assert rows == {"A": "succeeded", "B": "failed"}  # the status of that very episode
    (not_run,) = [a for lb, a in parser.items if lb == "pairs not run"]
    assert json.loads(not_run["data-statuses"] or "") == ["not_run"]
    (ungraded,) = [a for lb, a in parser.items if lb == "ungraded groups"]
    assert json.loads(ungraded["data-variants"] or "") == ["A", "B"]
    assert json.loads(ungraded["data-statuses"] or "") == ["failed", "not_run"]
    (unrecorded,) = [a for lb, a in parser.items if lb == "unrecorded reads"]
    assert json.loads(unrecorded["data-statuses"] or "") == ["failed"]


def test_a_trace_carrying_markup_cannot_inject(tmp_path: Path) -> None:
    trace = tmp_path / "x.jsonl"
    body = json.dumps(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": ATTACK,
                        "tool_calls": [{"function": {"name": ATTACK, "arguments": ATTACK}}],
                    }
                }
            ]
        }
    )
    lines = [
        {**RUN_LINE, "task_id": "t"},
        _line(
            0, tool="model", request={"messages": [{"role": ATTACK, "content": ATTACK}]}, body=body
        ),
        _line(
            1,
            tool="kb.search",
            effect="read",
            args={"q": ATTACK},
            body=ATTACK,
            error={"class": ATTACK, "message": ATTACK},
        ),
        {"v": 1, "type": "end", "status": "failed", "exit_code": 1, "output": ATTACK},
    ]
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    html = render_trace(trace)
    _, _, rest = html.partition("</style>")
    assert "</style>" not in rest  # the page's own style block is the only one closed
    assert html.count("<script") == 2 and "javascript:" not in html.split('id="report-data"')[0]
    data = rest.split('<script type="application/json" id="report-data">', 1)[1]
    data = data.split("</script>", 1)[0]
    assert "<" not in data and ">" not in data  # tojson: \u003c, never markup
    episode = json.loads(data)["episodes"]["0"]
    conversation = episode["calls"][0]["conversation"]
    assert conversation["messages"][0]["text"] == {"t": ATTACK}  # data, shown as text
    assert conversation["reply"]["tool_calls"][0]["name"] == ATTACK


def test_public_tau2_runs_read_as_conversations_without_repeats(tmp_path: Path) -> None:
    """τ²-bench retail (public results, imported with history by reference): every turn.

    The rule, on every turn of every run: its reply is read (the importer records the choice
    alone, ``{"message", "finish_reason"}``), and no turn shows again as new the reply its
    conversation's previous turn gave.
    """
    source = read_tau2(realdata("tau2-retail", "results.json"))
    write_import(source, tmp_path / "out", {})
    traces = sorted((tmp_path / "out" / "traces").glob("*.jsonl"))
    assert len(traces) == 40
    turns = 0
    for trace in traces:
        last: dict[str, Any] = {}
        for call in read_episode(trace)["calls"]:
            conversation = call.get("conversation")
            if call["kind"] != "turn" or conversation is None:
                continue  # past the episode's text budget only the lengths are kept
            turns += 1
            reply = conversation["reply"]
            assert reply is not None, (trace.name, call["index"])
            key = f"{call['tool']}/{call.get('step')}"
            previous = last.get(key)
            if previous is not None and previous.get("text", {}).get("n") is None:
                shown = [m for m in conversation["messages"] if m["role"] == "assistant"]
                assert previous["text"] not in [m["text"] for m in shown[:1]], trace.name
            last[key] = reply
    assert turns > 300
