"""The cost of redaction per recorded call, on real public traces.

The τ²-bench retail results and the OpenTelemetry agent sessions of the realdata folder
(tests/support/realdata.py: ``SANDBOX_REPLAY_REALDATA_DIR``) are imported without redaction into a
scratch folder; then every line of every trace is redacted as the host's trace writer does
(`runner.trace.redact.Redactor.redact`: the built-in detectors, the default header names and
one SSN-shaped pattern, a fresh key per trace), timed per line with ``time.perf_counter_ns``.

    .venv/bin/python bench/bench_redaction.py [--repeat 3] [--json]

Each source is measured as it is (it holds nothing the rules find) and with an SSN-shaped value
added to each trace's first tool result (``+secret``: from then on a secret is known, so every
later line is searched for it and rebuilt). Prints per source: call lines, bytes per call, µs
per call (mean, median, p95, max) and, as the baseline, µs per call of writing the same line
(`runner.trace.writer.dumps_line`), which every writer pays anyway.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.importers.output import write_import  # noqa: E402
from runner.trace.redact import Redactor  # noqa: E402
from runner.trace.writer import dumps_line  # noqa: E402
from tests.support.realdata import realdata_dir  # noqa: E402

RULES = {"patterns": [{"name": "ssn", "regex": r"\b\d{3}-\d{2}-\d{4}\b"}]}
OFF = {"detectors": [], "headers": []}


def _traces(kind: str, out: Path) -> list[list[dict[str, Any]]]:
    data = realdata_dir()
    if kind == "tau2":
        from runner.importers.tau2 import read_tau2

        source = read_tau2(data / "tau2-retail" / "results.json", None)
    else:
        from runner.importers.otel import read_otel

        files = sorted((data / "otel-agentevals" / "adk_py").rglob("*.json"))
        source = read_otel([f for f in files if f.name != "MANIFEST.json"], None)
    write_import(source, out, {}, redaction_rules=OFF)
    return [
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for path in sorted((out / "traces").glob("*.jsonl"))
    ]


def _with_secret(traces: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The traces with an SSN-shaped value in the body of their first tool call."""
    out = []
    for lines in traces:
        lines = json.loads(json.dumps(lines))
        for line in lines:
            if line.get("type") == "call" and "args" in line and isinstance(line.get("body"), str):
                line["body"] = line["body"] + " ssn 078-05-1120"
                break
        out.append(lines)
    return out


def _measure(traces: list[list[dict[str, Any]]], repeat: int) -> dict[str, Any]:
    redact_ns: list[int] = []
    dump_ns: list[int] = []
    sizes: list[int] = []
    redactions = 0
    for _ in range(repeat):
        for lines in traces:
            redactor = Redactor(RULES)
            for line in lines:
                if line.get("type") != "call":
                    redactor.redact(line)
                    continue
                started = time.perf_counter_ns()
                redactor.redact(line)
                redact_ns.append(time.perf_counter_ns() - started)
                started = time.perf_counter_ns()
                text = dumps_line(line)
                dump_ns.append(time.perf_counter_ns() - started)
                sizes.append(len(text))
            redactions += redactor.redactions
    ordered = sorted(redact_ns)
    return {
        "traces": len(traces),
        "calls": len(redact_ns) // repeat,
        "bytes_per_call_mean": round(statistics.mean(sizes)),
        "redact_us_mean": round(statistics.mean(redact_ns) / 1000, 1),
        "redact_us_median": round(statistics.median(redact_ns) / 1000, 1),
        "redact_us_p95": round(ordered[int(len(ordered) * 0.95)] / 1000, 1),
        "redact_us_max": round(ordered[-1] / 1000, 1),
        "dumps_line_us_mean": round(statistics.mean(dump_ns) / 1000, 1),
        "redactions_found": redactions // repeat,
    }


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for kind in ("tau2", "otel"):
            traces = _traces(kind, Path(scratch) / kind)
            results[kind] = _measure(traces, args.repeat)
            results[kind + "+secret"] = _measure(_with_secret(traces), args.repeat)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for kind, figures in results.items():
        print(kind, " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
