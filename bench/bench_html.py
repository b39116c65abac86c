"""Benchmark: size and load time of the HTML report of a 200-episode job (printed, not asserted).

Builds a job of 4 variants × 50 tasks (200 episodes) on disk without containers: each episode a
trace of 40 calls (tool calls with ~1 KB results, a third of them served from recordings, and
model turns with ~2 KB requests and responses), a few failures with signatures and outbound
attempts; grades it with the real tournament (rubric, bootstrap); renders the page with
`runner.cli.render.html.render_job`; then opens it from disk in Debian's headless chromium
inside a network namespace (tests/support/browser.py) and reads the load time, the time until
the page's script is ready, and the time to open one episode's calls.

Targets: under 5 MB, under 2 s to load. Usage:
``.venv/bin/python bench/bench_html.py [--episodes-per-variant 50] [--calls 40]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.cli.render.html import render_job, write_page  # noqa: E402
from runner.grading import Group, Result, ToolCall, grade, rubric_judge  # noqa: E402
from runner.submit.jobreport import JobReport  # noqa: E402

RUN_LINE = json.loads(
    (ROOT / "examples" / "helpdesk" / "traces" / "failing.jsonl").read_text().splitlines()[0]
)
VARIANTS = ["triage@1", "triage@2", "triage@3", "triage@4"]


def _text(rng: random.Random, n: int) -> str:
    words = ["refund", "ticket", "customer", "billing", "password", "shipping", "the", "a", "is"]
    return " ".join(rng.choice(words) for _ in range(n // 6))


def _trace(path: Path, rng: random.Random, task_id: str, calls: int, fail: bool) -> None:
    lines: list[dict[str, Any]] = [{**RUN_LINE, "task_id": task_id}]
    for i in range(calls):
        if i % 4 == 3:
            request = {
                "model": "gpt-4.1-mini",
                "messages": [{"role": "user", "content": _text(rng, 2000)}],
            }
            body = json.dumps(
                {
                    "id": f"chatcmpl-{i}",
                    "model": "gpt-4.1-mini-2025-04-14",
                    "choices": [{"message": {"role": "assistant", "content": _text(rng, 1500)}}],
                    "usage": {"prompt_tokens": 600, "completion_tokens": 300},
                }
            )
            lines.append(
                {
                    "v": 1,
                    "type": "call",
                    "index": i,
                    "step_id": "agent",
                    "tool": "model",
                    "request": request,
                    "body": body,
                    "model": "gpt-4.1-mini-2025-04-14",
                    "source": "provider",
                    "duration_s": 0.8,
                }
            )
        else:
            lines.append(
                {
                    "v": 1,
                    "type": "call",
                    "index": i,
                    "step_id": "s",
                    "tool": "kb.search",
                    "effect": "read" if i % 3 else "pure",
                    "args": {"q": _text(rng, 60)},
                    "body": json.dumps({"hits": [_text(rng, 1000)]}),
                    "source": "observation" if i % 3 else "executed",
                    "duration_s": 0.01,
                }
            )
    end: dict[str, Any] = {
        "v": 1,
        "type": "end",
        "status": "failed" if fail else "succeeded",
        "exit_code": 1 if fail else 0,
        "output": _text(rng, 300),
        "outbound": [{"kind": "socket.getaddrinfo", "host": "api.example.com", "port": 443}]
        if fail
        else [],
    }
    if fail:
        end["failure"] = {
            "call_index": calls - 1,
            "tool": "kb.search",
            "error_class": "KeyError",
            "exit_code": 1,
        }
        end["failure_signature"] = "ab" * 32
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def build(folder: Path, per_variant: int, calls: int) -> dict[str, Any]:
    rng = random.Random(17)
    pairs, groups = [], []
    for t in range(per_variant):
        task_id = f"ticket-{1000 + t}"
        results = []
        for v, variant in enumerate(VARIANTS):
            fail = rng.random() < 0.1 * (4 - v)
            trace = folder / f"{variant}-{task_id}.jsonl"
            _trace(trace, rng, task_id, calls, fail)
            status = "failed" if fail else "succeeded"
            pairs.append(
                {
                    "variant": variant,
                    "task_id": task_id,
                    "repeat": 0,
                    "status": status,
                    "attempt": 1,
                    "trace": str(trace),
                }
            )
            output = "ok" if rng.random() < 0.4 + 0.15 * v else "no"
            results.append(Result(variant, status, output, (ToolCall("kb.search", {}),)))
        groups.append(Group(task_id, tuple(results), {"output": "ok"}))
    grading = grade(groups, rubric_judge, variants=VARIANTS, seed=1).to_dict()
    n = len(pairs)
    return {
        "job_id": "job-bench",
        "status": "complete",
        "exit_code": 0,
        "resumed": False,
        "policy": {"name": "shadow"},
        "plan": {
            "runs": n,
            "repeats": 1,
            "seed": 1,
            "formula": f"4 variants x {per_variant} tasks = {n} runs",
            "judge": {"spec": "rubric", "model_calls": 0},
            "variants": [{"name": v} for v in VARIANTS],
        },
        "ceilings": {"replay": {"runs": {"value": 500, "source": "policy shadow"}}},
        "runs_by_status": {},
        "pairs": pairs,
        "not_run": [],
        "stopped_by_ceiling": [],
        "spend": {},
        "grading": grading,
        "unrecorded": {},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes-per-variant", type=int, default=50)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-html-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        report = build(folder, args.episodes_per_variant, args.calls)
        built = time.perf_counter() - t0
        traces_mb = sum(p.stat().st_size for p in folder.glob("*.jsonl")) / 1e6
        t0 = time.perf_counter()
        html = render_job(JobReport.from_json(report, file="bench"))
        rendered = time.perf_counter() - t0
        page = write_page(folder / "report.html", html)
        size_mb = page.stat().st_size / 1e6
        print(
            f"episodes: {len(report['pairs'])} x {args.calls} calls; traces {traces_mb:.1f} MB"
            f" (built and graded in {built:.1f} s)"
        )
        print(f"render_job: {rendered:.2f} s; report.html: {size_mb:.2f} MB (target < 5 MB)")
        from tests.support.browser import browser

        with browser(folder / "browser") as b:
            assert b.interfaces == ["lo"], b.interfaces
            b.open("about:blank")
            cold = b.open(page.as_uri())
            timing = b.js(
                "(() => { const t = performance.getEntriesByType('navigation')[0];"
                " return [t.domContentLoadedEventEnd, t.loadEventEnd]; })()"
            )
            warm = b.open(page.as_uri())
            t0 = time.perf_counter()
            b.click("#episode-0 details summary")
            while not b.js("document.querySelectorAll('#episode-0 .call').length"):
                time.sleep(0.01)
            episode = time.perf_counter() - t0
            nodes = b.js("document.getElementsByTagName('*').length")
        print(
            f"load in headless chromium: {cold:.2f} s to the load event (second load {warm:.2f} s);"
            f" DOMContentLoaded {timing[0] / 1000:.2f} s, loadEventEnd {timing[1] / 1000:.2f} s"
            f" (target < 2 s); {nodes} elements"
        )
        print(f"open one episode's {args.calls} calls: {episode:.2f} s")


if __name__ == "__main__":
    main()
