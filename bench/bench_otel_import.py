"""Benchmark: `import otel` speed (spans per second) and peak RSS on generated 100,000-span files.

Generated input (deterministic, OTel GenAI conventions as the Google ADK fixtures write them):
sessions of 100 spans each — an ``invoke_agent`` root, then 33 rounds of a framework wrapper
span (``call_llm``: requested model, usage) around a provider ``chat`` span (output messages
with a tool call, usage, response model) and an ``execute_tool`` span (arguments, result).
Written twice: as JSONL of OTLP documents, one session a line (the Collector's file exporter;
streamed), and as one OTLP/JSON document (read whole; at most
`runner.importers.otel.shapes.MAX_DOCUMENT_BYTES`). A third file holds one session of
100,000 spans, which the importer reads and then skips with a warning (more model calls than
`runner.importers.otel.reader.MAX_SESSION_MODEL_CALLS`).

Each import runs in a fresh child process (``read_otel`` + ``write_import`` into a temporary
folder), which reports its own wall time and peak RSS (``VmHWM`` of ``/proc/self/status``:
``ru_maxrss`` of a child would include the parent's peak at fork on Linux).

Usage: ``.venv/bin/python bench/bench_otel_import.py [--spans 100000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SESSION_SPANS = 100
T0 = 1_790_000_000_000_000_000


def _kv(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in attrs.items():
        if isinstance(value, int):
            out.append({"key": key, "value": {"intValue": str(value)}})
        else:
            out.append({"key": key, "value": {"stringValue": value}})
    return out


def _span(
    trace: str, sid: int, parent: int | None, name: str, start: int, attrs: dict[str, Any]
) -> dict[str, Any]:
    span = {
        "traceId": trace,
        "spanId": f"{sid:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(T0 + start),
        "endTimeUnixNano": str(T0 + start + 900),
        "attributes": _kv(attrs),
        "status": {},
    }
    if parent is not None:
        span["parentSpanId"] = f"{parent:016x}"
    return span


def session(index: int, spans: int) -> list[dict[str, Any]]:
    """One session of ``spans`` spans (see the module docstring)."""
    trace = f"{index + 1:032x}"
    base = index * spans * 10 + 1
    conv = f"conv-{index}"
    root = base
    out = [
        _span(
            trace,
            root,
            None,
            "invoke_agent bench",
            0,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conv},
        )
    ]
    sid, t, n = base + 1, 1000, 1
    tools = json.dumps(
        [
            {
                "type": "function",
                "name": "lookup",
                "description": "Look up.",
                "parameters": {"type": "object"},
            }
        ]
    )
    while len(out) + 3 <= spans:
        call_id = f"call_{n}"
        output = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": f"step {n}"},
                        {
                            "type": "tool_call",
                            "id": call_id,
                            "name": "lookup",
                            "arguments": {"q": n},
                        },
                    ],
                }
            ]
        )
        inputs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "go"}]}])
        usage = {"gen_ai.usage.input_tokens": 100 + n, "gen_ai.usage.output_tokens": 10}
        out.append(
            _span(trace, sid, root, "call_llm", t, {"gen_ai.request.model": "gpt-4.1", **usage})
        )
        out.append(
            _span(
                trace,
                sid + 1,
                sid,
                "chat gpt-4.1",
                t + 10,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4.1",
                    "gen_ai.response.model": "gpt-4.1-2025-04-14",
                    "gen_ai.conversation.id": conv,
                    "gen_ai.input.messages": inputs,
                    "gen_ai.output.messages": output,
                    "gen_ai.tool.definitions": tools,
                    **usage,
                },
            )
        )
        out.append(
            _span(
                trace,
                sid + 2,
                root,
                "execute_tool lookup",
                t + 1000,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps({"q": n}),
                    "gen_ai.tool.call.result": json.dumps({"answer": n * 7}),
                },
            )
        )
        sid, t, n = sid + 3, t + 2000, n + 1
    while len(out) < spans:  # pad with a final answer span
        out.append(
            _span(
                trace,
                sid,
                root,
                "chat gpt-4.1",
                t,
                {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1"},
            )
        )
        sid, t = sid + 1, t + 1000
    return out


def _doc(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
            }
        ]
    }


def generate(folder: Path, total: int) -> dict[str, Path]:
    """Write the three input files; returns their paths by case name."""
    jsonl = folder / "sessions.jsonl"
    whole = folder / "sessions.json"
    one = folder / "one-session.jsonl"
    sessions = [session(i, SESSION_SPANS) for i in range(total // SESSION_SPANS)]
    with jsonl.open("w", encoding="utf-8") as out:
        for spans in sessions:
            out.write(json.dumps(_doc(spans)) + "\n")
    all_spans: Iterator[dict[str, Any]] = (s for spans in sessions for s in spans)
    whole.write_text(json.dumps(_doc(list(all_spans))), encoding="utf-8")
    with one.open("w", encoding="utf-8") as out:
        for span in session(0, total):
            out.write(json.dumps(span) + "\n")
    return {"jsonl (streamed)": jsonl, "one document": whole, "one 100k-span session": one}


CHILD = """
import json, logging, resource, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from runner.cli.log import configure_logging
configure_logging("json", logging.WARNING)
from runner.importers.otel import read_otel
from runner.importers.output import write_import
from runner.errors import InputError
def rss():  # VmHWM: this process's own peak (ru_maxrss would include the parent's at fork)
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
try:
    source = read_otel([Path(sys.argv[2])])
except InputError as exc:
    print(json.dumps({"read_s": time.perf_counter() - start, "read_peak_rss_mb": rss(),
                      "error": str(exc)[-300:]}))
    sys.exit(0)
read_s, read_rss = time.perf_counter() - start, rss()
with tempfile.TemporaryDirectory() as out:
    report = write_import(source, Path(out) / "imp", {})
print(json.dumps({"read_s": read_s, "total_s": time.perf_counter() - start, "runs": report["runs"],
                  "calls": report["calls"]["total"], "warnings": len(report["notes"]),
                  "read_peak_rss_mb": read_rss, "peak_rss_mb": rss()}))
"""


def measure(path: Path) -> dict[str, Any]:
    """Import ``path`` in a fresh child process; its timings and peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    baseline = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "import runner.importers.otel, runner.importers.output; "
            "print(next(int(x.split()[1]) / 1024 for x in open('/proc/self/status') "
            "if x.startswith('VmHWM:')))",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    results: dict[str, Any] = {"spans": args.spans, "baseline_rss_mb": float(baseline.stdout)}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        files = generate(Path(tmp), args.spans)
        results["generate_s"] = time.perf_counter() - start
        for name, path in files.items():
            got = measure(path)
            got["file_mb"] = path.stat().st_size / 1e6
            if "read_s" in got:
                got["read_spans_per_s"] = args.spans / got["read_s"]
            if "total_s" in got:
                got["spans_per_s"] = args.spans / got["total_s"]
            results[name] = got
    if args.json:
        print(json.dumps(results, indent=2))
        return
    base = results["baseline_rss_mb"]
    print(f"{args.spans} spans; interpreter + importer modules alone: {base:.0f} MB RSS")
    for name in files:
        got = results[name]
        head = f"{name:24} {got['file_mb']:6.1f} MB"
        if "failed" in got:
            print(f"{head}  the import failed: {got['failed'][:300]}")
        elif "total_s" not in got:
            print(
                f"{head}  read {got['read_spans_per_s']:7.0f} spans/s, peak RSS "
                f"{got['read_peak_rss_mb']:5.0f} MB; not imported: {got['error'][-160:]}"
            )
        else:
            print(
                f"{head}  {got['spans_per_s']:7.0f} spans/s end to end (read "
                f"{got['read_spans_per_s']:7.0f}); peak RSS {got['peak_rss_mb']:5.0f} MB (after "
                f"reading {got['read_peak_rss_mb']:5.0f}); runs {got['runs']}, calls "
                f"{got['calls']}, warnings {got['warnings']}"
            )


if __name__ == "__main__":
    main()
