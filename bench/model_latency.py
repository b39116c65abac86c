"""Benchmark: runs that wait on a model API, at concurrency far above the CPU count.

A fake OpenAI server on loopback (tests/support/fake_openai.py) answers every Chat Completions call
after a fixed delay; ``submit`` runs N tasks (default 200) of one agent step with two model calls
(a call of the pure ``bench.noop`` tool, then an answer: bench/latency/agent.yaml, under
bench/latency/policy.yaml: no sandbox-seconds ceiling to bound the runs at once) through the
whole path (`runner.submit.job.execute`: plan, admission, reservations, hardened containers,
the openai provider, the rate limiter, traces, ledger, grading, report). Printed per
concurrency level (default 4, 32, 128):

- wall time ÷ the ideal, where ideal = runs × model turns × latency ÷ concurrency + runs ×
  (engine CPU per container) ÷ cores: the model waits overlap perfectly, and the engine's CPU
  work per container is spread over every core. The engine CPU per container is measured in
  the same run: the machine's busy time during the level (/proc/stat), less this process's,
  less the other sessions' busy rate of the 5 s before the level times the wall time, ÷ runs
  (never below what the counters below see: when other sessions keep the machine busy the
  difference says nothing); that includes the ``containerd-shim`` and ``runc`` work of each
  container, which no per-process counter catches (shims are re-parented to PID 1).
  ``ideal_counted_s`` uses only what per-process counters see (dockerd + containerd + the
  containers' cgroup): a lower bound of the engine's work, so ``wall_over_ideal_counted`` is
  an upper bound of the ratio;
- host RSS and threads at peak (this process: ``VmHWM``, reset per level, and the most
  ``Threads`` sampled; the fake model runs in a process of its own, so these are the host's);
- the ledger check: every run charged once (one ``run`` charge per run key, settled, and two
  ``model_call`` charges per run).

``--idle-probe K`` first holds K sandboxes waiting on a slow model (30 s a call) and measures
what each waiting sandbox costs the host: threads, RSS and CPU of this process per sandbox.

Usage: ``SANDBOX_REPLAY_MEMORY_MB=96 .venv/bin/python bench/model_latency.py [--runs 200]
[--latency 1.0] [--concurrency 4,32,128] [--idle-probe 32] [--json]``. The machine is shared:
the load average is printed with each level (DOCKER-NOTES.md: compare ratios in one run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_submit import CpuMeter  # noqa: E402

from runner.backends.docker import DockerBackend  # noqa: E402
from runner.cli.log import configure_logging  # noqa: E402
from runner.ledger import Ledger  # noqa: E402
from runner.settings import Settings  # noqa: E402
from runner.submit.job import execute, prepare  # noqa: E402
from runner.submit.options import SubmitOptions  # noqa: E402
from tests.support.fake_openai import FakeOpenAI, serve  # noqa: E402

HERE = Path(__file__).resolve().parent / "latency"
MODEL_TURNS = 2


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    """First turn: call bench.noop; after the tool's answer: the final text."""
    if any(m.get("role") == "tool" for m in request.get("messages") or []):
        return {"role": "assistant", "content": "done"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bench.noop", "arguments": json.dumps({"value": "x"})},
            }
        ],
    }


class Model(FakeOpenAI):
    """The fake model, counting the calls it is holding (waiting sandboxes) in shared memory."""

    def __init__(self, delay_s: float, inflight: Any, peak: Any) -> None:
        super().__init__(delay_s=delay_s, answer=_answer)
        self.held = inflight
        self.peak = peak

    def handle(self, raw: bytes, headers: dict[str, str], path: str = "") -> tuple[int, bytes]:
        with self.held.get_lock():
            self.held.value += 1
            self.peak.value = max(self.peak.value, self.held.value)
        try:
            return super().handle(raw, headers, path or "/v1/chat/completions")
        finally:
            with self.held.get_lock():
                self.held.value -= 1


def _serve_model(delay_s: float, inflight: Any, peak: Any, conn: Any) -> None:
    """The child process: serve the fake model until the parent says stop."""
    with serve(Model(delay_s, inflight, peak)) as model:
        conn.send(model.url)
        conn.recv()


class ModelProcess:
    """The fake model in a process of its own, so that this process's figures are the host's.

    Attributes:
        url: its ``/v1`` base URL.
        inflight: calls it holds now; peak_inflight: the most it held.
    """

    def __init__(self, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._held = ctx.Value("i", 0)
        self._peak = ctx.Value("i", 0)
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve_model, args=(delay_s, self._held, self._peak, child), daemon=True
        )
        self.url = ""

    @property
    def inflight(self) -> int:
        return int(self._held.value)

    @property
    def peak_inflight(self) -> int:
        return int(self._peak.value)

    def __enter__(self) -> ModelProcess:
        self._proc.start()
        self.url = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._proc.join(10)


def _status() -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return out


def _machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Sampler:
    """Samples this process (threads, RSS, CPU) and the model's held calls every 0.1 s."""

    def __init__(self, model: ModelProcess) -> None:
        self.model = model
        self.samples: list[tuple[float, float, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            t = os.times()
            status = _status()
            self.samples.append(
                (
                    time.monotonic(),
                    t.user + t.system,
                    self.model.inflight,
                    status["Threads"],
                    status["VmRSS"],
                )
            )

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _tasks(folder: Path, runs: int) -> Path:
    path = folder / "tasks.jsonl"
    path.write_text(
        "".join(
            json.dumps({"task_id": f"t{i:04d}", "input": {"n": str(i)}}) + "\n" for i in range(runs)
        )
    )
    return path


def _submit(
    model: ModelProcess,
    folder: Path,
    runs: int,
    concurrency: int,
    image: str,
    memory_mb: int,
) -> tuple[Any, Any, Settings, float]:
    settings = Settings(
        state_dir=folder / "state",
        image=image,
        concurrency=concurrency,
        memory_mb=memory_mb,
        openai_base_url=model.url,
        openai_api_key="bench",
        log_format="json",
    )
    options = SubmitOptions(
        variants=(HERE / "agent.yaml",),
        names=(None,),
        tasks=_tasks(folder, runs),
        cwd=HERE,
        concurrency=concurrency,
        policy=str(HERE / "policy.yaml"),
    )
    started = time.monotonic()
    backend = DockerBackend.connect(settings.docker_host)
    plan = prepare(options, settings, engine=backend)
    result = execute(plan, options, settings, backend_factory=lambda: backend, handle_signals=False)
    return plan, result, settings, time.monotonic() - started


def _ledger_check(settings: Settings, job_id: str, runs: int) -> dict[str, Any]:
    """Every run charged once: one settled ``run`` charge per run key, two model calls each."""
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        rows = ledger.runs(job_id)
        charges = ledger.charges(job_id)
    run_charges = [c for c in charges if c.kind == "run"]
    keys = [c.run_key for c in run_charges]
    calls = [c for c in charges if c.kind == "model_call"]
    ok = (
        len(rows) == runs
        and all(r.status == "succeeded" and r.attempt == 1 for r in rows)
        and len(run_charges) == runs == len(set(keys))
        and all(c.state == "settled" for c in charges)
        and len(calls) == MODEL_TURNS * runs
    )
    return {
        "runs": len(rows),
        "run_charges": len(run_charges),
        "distinct_run_keys": len(set(keys)),
        "model_call_charges": len(calls),
        "all_settled": all(c.state == "settled" for c in charges),
        "charged_once": ok,
    }


def level(args: argparse.Namespace, concurrency: int, folder: Path) -> dict[str, Any]:
    """One concurrency level: wall ÷ ideal, peak RSS and threads, the ledger check."""
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM: this level's own peak
    load = os.getloadavg()
    before = _machine_busy_s()
    time.sleep(5.0)  # the machine's busy rate without this level: the other sessions'
    background = (_machine_busy_s() - before) / 5.0
    with ModelProcess(args.latency) as model, Sampler(model) as sampler:
        meter = CpuMeter()
        plan, result, settings, wall = _submit(
            model, folder, args.runs, concurrency, args.image, args.memory_mb
        )
        cpu = meter.delta()
    report = result.report or {}
    admitted = plan.concurrency
    cores = os.cpu_count() or 1
    # everything the machine did in the level but this process and the other sessions' rate
    ours = max(0.0, cpu["machine"] - cpu["host_process"] - background * wall)
    counted = cpu["engine"] + cpu["containers"]
    # on a machine the other sessions keep busy the difference says nothing: never below
    # what the per-process counters saw
    engine_per_run = max(ours, counted) / args.runs
    waits = args.runs * MODEL_TURNS * args.latency / admitted
    ideal = waits + args.runs * engine_per_run / cores
    lower = waits + counted / cores
    return {
        "concurrency_asked": concurrency,
        "concurrency_admitted": admitted,
        "bound": plan.capacity.describe() if plan.capacity else None,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "wall_over_ideal": round(wall / ideal, 2),
        "ideal_counted_s": round(lower, 2),
        "wall_over_ideal_counted": round(wall / lower, 2),
        "other_sessions_busy_cores": round(background, 2),
        "engine_cpu_ms_per_container": round(1000 * engine_per_run, 1),
        "cpu_ms_per_run": {k: round(1000 * v / args.runs, 1) for k, v in cpu.items()},
        "peak_rss_mb": round(_status()["VmHWM"] / 1024, 1),
        "peak_threads": max((s[3] for s in sampler.samples), default=0),
        "peak_model_calls_waiting": model.peak_inflight,
        "runs_by_status": report.get("runs_by_status"),
        "rate_limit_wait_s": report.get("rate_limit_wait_s"),
        "ledger": _ledger_check(settings, plan.job_id, args.runs),
        "loadavg_before": [round(x, 2) for x in load],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def idle_probe(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """What one sandbox waiting on a model costs this process: threads, RSS, CPU."""
    k = args.idle_probe
    folder.mkdir()
    before = _status()
    with ModelProcess(30.0) as model, Sampler(model) as sampler:
        _submit(model, folder, k, k, args.image, args.memory_mb)
    waiting = [s for s in sampler.samples if s[2] >= k]
    if len(waiting) < 2:
        return {"sandboxes": k, "error": "never were all sandboxes waiting at once"}
    (t0, c0, _, _, _), (t1, c1, _, _, _) = waiting[0], waiting[-1]
    threads = max(s[3] for s in waiting)
    rss = max(s[4] for s in waiting)
    return {
        "sandboxes": k,
        "window_s": round(t1 - t0, 1),
        "threads_per_sandbox": round((threads - before["Threads"]) / k, 2),
        "rss_kb_per_sandbox": round((rss - before["VmRSS"]) / k, 1),
        "cpu_ms_per_s_per_sandbox": round(1000 * (c1 - c0) / max(t1 - t0, 1e-9) / k, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--concurrency", default="4,32,128")
    parser.add_argument("--idle-probe", type=int, default=0, metavar="K")
    parser.add_argument(
        "--memory-mb", type=int, default=int(os.environ.get("SANDBOX_REPLAY_MEMORY_MB", "96"))
    )
    parser.add_argument(
        "--image", default=os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import logging

    configure_logging("json", level=logging.WARNING)
    out: dict[str, Any] = {"runs": args.runs, "latency_s": args.latency, "levels": {}}
    with tempfile.TemporaryDirectory() as tmp:
        if args.idle_probe:
            out["idle_probe"] = idle_probe(args, Path(tmp) / "idle")
            if not args.json:
                print(f"idle probe: {json.dumps(out['idle_probe'])}", flush=True)
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            folder = Path(tmp) / f"c{concurrency}"
            folder.mkdir()
            result = level(args, concurrency, folder)
            out["levels"][concurrency] = result
            if not args.json:
                print(
                    f"concurrency {concurrency} (admitted {result['concurrency_admitted']}):"
                    f" wall {result['wall_s']} s / ideal {result['ideal_s']} s ="
                    f" {result['wall_over_ideal']}; engine CPU"
                    f" {result['engine_cpu_ms_per_container']} ms/container; peak RSS"
                    f" {result['peak_rss_mb']} MB, threads {result['peak_threads']};"
                    f" ledger charged once: {result['ledger']['charged_once']};"
                    f" load {result['loadavg_before']} -> {result['loadavg_after']}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
