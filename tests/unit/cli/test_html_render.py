"""The HTML report without a browser: escaping, the script-safe data block, CSP, caps, diff."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from runner.cli.render.html import render_job, render_reproduce, render_trace, write_page
from runner.cli.render.html.diff import side_by_side
from runner.cli.render.html.episodes import CALLS_SHOWN, FIELD_CHARS, SPENT_CHARS, read_episode
from runner.reproduce.report import ReproduceReport
from runner.submit.jobreport import JobReport

ROOT = Path(__file__).resolve().parents[3]
RUN_LINE = json.loads(
    (ROOT / "examples" / "helpdesk" / "traces" / "failing.jsonl").read_text().splitlines()[0]
)
HOSTILE = '</script><script>window.__pwned=1</script><img src=x onerror="alert(1)"><!--'
HOSTILE_ID = "t' onmouseover='alert(1)' &lt;b&gt;"


def _trace(path: Path, task_id: str, calls: list[dict[str, Any]], **end: Any) -> Path:
    lines = [{**RUN_LINE, "task_id": task_id}]
    for i, call in enumerate(calls):
        lines.append({"v": 1, "type": "call", "index": i, "step_id": "s", **call})
    lines.append(
        {
            "v": 1,
            "type": "end",
            "status": "succeeded",
            "exit_code": 0,
            "outbound": [{"kind": "socket.connect", "host": HOSTILE, "port": 443}],
            **end,
        }
    )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _job(report: dict[str, Any]) -> JobReport:
    return JobReport.from_json(report, file="report.json")


def _report(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "job_id": "job-1",
        "status": "complete",
        "exit_code": 0,
        "policy": {"name": "shadow"},
        "plan": {"formula": "2 variants x 1 tasks = 2 runs", "repeats": 1, "judge": {}},
        "ceilings": {"replay": {"runs": {"value": 5, "source": HOSTILE}}},
        "runs_by_status": {"succeeded": 2},
        "pairs": pairs,
        "not_run": [{"variant": "A", "task_id": HOSTILE_ID, "reason": HOSTILE}],
        "incomplete": [
            {"variant": f"B{HOSTILE}", "task_id": "t2", "status": "ceiling_reached", "reason": ""}
        ],
        "spend": {},
        "grading": {
            "judge": "rubric",
            "seed": 1,
            "variants": [
                {
                    "variant": name,
                    "rating": {"mu": mu, "sigma": 2.0, "ordinal": mu - 6},
                    "interval": {"mu": [mu - 1, mu + 1]},
                    "mean_rank": 1.0,
                    "versus": {},
                    "episodes_by_status": {"succeeded": 1},
                }
                for name, mu in ((f"B{HOSTILE}", 30.0), ("A", 20.0))
            ],
            "tasks": [
                {
                    "task_id": HOSTILE_ID,
                    "ranking": [{"variant": "A", "rank": 1, "score": 1.0}],
                    "detail": {"reasons": {"A": [HOSTILE]}, "order": ["A"]},
                }
            ],
            "verdicts": [{"a": "A", "b": "B", "verdict": "within_noise", "text": HOSTILE}],
        },
    }


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def _check_inert(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert scripts == [{"type": "application/json", "id": "report-data"}, {}]
    handlers = [(t, k) for t, a in page.tags for k in a if k.startswith("on")]
    assert handlers == []
    assert not [t for t, _ in page.tags if t in ("img", "iframe", "object", "embed", "link")]
    data = page.scripts[0]
    assert "<" not in data and ">" not in data  # tojson: \u003c, never a way out of the block
    json.loads(data)
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert found is not None
    csp = unescape(found.group(1))
    assert "default-src 'none'" in csp
    digest = base64.b64encode(hashlib.sha256(page.scripts[1].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp  # only the page's own script runs
    return page


def test_a_job_page_is_inert_whatever_the_report_and_traces_hold(tmp_path: Path) -> None:
    trace = _trace(
        tmp_path / "a.jsonl",
        "t1",
        [
            {"tool": "echo.text", "effect": "pure", "args": {"text": HOSTILE}, "body": HOSTILE},
            {
                "tool": "model",
                "request": {"messages": [{"role": "user", "content": HOSTILE}]},
                "body": json.dumps({"usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
                "model": HOSTILE,
            },
        ],
        output=HOSTILE,
    )
    pairs = [
        {
            "variant": "A",
            "task_id": HOSTILE_ID,
            "status": "succeeded",
            "attempt": 1,
            "trace": str(trace),
            "turn_usd": [0.25],
        },
        {"variant": f"B{HOSTILE}", "task_id": HOSTILE_ID, "status": "not_run"},
    ]
    html = render_job(_job(_report(pairs)))
    page = _check_inert(html)
    data = json.loads(page.scripts[0])
    episode = data["episodes"]["0"]
    assert episode["calls"][0]["body"] == {"t": HOSTILE}  # kept whole, as data
    assert (episode["tokens_in"], episode["tokens_out"], episode["usd"]) == (7, 3, 0.25)
    assert "t&#39; onmouseover=&#39;alert(1)&#39; &amp;lt;b&amp;gt;" in html  # as text
    assert "&lt;/script&gt;&lt;script&gt;" in html  # the hostile text shown, escaped
    assert "incomplete, ceiling_reached (never scored" in html  # named, not scored
    path = write_page(tmp_path / "out" / "report.html", html)
    assert path.read_bytes().decode("utf-8") == html


def test_traces_are_capped_per_field_per_episode_and_in_calls(tmp_path: Path) -> None:
    big = "x" * 100_000
    calls = [{"tool": "echo.text", "args": {"n": i}, "body": big} for i in range(CALLS_SHOWN + 50)]
    trace = _trace(tmp_path / "big.jsonl", "t1", calls)
    episode = read_episode(trace)
    assert episode["calls_total"] == CALLS_SHOWN + 50 and episode["calls_omitted"] == 50
    first = episode["calls"][0]["body"]
    assert len(first["t"]) == FIELD_CHARS and first["n"] == 100_000
    middle = episode["calls"][10]["body"]
    assert len(middle["t"]) == SPENT_CHARS  # the episode's full-size budget is spent
    late = episode["calls"][-1]["body"]
    assert late == {"t": "", "n": 100_000}  # past the hard cap: only the length
    pair = {"variant": "A", "task_id": "t1", "status": "succeeded", "attempt": 1}
    html = render_job(_job(_report([{**pair, "trace": str(trace)}])))
    assert len(html) < 200_000  # 25 MB of trace, a page a browser opens at once


def test_unreadable_traces_and_lone_surrogates_never_break_the_page(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 1, "type": "run"\n')
    # a model turn refused before any answer: no usage, no body (it broke the page once)
    refused = {"tool": "model", "request": {}, "error": {"class": "CeilingReached", "message": "x"}}
    surrogate = _trace(tmp_path / "s.jsonl", "t1", [refused], output="\ud800 lone")
    pairs = [
        {"variant": v, "task_id": "t1", "status": "succeeded", "attempt": 1, "trace": str(t)}
        for v, t in (("A", bad), ("B", surrogate), ("C", tmp_path / "no"))
    ]
    html = render_job(_job(_report(pairs)))
    assert html.count(">trace unreadable: ") == 2  # the bad one and the missing one
    written = write_page(tmp_path / "r.html", html).read_bytes()
    assert b"\\ud800 lone" in written or b"\\\\ud800 lone" in written
    assert "trace unreadable" in render_trace(bad)
    assert read_episode(surrogate)["tokens_in"] == 0


def test_reproduce_page_shows_the_first_difference_side_by_side() -> None:
    recorded = {"index": 3, "tool": "kb.search", "args": {"q": "refund"}, "body": '{"hits": 1}'}
    replayed = {"index": 3, "tool": "kb.search", "args": {"q": HOSTILE}, "body": '{"hits": 1}'}
    report = ReproduceReport(
        input=f"traces/{HOSTILE}.jsonl",
        outcome="not_reproduced",
        reason=HOSTILE,
        first_difference={
            "index": 3,
            "tool": "kb.search",
            "kind": "arguments",
            "message": HOSTILE,
        },
        difference_calls={"recorded": recorded, "replayed": replayed},
        outbound=[{"kind": "socket.getaddrinfo", "host": "api.example.com", "port": 443}],
        environment_diff=[{"field": "python", "recorded": "3.11", "now": HOSTILE}],
        recorded={"status": "failed"},
        replayed={"status": "succeeded"},
    )
    html = render_reproduce([report])
    _check_inert(html)
    assert 'class="chg"' in html and "api.example.com:443" in html
    rows = side_by_side(recorded, replayed)["rows"]
    changed = [r for r in rows if r["kind_left"] == "chg"]
    assert len(changed) == 1 and '"refund"' in changed[0]["left"]
    only_left = side_by_side(recorded, None)["rows"]
    assert any(r["kind_left"] == "del" for r in only_left)


def test_a_model_judges_answers_in_both_orders_are_its_reasons() -> None:
    report = _report([])
    report["grading"]["tasks"] = [
        {
            "task_id": "t1",
            "ranking": [{"variant": "A", "rank": 1}, {"variant": "B", "rank": 1}],
            "detail": {
                "order": ["A", "B"],
                "orders": [["A", "B"], ["B", "A"]],
                "agree": False,
                "answers": [{"answer": '{"ranks": {"1": 1, "2": 2}}'}, {"answer": HOSTILE}],
            },
        }
    ]
    report["grading"]["consistency"] = {
        "checked": 1,
        "agreed": 0,
        "disagreed": [{"task_id": "t1", "repeat": 0, "rankings": []}],
    }
    html = render_job(_job(report))
    _check_inert(html)
    assert "asked in order A, B: {&#34;ranks&#34;" in html
    assert "asked in order B, A: &lt;/script&gt;" in html
    assert "(two orders disagreed)" in html and "agreed with itself on 0 of 1 group" in html
