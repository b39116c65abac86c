"""Benchmark and check of the budget: ceilings that let a big job run and stop it at the line.

Three scenarios, each a real ``submit`` (`runner.submit.job.execute`: plan, admission, the
budget clock, hardened Docker containers, the openai provider against a loopback fake OpenAI
server that answers after a fixed delay, traces, ledger, grading, report) under the *default*
``shadow`` policy (timeout 300 s, sandbox-seconds ceiling 7,200, USD ceiling 10):

- ``scale``: ``--runs`` (200) model-bound runs of the latency benchmark's agent (two model turns
  of ``--latency`` s each, bench/latency/agent.yaml) at ``--concurrency`` (128). Target: exit 0,
  every run charged once (one settled ``run`` charge per run key, two model calls each), wall
  ≤ 2 × ideal, where ideal = runs × turns × latency ÷ admitted concurrency + runs × engine CPU
  per container ÷ cores (the engine CPU measured in the same run, as bench/model_latency.py
  does). On main the plan admitted 19 of 128 (bound by the sandbox-seconds ceiling) and the
  job stopped after 40 runs having charged 1.6 % of the ceiling.
- ``sandbox_s``: ``--tight-tasks`` (100) tasks of ~1-s runs (two turns of 0.5 s) at
  concurrency 16 with a sandbox-seconds ceiling of 40. Target: exit 4, charged ≤ 40 and ≥ 32,
  every pair not run listed with its reason.
- ``usd``: the same with a USD ceiling (``--ceiling-usd``, 0.05 by default: about 40 runs of
  the fake model's usage) instead. Target: exit 4, charged ≤ the ceiling and ≥ 80 % of it.

The fake model bills each call ``len(request JSON) // 2`` prompt tokens (never more than a byte
a token: a real provider cannot bill past the reservation's bound) and 300 completion tokens.

Usage: ``.venv/bin/python bench/budget.py [--scenarios scale,sandbox_s,usd] [--runs 200]
[--concurrency 128] [--memory-mb 96] [--no-baseline] [--json]``. The machine is shared: the
load average is printed with each scenario (DOCKER-NOTES.md). ``--memory-mb`` overrides the
policy's per-run memory (a setting, ``SANDBOX_REPLAY_MEMORY_MB``): at the policy's 512 MiB the
engine's memory admits fewer runs at once than 128 (the plan says so), at 96 it admits 128.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_submit import CpuMeter  # noqa: E402
from model_latency import _answer, _tasks  # noqa: E402

from runner.backends.docker import DockerBackend  # noqa: E402
from runner.cli.log import configure_logging  # noqa: E402
from runner.ledger import Ledger  # noqa: E402
from runner.settings import Settings  # noqa: E402
from runner.submit.job import execute, prepare  # noqa: E402
from runner.submit.options import CeilingFlags, SubmitOptions  # noqa: E402
from tests.support.fake_openai import FakeOpenAI, serve  # noqa: E402

HERE = ROOT / "bench" / "latency"
MODEL_TURNS = 2


def _usage(request: dict[str, Any]) -> tuple[int, int]:
    return len(json.dumps(request)) // 2, 300


def _serve(delay_s: float, conn: Any) -> None:
    with serve(FakeOpenAI(delay_s=delay_s, answer=_answer, usage=_usage)) as model:
        conn.send(model.url)
        conn.recv()


class Model:
    """The fake model in a process of its own (this process's CPU figures stay the host's)."""

    def __init__(self, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(delay_s, child), daemon=True)
        self.url = ""

    def __enter__(self) -> Model:
        self._proc.start()
        self.url = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._proc.join(10)


def _submit(
    folder: Path, model: Model, args: argparse.Namespace, runs: int, concurrency: int,
    ceiling: CeilingFlags, policy: str = "shadow",
) -> tuple[Any, Any, Settings, float]:  # fmt: skip
    settings = Settings(
        state_dir=folder / "state",
        image=args.image,
        concurrency=concurrency,
        memory_mb=args.memory_mb,
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
        policy=policy,
        replay_ceiling=ceiling,
    )
    started = time.monotonic()
    backend = DockerBackend.connect(settings.docker_host)
    plan = prepare(options, settings, engine=backend)
    result = execute(plan, options, settings, backend_factory=lambda: backend, handle_signals=False)
    return plan, result, settings, time.monotonic() - started


def _charges(settings: Settings, job_id: str) -> dict[str, Any]:
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        rows = ledger.runs(job_id)
        charges = ledger.charges(job_id)
        charged = ledger.totals(job_id)["replay"].charged
    runs = [c for c in charges if c.kind == "run"]
    keys = [c.run_key for c in runs]
    return {
        "runs": len(rows),
        "run_charges": len(runs),
        "distinct_run_keys": len(set(keys)),
        "model_call_charges": sum(c.kind == "model_call" for c in charges),
        "open_charges": sum(c.state == "reserved" for c in charges),
        "charged": charged.to_dict(),
    }


def scale(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """200 model-bound runs at concurrency 128 under the default policy: exit 0, wall ÷ ideal.

    The baseline, measured first in the same session, is the same job under the latency
    benchmark's policy (bench/latency/policy.yaml: no sandbox-seconds, token or USD ceiling):
    ``wall_over_no_ceilings`` is what the default policy's ceilings cost.
    """
    baseline = None
    if args.baseline:
        base = folder / "baseline"
        base.mkdir()
        with Model(args.latency) as model:
            _, done, _, baseline = _submit(
                base, model, args, args.runs, args.concurrency, CeilingFlags(),
                str(HERE / "policy.yaml"),
            )  # fmt: skip
        assert done.exit_code == 0, done.report
    before = _busy_s()
    time.sleep(5.0)
    background = (_busy_s() - before) / 5.0  # the other sessions' busy cores
    with Model(args.latency) as model:
        meter = CpuMeter()
        meter.start()
        plan, result, settings, wall = _submit(
            folder, model, args, args.runs, args.concurrency, CeilingFlags()
        )
        cpu = meter.delta()
    report = result.report.to_json() if result.report is not None else {}
    ledger = _charges(settings, plan.job_id)
    admitted = plan.concurrency
    cores = os.cpu_count() or 1
    ours = max(0.0, cpu["machine"] - cpu["host_process"] - background * wall)
    engine_per_run = max(ours, cpu["engine"] + cpu["containers"]) / args.runs
    ideal = args.runs * MODEL_TURNS * args.latency / admitted + args.runs * engine_per_run / cores
    charged_once = (
        ledger["runs"] == ledger["run_charges"] == ledger["distinct_run_keys"] == args.runs
        and ledger["model_call_charges"] == MODEL_TURNS * args.runs
        and ledger["open_charges"] == 0
    )
    return {
        "exit_code": result.exit_code,
        "concurrency_asked": args.concurrency,
        "concurrency_admitted": admitted,
        "bound": plan.capacity.describe() if plan.capacity else None,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "wall_over_ideal": round(wall / ideal, 2),
        "baseline_wall_s": round(baseline, 2) if baseline is not None else None,
        "wall_over_no_ceilings": round(wall / baseline, 2) if baseline else None,
        "engine_cpu_ms_per_container": round(1000 * engine_per_run, 1),
        "other_sessions_busy_cores": round(background, 2),
        "runs_by_status": report.get("runs_by_status"),
        "ledger": ledger,
        "met": result.exit_code == 0 and charged_once and wall <= 2 * ideal,
    }


def tight(args: argparse.Namespace, folder: Path, dimension: str) -> dict[str, Any]:
    """100 tasks of ~1-s runs at concurrency 16 under a tight ceiling: used, never passed."""
    limit = args.ceiling_sandbox_s if dimension == "sandbox_s" else args.ceiling_usd
    flags = CeilingFlags({dimension: limit}, {dimension: "bench"})
    with Model(args.latency / 2) as model:
        plan, result, settings, wall = _submit(folder, model, args, args.tight_tasks, 16, flags)
    report = result.report.to_json() if result.report is not None else {}
    ledger = _charges(settings, plan.job_id)
    charged = ledger["charged"][dimension]
    not_run = report.get("not_run") or []
    listed = all(n.get("reason") for n in not_run) and len(not_run) == report.get(
        "runs_by_status", {}
    ).get("not_run", 0)
    return {
        "exit_code": result.exit_code,
        "ceiling": {dimension: limit},
        "charged": round(charged, 6),
        "charged_share": round(charged / limit, 3),
        "wall_s": round(wall, 2),
        "runs_by_status": report.get("runs_by_status"),
        "not_run_listed_with_reason": listed,
        "not_run_reasons": sorted({str(n.get("reason"))[:160] for n in not_run}),
        "ceiling_reached": report.get("ceiling_reached"),
        "ledger": ledger,
        "met": result.exit_code == 4 and 0.8 * limit <= charged <= limit and listed,
    }


def _busy_s() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="scale,sandbox_s,usd")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--tight-tasks", type=int, default=100)
    parser.add_argument("--ceiling-sandbox-s", type=float, default=40.0)
    parser.add_argument("--ceiling-usd", type=float, default=0.05)
    parser.add_argument("--memory-mb", type=int, default=96)
    parser.add_argument(
        "--image", default=os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    )
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging("json", level=logging.WARNING)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-budget-") as tmp:
        for name in args.scenarios.split(","):
            folder = Path(tmp) / name
            folder.mkdir()
            load = os.getloadavg()
            result = scale(args, folder) if name == "scale" else tight(args, folder, name)
            result["loadavg_before"] = [round(x, 2) for x in load]
            result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            out[name] = result
            if not args.json:
                print(name, json.dumps(result, indent=2), flush=True)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
