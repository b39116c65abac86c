"""What ``runner.sdk.record``'s MCP relay costs an agent: round trips with and without it.

    .venv/bin/python bench/bench_sdk_mcp.py [--requests 2000] [--rounds 3]

A standard-library MCP stdio server answers ``tools/call`` at once; a client sends the
requests one at a time (send, read the answer) over ``subprocess.Popen`` pipes, as an MCP
client does. Measured in the same run, alternating: the baseline (no recorder) and ours (inside
``runner.sdk.record`` with a workflow naming the server: every request relayed by
`runner.sdk.mcpstdio` and recorded as a call line). Prints requests/s of each, their ratio
(ours / baseline) and the time the relay adds to one round trip, per round, then the medians;
compare ratios, not figures (the machine is shared). The trace is written to a temporary
folder and removed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner import sdk

SERVER = """
import json, sys
out = sys.stdout.buffer
for raw in sys.stdin.buffer:
    message = json.loads(raw)
    result = {"content": [{"type": "text", "text": "value of " + message["params"]["name"]}]}
    out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())
    out.write(b"\\n")
    out.flush()
"""


def _round_trips(folder: Path, requests: int) -> float:
    """Seconds for ``requests`` sequential tools/call round trips."""
    process = subprocess.Popen(
        [sys.executable, "server.py"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=folder
    )
    assert process.stdin is not None and process.stdout is not None
    started = time.perf_counter()
    for ident in range(requests):
        request = {"jsonrpc": "2.0", "id": ident, "method": "tools/call"}
        request["params"] = {"name": "lookup", "arguments": {"key": str(ident)}}
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.wait()
    return elapsed


def main() -> None:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    ratios, added = [], []
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        (folder / "server.py").write_text(SERVER, encoding="utf-8")
        workflow = folder / "wf.yaml"
        command = json.dumps([sys.executable, "server.py"])
        workflow.write_text(f"tools:\n  - mcp: {{command: {command}, prefix: kv}}\n")
        _round_trips(folder, 200)  # warm-up: the interpreter's start, caches; not counted
        for round_ in range(options.rounds):
            base = _round_trips(folder, options.requests)
            with sdk.record(folder / "t.jsonl", workflow=str(workflow)):
                ours = _round_trips(folder, options.requests)
            calls = len((folder / "t.jsonl").read_text().splitlines()) - 2
            assert calls == options.requests, calls
            ratios.append(base / ours)
            added.append((ours - base) / options.requests * 1e6)
            print(
                f"round {round_ + 1}: baseline {options.requests / base:,.0f} req/s, "
                f"recorded {options.requests / ours:,.0f} req/s, ratio {base / ours:.2f}, "
                f"{added[-1]:.0f} us added per round trip"
            )
    print(
        f"median ratio (recorded / baseline throughput): {statistics.median(ratios):.2f}; "
        f"median time added per round trip: {statistics.median(added):.0f} us"
    )


if __name__ == "__main__":
    main()
