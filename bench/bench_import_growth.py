"""Benchmark: `import tau2` and `import openai-messages` grow linearly.

Each model turn's request holds the whole conversation so far; written whole, a trace grows
with the square of its turns (the review's 2.3 MB τ² file made an 887 MB trace and 3.5 GB of
RSS; a ~6 MB file did not finish in 120 s). Importers now write a turn's history by reference
(``messages_from``, docs/trace-format.md). This bench makes one long conversation per file, in
sizes that double (the τ² fixture's shape: a user message, an assistant message with a tool
call, the tool's result, an assistant answer, each text about 300 bytes, repeated), imports
each in a fresh child process and prints its wall time, peak RSS (``VmHWM``) and trace bytes,
with the ratio to the smallest file: linear growth doubles them (ratio 2, 4, 8), quadratic
growth quadruples them.

Usage: ``.venv/bin/python bench/bench_import_growth.py [--mb 0.75 1.5 3 6] [--json]``.
Timings are noise on a shared machine: read the ratios, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEXT = "lorem ipsum dolor sit amet " * 11  # ~300 bytes


def _block(n: int) -> list[dict[str, Any]]:
    """One exchange of the conversation, τ² style (tool call, result, answer, user reply)."""
    call = {"id": f"call_{n}", "name": "get_order", "arguments": {"order_id": f"#W{n}"}}
    usage = {"completion_tokens": 10, "prompt_tokens": 100 + n}
    return [
        {"role": "user", "content": f"{n}: {TEXT}", "turn_idx": 4 * n, "usage": usage},
        {
            "role": "assistant",
            "content": f"checking {n}",
            "tool_calls": [{**call, "requestor": "assistant"}],
            "turn_idx": 4 * n + 1,
            "usage": usage,
        },
        {
            "id": f"call_{n}",
            "role": "tool",
            "content": json.dumps({"order": n, "note": TEXT}),
            "error": False,
            "turn_idx": 4 * n + 2,
        },
        {"role": "assistant", "content": f"{n}: {TEXT}", "turn_idx": 4 * n + 3, "usage": usage},
    ]


def tau2_file(path: Path, target_bytes: int) -> int:
    """A τ² results file of about ``target_bytes`` holding one long simulation."""
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "Hi! How can I help you today?", "turn_idx": 0}
    ]
    n = 0
    size = 0
    while size < target_bytes:
        block = _block(n)
        messages.extend(block)
        size += len(json.dumps(block))
        n += 1
    doc = {
        "info": {
            "user_info": {"llm": "gpt-4.1", "global_simulation_guidelines": "Play the customer."},
            "agent_info": {"llm": "gpt-4.1"},
            "environment_info": {"domain_name": "bench", "policy": "Be helpful."},
        },
        "tasks": [{"id": "1", "user_scenario": {"instructions": {"reason_for_call": "x"}}}],
        "simulations": [
            {
                "id": "sim-1",
                "task_id": "1",
                "seed": 1,
                "start_time": "2025-08-01T10:00:00",
                "termination_reason": "user_stop",
                "reward_info": {"reward": 1.0},
                "messages": messages,
            }
        ],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return len(messages)


def openai_file(path: Path, target_bytes: int) -> int:
    """An OpenAI chat-messages JSONL file of one conversation of about ``target_bytes``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be helpful."}]
    n = 0
    size = 0
    while size < target_bytes:
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "get_order", "arguments": json.dumps({"order_id": n})},
        }
        block = [
            {"role": "user", "content": f"{n}: {TEXT}"},
            {"role": "assistant", "content": f"checking {n}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": json.dumps({"note": TEXT})},
            {"role": "assistant", "content": f"{n}: {TEXT}"},
        ]
        messages.extend(block)
        size += len(json.dumps(block))
        n += 1
    tools = [
        {
            "type": "function",
            "function": {"name": "get_order", "description": "Get.", "parameters": {}},
        }
    ]
    line = json.dumps({"id": "c1", "tools": tools, "messages": messages})
    path.write_text(line + "\n", encoding="utf-8")
    return len(messages)


CHILD = """
import json, logging, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from runner.cli.log import configure_logging
configure_logging("json", logging.WARNING)
from runner.importers.output import write_import
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
start = time.perf_counter()
if sys.argv[2] == "tau2":
    from runner.importers.tau2 import read_tau2
    source = read_tau2(Path(sys.argv[3]))
else:
    from runner.importers.openai_messages import read_openai_messages
    source = read_openai_messages(Path(sys.argv[3]))
with tempfile.TemporaryDirectory() as out:
    report = write_import(source, Path(out) / "imp", {})
    trace_bytes = sum(p.stat().st_size for p in (Path(out) / "imp" / "traces").glob("*.jsonl"))
print(json.dumps({"s": time.perf_counter() - start, "rss_mb": rss(),
                  "trace_mb": trace_bytes / 1e6, "calls": report["calls"]["total"]}))
"""


def measure(kind: str, path: Path) -> dict[str, Any]:
    """Import ``path`` in a fresh child process: seconds, peak RSS, trace bytes."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), kind, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[0.75, 1.5, 3.0, 6.0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {"tau2": [], "openai-messages": []}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, make in (("tau2", tau2_file), ("openai-messages", openai_file)):
            for mb in args.mb:
                path = Path(tmp) / f"{kind}-{mb}.json"
                messages = make(path, int(mb * 1e6))
                got = measure(kind, path)
                got.update(input_mb=path.stat().st_size / 1e6, messages=messages)
                results[kind].append(got)
                path.unlink()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for kind, rows in results.items():
        base = rows[0]
        print(f"import {kind}: one conversation per file; ratios to the first row")
        for row in rows:
            if "failed" in row:
                print(f"  {row['input_mb']:5.2f} MB input: failed: {row['failed'][:200]}")
                continue
            print(
                f"  {row['input_mb']:5.2f} MB input ({row['messages']:6} messages, x"
                f"{row['input_mb'] / base['input_mb']:4.1f}): {row['s']:6.2f} s (x"
                f"{row['s'] / base['s']:4.1f}), peak RSS {row['rss_mb']:6.0f} MB (x"
                f"{row['rss_mb'] / base['rss_mb']:4.1f}), trace {row['trace_mb']:7.2f} MB (x"
                f"{row['trace_mb'] / base['trace_mb']:4.1f})"
            )


if __name__ == "__main__":
    main()
