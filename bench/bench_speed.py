"""The three speed figures in one run: namespace ÷ Docker, Docker ÷ bare containers, first call.

```
.venv/bin/python bench/bench_speed.py [--tasks 60] [--rounds 3] [--json]
```

Each round measures, in this order, on the same engine and the same trivial one-step workflow
(bench/trivial/trivial.yaml) through the whole ``submit`` path (`runner.submit.job.prepare` and
`execute`: plan, tool description, job, ledger, reservations, episodes, traces, grading):

(c) namespace-backend episodes/s (its default start: the zygote, `runner.runtime.zygote`) ÷
    Docker-backend episodes/s (its default: the warm pool), both at concurrency 2. Targets: ≥ 10
    (stretch ≥ 15).
(a) Docker-backend episodes/s (pooled) ÷ bare SDK containers (``create`` + ``start`` +
    ``wait`` + ``remove`` of ``python3 -c pass`` with the backend's own create arguments,
    `bench_submit.baseline`) at concurrency 4. Target: ≥ 0.8.
(f) schedule → first tool call on the namespace backend, median and p95: from the scheduler's
    worker picking the run up (after its reservation) to the host reading the sandbox's first
    ``call`` message (`bench_submit._FirstCall`), over a namespace submit of the same tasks at
    concurrency 1 (a latency, not a queue: at 2 a trivial run outpaces the warm pool's refills
    on 2 shared cores, and a run then waits for a sandbox being made; the runs of (c) are
    printed too). Target: median ≤ 20 ms.

The machine is shared: the load average before and after, and the CPU the rest of the machine
used in the 3 s before each round (``others``: busy cores from /proc/stat while this process
idles), are printed beside each round. Compare the ratios of one round; the closing lines give
the median over rounds of each figure, its target and whether it was met. No test asserts a time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_submit import _FirstCall, baseline, ours  # noqa: E402

from runner.backends.docker import DockerBackend  # noqa: E402
from runner.backends.namespace import NamespaceBackend  # noqa: E402
from runner.cli.log import configure_logging  # noqa: E402
from runner.settings import Settings  # noqa: E402
from runner.submit.job import execute, prepare  # noqa: E402
from runner.submit.options import SubmitOptions  # noqa: E402

HERE = ROOT / "bench" / "trivial"
TARGET_C, STRETCH_C, TARGET_A, TARGET_F_MS = 10.0, 15.0, 0.8, 20.0


def _busy_s() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def others_busy_cores(window_s: float = 3.0) -> float:
    """Busy cores of the whole machine over ``window_s`` while this process sleeps."""
    before = _busy_s()
    time.sleep(window_s)
    return (_busy_s() - before) / window_s


def submit_rate(
    image: str,
    tasks: Path,
    state: Path,
    concurrency: int,
    backend: Any,
    probe: _FirstCall | None,
    pools: list[Any] | None = None,
) -> float:
    """Episodes/s of one submit of ``tasks`` (prepare + execute) on ``backend()``.

    ``pools`` gets the job's warm pool, when it makes one (its ``stats()``).
    """
    settings = Settings(state_dir=state, image=image, concurrency=concurrency, log_format="json")
    options = SubmitOptions(
        variants=(HERE / "trivial.yaml",),
        names=(None,),
        tasks=tasks,
        cwd=HERE,
        concurrency=concurrency,
    )

    def pooling_backend() -> Any:  # the job's backend; its own warm pool, if it makes one, seen
        inner = backend()
        real_with_pool = inner.with_pool

        def with_pool(**kwargs: Any) -> Any:
            made = real_with_pool(**kwargs)
            if pools is not None and hasattr(made, "pool"):
                pools.append(made.pool)
            return probe.wrap(made) if probe is not None else made

        inner.with_pool = with_pool
        return inner

    started = time.monotonic()
    plan = prepare(options, settings)
    if probe is not None:
        with probe.patched():
            result = execute(
                plan, options, settings, backend_factory=pooling_backend, handle_signals=False
            )
    else:
        result = execute(
            plan, options, settings, backend_factory=pooling_backend, handle_signals=False
        )
    elapsed = time.monotonic() - started
    report = result.report.to_json() if result.report is not None else {}
    assert report.get("runs_by_status") == {"succeeded": len(plan.pairs)}, report
    return len(plan.pairs) / elapsed


def one_round(
    image: str, tasks: Path, tmp: Path, index: int, client: Any, runs: int
) -> dict[str, Any]:
    """(c), (a) and (f) once; see the module docstring."""
    others = others_busy_cores()
    load = os.getloadavg()
    ns_root = tmp / "namespace"
    probe = _FirstCall()
    pools: list[Any] = []
    namespace = submit_rate(
        image, tasks, tmp / f"ns-{index}", 2, lambda: NamespaceBackend(ns_root), probe, pools
    )
    probe1 = _FirstCall()
    pools1: list[Any] = []
    namespace1 = submit_rate(
        image, tasks, tmp / f"ns1-{index}", 1, lambda: NamespaceBackend(ns_root), probe1, pools1
    )
    docker2 = submit_rate(
        image, tasks, tmp / f"docker-{index}", 2, lambda: DockerBackend.connect(None), None
    )
    bare4 = baseline(client, image, runs, 4)
    docker4 = ours(image, tasks, tmp / f"docker4-{index}", 4, True)
    latencies, at2 = sorted(probe1.latencies), sorted(probe.latencies)
    return {
        "others_busy_cores": others,
        "load_before": load,
        "load_after": os.getloadavg(),
        "namespace_eps_c2": namespace,
        "docker_eps_c2": docker2,
        "c": namespace / docker2,
        "docker_eps_c4": docker4["runs_per_s"],
        "bare_runs_per_s_c4": bare4["runs_per_s"],
        "a": docker4["runs_per_s"] / bare4["runs_per_s"],
        "docker_cpu_ms_per_run_c4": {
            k: 1000 * v / docker4["runs"] for k, v in docker4["cpu"].items()
        },
        "bare_cpu_ms_per_run_c4": {k: 1000 * v / bare4["runs"] for k, v in bare4["cpu"].items()},
        "first_call_ms_median": 1000 * statistics.median(latencies),
        "first_call_ms_p95": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "namespace_eps_c1": namespace1,
        "first_call_ms_median_c2": 1000 * statistics.median(at2),
        "first_call_ms_p95_c2": 1000 * at2[min(len(at2) - 1, int(0.95 * len(at2)))],
        "namespace_pool": pools1[0].stats() if pools1 else None,
        "namespace_pool_c2": pools[0].stats() if pools else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--image", default=os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging("json", level=logging.WARNING)
    client = docker.from_env(timeout=120)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        tasks = tmp / "tasks.jsonl"
        tasks.write_text(
            "".join(
                json.dumps({"task_id": f"t{i:03d}", "input": {"n": str(i)}}) + "\n"
                for i in range(args.tasks)
            )
        )
        NamespaceBackend(tmp / "namespace").rootfs(args.image)  # the one export, before the clock
        for index in range(args.rounds):
            found = one_round(args.image, tasks, tmp, index, client, args.tasks)
            rounds.append(found)
            if not args.json:
                _print_round(index, found)
    if args.json:
        print(json.dumps({"tasks": args.tasks, "rounds": rounds}, indent=2))
        return
    for line in verdicts(rounds):
        print(line)


def _print_round(index: int, r: dict[str, Any]) -> None:
    print(
        f"round {index + 1}: others busy {r['others_busy_cores']:.2f} of {os.cpu_count()} cores,"
        f" load {r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
    )
    print(
        f"  (c) namespace {r['namespace_eps_c2']:.2f} / docker {r['docker_eps_c2']:.2f}"
        f" episodes/s at concurrency 2 = {r['c']:.2f}"
    )
    print(
        f"  (a) docker {r['docker_eps_c4']:.2f} / bare containers {r['bare_runs_per_s_c4']:.2f}"
        f" runs/s at concurrency 4 = {r['a']:.2f}"
    )
    cpu, bare = r["docker_cpu_ms_per_run_c4"], r["bare_cpu_ms_per_run_c4"]
    print(
        "      CPU ms/run (docker / bare): "
        + ", ".join(f"{k} {cpu[k]:.0f} / {bare[k]:.0f}" for k in cpu)
    )
    print(
        f"  (f) namespace schedule -> first tool call at concurrency 1"
        f" ({r['namespace_eps_c1']:.2f} episodes/s): median {r['first_call_ms_median']:.1f} ms,"
        f" p95 {r['first_call_ms_p95']:.1f} ms"
        + (
            f" (warm pool: {r['namespace_pool']['assigned']} runs handed a warm sandbox,"
            f" {r['namespace_pool']['cold']} started cold)"
            if r["namespace_pool"]
            else ""
        )
    )
    print(
        f"      at concurrency 2 (the runs of (c)): median {r['first_call_ms_median_c2']:.1f} ms,"
        f" p95 {r['first_call_ms_p95_c2']:.1f} ms"
    )
    sys.stdout.flush()


def verdicts(rounds: list[dict[str, Any]]) -> list[str]:
    """The closing lines: each figure's median over the rounds, its target, met or not."""

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    def said(ok: bool) -> str:
        return "met" if ok else "NOT met"

    c, a, f = median("c"), median("a"), median("first_call_ms_median")
    spread = ", ".join(f"{r['c']:.2f}" for r in rounds)
    return [
        f"target (c) namespace / docker >= {TARGET_C:g} (stretch {STRETCH_C:g}) at concurrency 2:"
        f" {c:.2f} ({said(c >= TARGET_C)}; stretch {said(c >= STRETCH_C)}; rounds {spread})",
        f"target (a) docker / bare containers >= {TARGET_A} at concurrency 4: {a:.2f}"
        f" ({said(a >= TARGET_A)}; rounds {', '.join(f'{r[chr(97)]:.2f}' for r in rounds)})",
        f"target (f) namespace schedule -> first tool call median <= {TARGET_F_MS:g} ms"
        " (concurrency 1):"
        f" {f:.1f} ms ({said(f <= TARGET_F_MS)}; p95 {median('first_call_ms_p95'):.1f} ms)",
    ]


if __name__ == "__main__":
    main()
