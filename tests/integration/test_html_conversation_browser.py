"""The report's conversation view and its filters in a real headless browser (no Docker).

A job of two variants over three tasks is written from traces on disk: the project's recorded
helpdesk trace (two model turns, a tool call the model asked for, tool steps) and a trace
whose every field carries markup (``<script>``, ``</style>``, a ``javascript:`` URL, an
``onerror`` handler) with a call the policy refused. The page is opened from disk in Debian's
chromium inside a network namespace with no route (tests/support/browser.py); under CI a
missing chromium fails these tests, never a skip.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from runner.cli.render.html import render_job, render_trace, write_page
from runner.submit.jobreport import JobReport
from tests.support.browser import Browser, browser

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "examples" / "helpdesk" / "traces"
RUN_LINE = json.loads((TRACES / "failing.jsonl").read_text().splitlines()[0])
ATTACK = (
    "</style><style>body{display:none}</style><script>window.__pwned=1</script>"
    '<a id="evil" href="javascript:window.__pwned=2">x</a><img src=x onerror="window.__pwned=3">'
)
RULE = {"allowed": False, "rule": "no-refunds", "action": "deny", "matched": True, "reason": ATTACK}


def _hostile_trace(path: Path) -> Path:
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": ATTACK,
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "refund__issue", "arguments": ATTACK}}
                    ],
                }
            }
        ]
    }
    request = {
        "messages": [{"role": "system", "content": ATTACK}, {"role": "user", "content": ATTACK}]
    }
    lines: list[dict[str, Any]] = [
        {**RUN_LINE, "task_id": "t-hostile"},
        {
            "v": 1,
            "type": "call",
            "index": 0,
            "step_id": "a",
            "tool": "model",
            "request": request,
            "body": json.dumps(body),
            "source": "provider",
            "duration_s": 0.25,
        },
        {
            "v": 1,
            "type": "call",
            "index": 1,
            "step_id": "a",
            "tool": "kb.search",
            "effect": "read",
            "args": {"q": ATTACK},
            "body": ATTACK * 3,
            "source": "observation",
            "duration_s": 0.002,
        },
        {
            "v": 1,
            "type": "call",
            "index": 2,
            "step_id": "a",
            "tool": "refund.issue",
            "effect": "read",
            "args": {"usd": ATTACK},
            "error": {"class": "runner.errors.CapabilityDenied", "message": ATTACK},
            "meta": {"argument_rule": RULE},
            "duration_s": 0.0001,
        },
        {"v": 1, "type": "end", "status": "denied", "exit_code": 1, "output": ATTACK},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _job(tmp_path: Path) -> Path:
    hostile = _hostile_trace(tmp_path / "hostile.jsonl")
    helpdesk = TRACES / "incomplete.jsonl"
    pairs = [
        {"variant": "A", "task_id": "t-1", "status": "succeeded", "trace": str(helpdesk)},
        {"variant": "B", "task_id": "t-1", "status": "succeeded", "trace": str(helpdesk)},
        {"variant": "A", "task_id": "t-hostile", "status": "denied", "trace": str(hostile)},
        {"variant": "B", "task_id": "t-hostile", "status": "succeeded", "trace": str(helpdesk)},
        {"variant": "A", "task_id": "t-3", "status": "not_run"},
        {"variant": "B", "task_id": "t-3", "status": "not_run"},
    ]
    ranking = [
        {
            "task_id": t,
            "ranking": [
                {"variant": "A", "rank": 1, "score": 1.0},
                {"variant": "B", "rank": 2, "score": 0.5},
            ],
        }
        for t in ("t-1", "t-hostile")
    ]
    report = {
        "job_id": "job-browser",
        "status": "ceiling_reached",
        "exit_code": 4,
        "plan": {"formula": "2 variants x 3 tasks = 6 runs", "repeats": 1},
        "pairs": [{**p, "repeat": 0, "attempt": 1} for p in pairs],
        "not_run": [
            {"variant": v, "task_id": "t-3", "repeat": 0, "reason": "ceiling"} for v in "AB"
        ],
        "grading": {"variants": [], "tasks": ranking},
        "unrecorded": {},
    }
    html = render_job(JobReport.from_json(report, file="report.json"))
    return write_page(tmp_path / "report.html", html)


def _open(b: Browser, page: Path) -> None:
    b.send("Log.enable")
    assert b.interfaces == ["lo"]
    b.open(page.as_uri())
    assert b.js("document.documentElement.getAttribute('data-ready')") == "1"


def _problems(b: Browser) -> list[Any]:
    """Script exceptions, console errors and warnings, and browser log errors (CSP, loads)."""
    console = [
        e for e in b.events("Runtime.consoleAPICalled") if e.get("type") in ("error", "warning")
    ]
    log = [e for e in b.events("Log.entryAdded") if e["entry"].get("level") in ("error", "warning")]
    return [*b.events("Runtime.exceptionThrown"), *console, *log]


def _inert(b: Browser) -> None:
    assert b.js("typeof window.__pwned") == "undefined"
    assert b.js("document.scripts.length") == 2  # the data block and the page's own script
    assert b.js("document.styleSheets.length") == 1
    assert (
        b.js("document.querySelectorAll('#evil, img, [onerror], a[href^=javascript]').length") == 0
    )
    assert b.js("getComputedStyle(document.body).display") == "block"


def _visible(b: Browser, selector: str) -> list[str]:
    return list(
        b.js(
            f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
            ".filter(e => e.offsetParent !== null).map(e => e.textContent.trim())"
        )
    )


def _choose(b: Browser, name: str, value: str) -> None:
    b.js(
        f"(() => {{ const s = document.querySelector('#filters [name={name}]');"
        f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
    )


def _wait(b: Browser, expression: str) -> None:
    """Until ``expression`` is true in the page (a details element's toggle event is async)."""
    deadline = time.monotonic() + 5
    while not b.js(expression):
        assert time.monotonic() < deadline, expression
        time.sleep(0.05)


def _open_conversation(b: Browser, n: int) -> None:
    b.click(f"#episode-{n} details.conversation summary")
    _wait(b, f"document.querySelectorAll('#episode-{n} .call').length")


def test_filters_apply_to_every_table_and_the_count_line_is_true(tmp_path: Path) -> None:
    page = _job(tmp_path)
    with browser(tmp_path / "b", width=1400, height=900) as b:
        _open(b, page)
        assert len(_visible(b, "#tasks-table tbody tr")) == 4
        _choose(b, "status", "denied")
        # the per-task table follows the status filter (it did not: its rows named no status)
        assert _visible(b, "#tasks-table tbody tr td:first-child") == ["t-hostile"]
        assert _visible(b, "#episodes-table tbody tr td:nth-child(2)") == ["t-hostile"]
        assert _visible(b, "#not-run li") == []
        count = b.js("document.getElementById('filter-count').textContent")
        assert count == "1 of 6 episodes shown; pairs not run 0 of 2; per-task rows 1 of 4"
        assert _visible(b, "#filter-note")  # the aggregates are not re-graded: said
        _choose(b, "status", "not_run")
        assert _visible(b, "#tasks-table tbody tr") == []
        assert _visible(b, "#not-run li [data-count]") == ["2"]
        _choose(b, "variant", "B")
        assert _visible(b, "#not-run li .item") == ["B×t-3"]
        assert _visible(b, "#not-run li [data-count]") == ["1"]
        count = b.js("document.getElementById('filter-count').textContent")
        assert count == "1 of 6 episodes shown; pairs not run 1 of 2; per-task rows 0 of 4"
        _choose(b, "variant", "")
        _choose(b, "status", "")
        assert len(_visible(b, "#tasks-table tbody tr")) == 4
        assert not _visible(b, "#filter-note")
        assert _problems(b) == []


def test_the_conversation_shows_messages_tool_calls_and_refusals_as_text(tmp_path: Path) -> None:
    page = _job(tmp_path)
    with browser(tmp_path / "b", width=1400, height=900) as b:
        _open(b, page)
        _open_conversation(b, 0)  # the recorded helpdesk trace
        roles = b.js(
            "Array.from(document.querySelectorAll('#episode-0 .call.turn .msg .who'))"
            ".map(e => e.firstChild.textContent)"
        )
        assert roles == ["system", "user", "assistant", "tool result", "assistant"]
        asks = _visible(b, "#episode-0 .call.turn .msg .ask code")
        assert asks == ["kb__search"]
        tools = _visible(b, "#episode-0 .call.tool .head")
        assert tools[0].startswith("#0 ticket.get") and tools[0].endswith("160 µs")
        assert "call #3 not in the trace" in _visible(b, "#episode-0 .calls > p.cut")
        # a call's raw JSON, one click away
        b.click("#episode-0 .call.tool details.raw summary")
        _wait(b, "document.querySelector('#episode-0 .call.tool details.raw pre').textContent")
        raw = json.loads(_visible(b, "#episode-0 .call.tool details.raw pre")[0])
        assert raw["tool"] == "ticket.get" and raw["args"]["t"]

        _open_conversation(b, 2)  # the hostile trace: everything shown, nothing run
        shown = " ".join(_visible(b, "#episode-2 .call"))
        assert "window.__pwned=1" in shown
        denied = _visible(b, "#episode-2 .call.tool div.denied")
        assert denied == [f"denied by policy (rule no-refunds): {ATTACK}; nothing executed"]
        # a long value is collapsed to its first line; the whole is one click away
        assert b.js("document.querySelector('#episode-2 details.long').open") is False
        b.click("#episode-2 details.long summary")
        whole = b.js("document.querySelector('#episode-2 details.long pre').textContent")
        assert whole == ATTACK * 3
        _inert(b)
        assert _problems(b) == []
        b.screenshot(tmp_path / "conversation.png", full_page=True)


@pytest.mark.parametrize("javascript", [True, False])
def test_a_hostile_trace_page_is_inert(tmp_path: Path, javascript: bool) -> None:
    page = write_page(tmp_path / "t.html", render_trace(_hostile_trace(tmp_path / "h.jsonl")))
    with browser(tmp_path / "b") as b:
        b.send("Log.enable")
        b.open(page.as_uri(), javascript=javascript)
        if javascript:
            _open_conversation(b, 0)
            assert len(_visible(b, "#episode-0 .call")) == 3
        _inert(b)
        assert _problems(b) == []
        urls = [e["request"]["url"] for e in b.events("Network.requestWillBeSent")]
        assert urls == [page.as_uri()]  # nothing loaded but the page itself
