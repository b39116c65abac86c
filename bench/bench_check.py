"""Benchmark of the quick gate: ``sandbox-replay check`` wall time ÷ ``python -c pass``.

``check examples/helpdesk/v1.yaml`` (the help-desk workflow: read from source, nothing run, no
engine) is timed in fresh processes against a bare ``python -c pass`` of the same interpreter,
interleaved run by run so that machine load hits both alike; the medians of N runs are divided.
``check`` keeps no cache of its own, so "warm" and "cold" are Python's bytecode cache:

- **warm**: the ``__pycache__`` of every imported module filled (one run without
  ``PYTHONDONTWRITEBYTECODE`` first), the usual state of an installed tool;
- **cold**: every run with an empty ``PYTHONPYCACHEPREFIX`` and ``PYTHONDONTWRITEBYTECODE=1``, so
  every module of runner and of its libraries is compiled from source (a fresh checkout, a CI
  job without cache). ``python -c pass`` compiles nothing either way.

CPU time (user + system of the child, ``RUSAGE_CHILDREN``) is printed beside the wall time:
on a loaded machine it is the steadier figure. The closing line states the target, (d) ≤ 15
warm, and whether it was met. No test asserts a time; ``tests/unit/cli/test_cli_gate.py`` pins
what ``check`` leaves unimported instead.

Usage: ``.venv/bin/python bench/bench_check.py [--runs 11] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPDESK = ROOT / "examples" / "helpdesk"
TARGET_WARM = 15.0


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process (its output discarded; exit code 0 or 3)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=HELPDESK, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]!r}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _env(cold_prefix: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cold_prefix is None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = cold_prefix
    return env


def measure(runs: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU of ``check`` and ``python -c pass``, warm and cold, and the ratios."""
    check = [sys.executable, "-m", "runner", "check", "v1.yaml"]
    bare = [sys.executable, "-c", "pass"]
    _timed(check, _env(None))  # fills the bytecode cache: the warm state
    out: dict[str, dict[str, float]] = {}
    for state in ("warm", "cold"):
        samples: dict[str, list[tuple[float, float]]] = {"check": [], "pass": []}
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="bench-check-pyc-") as prefix:
                env = _env(None if state == "warm" else prefix)
                samples["pass"].append(_timed(bare, env))
                samples["check"].append(_timed(check, env))
        row: dict[str, float] = {}
        for name, pairs in samples.items():
            row[f"{name}_wall_ms"] = 1000 * statistics.median(w for w, _ in pairs)
            row[f"{name}_cpu_ms"] = 1000 * statistics.median(c for _, c in pairs)
        row["wall_ratio"] = row["check_wall_ms"] / row["pass_wall_ms"]
        row["cpu_ratio"] = row["check_cpu_ms"] / row["pass_cpu_ms"]
        out[state] = row
    return out


def main() -> None:
    """Print the table and the closing line (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="runs of each, per state")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.runs)
    met = result["warm"]["wall_ratio"] <= TARGET_WARM
    if args.json:
        print(json.dumps({"runs": args.runs, **result, "target_warm": TARGET_WARM, "met": met}))
        return
    print(f"(d) check examples/helpdesk/v1.yaml vs python -c pass, median of {args.runs} runs")
    print(
        f"{'state':<6}{'check wall':>12}{'pass wall':>11}{'ratio':>8}"
        f"{'check cpu':>11}{'pass cpu':>10}{'ratio':>8}"
    )
    for state, row in result.items():
        print(
            f"{state:<6}{row['check_wall_ms']:>10.0f}ms{row['pass_wall_ms']:>9.0f}ms"
            f"{row['wall_ratio']:>8.1f}{row['check_cpu_ms']:>9.0f}ms{row['pass_cpu_ms']:>8.0f}ms"
            f"{row['cpu_ratio']:>8.1f}"
        )
    warm, cold = result["warm"]["wall_ratio"], result["cold"]["wall_ratio"]
    print(
        f"(d) target: check wall / python -c pass <= {TARGET_WARM:g} warm: "
        f"{warm:.1f} warm, {cold:.1f} cold: {'met' if met else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
