"""Benchmark: `submit` episodes per second against bare hardened containers, same run, same engine.

Prints, for concurrency 1, 2 and 4 (see bench/README.md for what is measured and how):

(a) our episodes/s for a trivial one-step workflow over N tasks (default 100), through the whole
    submit path (`runner.submit.job.execute`: job, ledger, reservations, episodes,
    traces, grading, report) ÷ the baseline's runs/s: the docker SDK creating, starting,
    waiting for and removing a container of the same sandbox image running ``python3 -c pass``
    with the same hardening flags and log driver (`runner.backends.docker.backend.host_config`);
    with submit's own warm pool (`runner.backends.warmpool.pool`, its default) and without it;
    with CPU milliseconds per run, ours and the baseline's: this process (user+sys), the
    containers (cgroup v1 ``cpuacct.usage`` of the ``docker`` parent cgroup, or v2
    ``cpu.stat``), the engine (dockerd + containerd from /proc), the whole machine (/proc/stat);
(b) time from scheduling a run to its first tool call (median) ÷ the baseline's wall time per
    run at concurrency 1, with and without the pool.
The closing lines state each target ((a) >= 0.9 at concurrency 4; (b) <= 0.2 with
the pool at concurrency 1 and <= 0.5 at 4) and whether it was met.

Usage: ``.venv/bin/python bench/bench_submit.py [--tasks 100] [--concurrency 1,2,4]``.
Run it on an otherwise idle machine; compare ratios measured in one run (DOCKER-NOTES.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.backends.base import DelegatingBackend, Sandbox, SandboxSpec  # noqa: E402
from runner.backends.docker import DockerBackend  # noqa: E402
from runner.cli.log import configure_logging  # noqa: E402
from runner.settings import Settings  # noqa: E402
from runner.submit import pairs as pairs_module  # noqa: E402
from runner.submit.job import execute, prepare  # noqa: E402
from runner.submit.options import SubmitOptions  # noqa: E402

HERE = Path(__file__).resolve().parent / "trivial"
CALL_MARK = b'"type":"call"'


class CpuMeter:
    """CPU seconds used since `start`: this process, containers, engine, whole machine."""

    def __init__(self) -> None:
        self.engine_pids = [p for p in (_pid_of("dockerd"), _pid_of("containerd")) if p]
        self.start()

    def _read(self) -> dict[str, float]:
        t = os.times()
        return {
            "host_process": t.user + t.system,
            "containers": _container_cpu_s(),
            "engine": sum(_proc_cpu_s(pid) for pid in self.engine_pids),
            "machine": _machine_busy_s(),
        }

    def start(self) -> None:
        self.t0 = self._read()

    def delta(self) -> dict[str, float]:
        now = self._read()
        return {k: now[k] - self.t0[k] for k in now}


def _pid_of(name: str) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    return int(entry.name)
            except OSError:
                continue
    return None


def _proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    # utime, stime, cutime, cstime (fields 14-17; index 11-14 after the comm)
    return sum(int(x) for x in fields[11:15]) / ticks


def _container_cpu_s() -> float:
    v1 = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9  # charged hierarchically: removed children count
    for v2 in (
        Path("/sys/fs/cgroup/system.slice/cpu.stat"),
        Path("/sys/fs/cgroup/docker/cpu.stat"),
    ):
        if v2.exists():
            for line in v2.read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
    return 0.0


def _machine_busy_s() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def baseline(client: Any, image: str, runs: int, concurrency: int) -> dict[str, Any]:
    """Bare runs: create + start + wait + remove of ``python3 -c pass``, same hardening."""
    api = client.api
    # The exact create arguments our backend uses (user, env, labels, HostConfig with every
    # hardening flag and the `none` log driver), for `python3 -c pass`.
    backend = DockerBackend(api)
    command = ("python3", "-c", "pass")
    walls: list[float] = []
    lock = threading.Lock()
    counter = iter(range(runs))

    def worker() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            t0 = time.monotonic()
            spec = SandboxSpec(run_id=f"bench-{index:04d}", image=image, command=command)
            cid = api.create_container(**backend.create_kwargs(spec))["Id"]
            api.start(cid)
            status = api.wait(cid)["StatusCode"]
            api.remove_container(cid, force=True)
            assert status == 0, f"baseline container exited {status}"
            with lock:
                walls.append(time.monotonic() - t0)

    meter = CpuMeter()
    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {
        "runs_per_s": runs / elapsed,
        "wall_per_run_s": statistics.mean(walls),
        "cpu": meter.delta(),
        "runs": runs,
    }


class _FirstCall:
    """Instruments one submit: scheduling time per run, first `call` message per sandbox."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.latencies: list[float] = []
        self.lock = threading.Lock()

    @contextmanager
    def patched(self) -> Iterator[None]:
        original = pairs_module.PairRunner.run_pair
        probe = self

        def run_pair(self: Any, variant: str, task_id: str, key: str) -> Any:
            probe.local.t0 = time.monotonic()
            return original(self, variant, task_id, key)

        pairs_module.PairRunner.run_pair = run_pair  # type: ignore[method-assign]
        try:
            yield
        finally:
            pairs_module.PairRunner.run_pair = original  # type: ignore[method-assign]

    def wrap(self, backend: Any) -> Any:
        """``backend`` with every sandbox's first ``call`` message timed."""
        return _TimedBackend(backend, self)


class _TimedBackend(DelegatingBackend):
    """Delegates to the Docker backend; times the first ``call`` frame of each sandbox."""

    def __init__(self, inner: Any, probe: _FirstCall) -> None:
        super().__init__(inner)
        self.probe = probe

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        probe = self.probe
        t0 = getattr(probe.local, "t0", time.monotonic())
        with self.inner.sandbox(spec) as box:
            frames = box.frames

            def timed(poll_s: float = 0.5) -> Iterator[Any]:
                seen = False
                for frame in frames(poll_s):
                    if not seen and frame is not None and CALL_MARK in frame[1]:
                        seen = True
                        with probe.lock:
                            probe.latencies.append(time.monotonic() - t0)
                    yield frame

            box.frames = timed  # type: ignore[method-assign]
            yield box


def ours(image: str, tasks: Path, state: Path, concurrency: int, pool: bool) -> dict[str, Any]:
    """The submit path over the trivial workflow; returns episodes/s, CPU and first-call times.

    ``pool``: submit's own warm pool (its default, `DockerBackend.with_pool`, built by the job
    for its runs only), else the bare Docker backend. The timing wrapper goes around what the
    job runs its episodes on, pooled or not.
    """
    settings = Settings(
        state_dir=state, image=image, concurrency=concurrency, log_format="json", pool=pool
    )

    def backend() -> Any:
        return DockerBackend.connect(settings.docker_host)

    real_with_pool = DockerBackend.with_pool

    def timed_with_pool(self: DockerBackend, **kwargs: Any) -> Any:
        made = real_with_pool(self, **kwargs)
        pools.append(made)
        return probe.wrap(made)

    pools: list[Any] = []
    options = SubmitOptions(
        variants=(HERE / "trivial.yaml",),
        names=(None,),
        tasks=tasks,
        cwd=HERE,
        concurrency=concurrency,
    )
    probe = _FirstCall()
    meter = CpuMeter()
    started = time.monotonic()
    plan = prepare(options, settings)
    DockerBackend.with_pool = timed_with_pool  # type: ignore[method-assign]
    try:
        with probe.patched():
            result = execute(
                plan,
                options,
                settings,
                backend_factory=backend,
                handle_signals=False,
            )
    finally:
        DockerBackend.with_pool = real_with_pool  # type: ignore[method-assign]
    elapsed = time.monotonic() - started
    stats = [p.pool.stats() for p in pools if hasattr(p, "pool")]
    report = result.report.to_json() if result.report is not None else {}
    assert report.get("runs_by_status") == {"succeeded": len(plan.pairs)}, report
    return {
        "runs_per_s": len(plan.pairs) / elapsed,
        "cpu": meter.delta(),
        "first_call_s": statistics.median(probe.latencies),
        "runs": len(plan.pairs),
        "pool": stats[0] if stats else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument(
        "--image", default=os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import logging

    configure_logging("json", level=logging.WARNING)
    client = docker.from_env(timeout=120)
    levels = [int(c) for c in args.concurrency.split(",")]
    results: dict[str, Any] = {"tasks": args.tasks, "levels": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text(
            "".join(
                json.dumps({"task_id": f"t{i:03d}", "input": {"n": str(i)}}) + "\n"
                for i in range(args.tasks)
            )
        )
        base1 = None
        for level in levels:
            base = baseline(client, args.image, args.tasks, level)
            runs = {
                name: ours(args.image, tasks, Path(tmp) / f"state{level}-{name}", level, pool)
                for name, pool in (("pooled", True), ("unpooled", False))
            }
            base1 = base1 or base
            entry: dict[str, Any] = {"baseline": base, **runs}
            n_b = base["runs"]
            entry["cpu_ms_baseline"] = {k: 1000 * v / n_b for k, v in base["cpu"].items()}
            for name, mine in runs.items():
                entry[f"cpu_ms_{name}"] = {
                    k: 1000 * v / mine["runs"] for k, v in mine["cpu"].items()
                }
                entry[f"ratio_{name}"] = mine["runs_per_s"] / base["runs_per_s"]
                entry[f"first_call_ratio_{name}"] = mine["first_call_s"] / base1["wall_per_run_s"]
            results["levels"][level] = entry
            if not args.json:
                _print_level(level, entry, base, base1)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for line in verdicts(results["levels"]):
            print(line)


def _print_level(level: int, entry: dict[str, Any], base: Any, base1: Any) -> None:
    pooled, unpooled = entry["pooled"], entry["unpooled"]
    print(f"concurrency {level}:")
    print(
        f"  (a) episodes/s pooled {pooled['runs_per_s']:.2f}, unpooled "
        f"{unpooled['runs_per_s']:.2f}; bare containers {base['runs_per_s']:.2f} runs/s; "
        f"ratio pooled {entry['ratio_pooled']:.2f}, unpooled {entry['ratio_unpooled']:.2f}"
    )
    cpu = entry["cpu_ms_pooled"]
    print("      CPU ms/run      " + "  ".join(f"{k:>12}" for k in cpu))
    for name in ("pooled", "unpooled", "baseline"):
        values = entry[f"cpu_ms_{name}"].values()
        print(f"      {name:<16}" + "  ".join(f"{v:12.1f}" for v in values))
    print(
        f"  (b) schedule->first tool call (median) pooled {1000 * pooled['first_call_s']:.0f} ms,"
        f" unpooled {1000 * unpooled['first_call_s']:.0f} ms / bare container wall per run at"
        f" concurrency 1 {1000 * base1['wall_per_run_s']:.0f} ms = pooled "
        f"{entry['first_call_ratio_pooled']:.2f}, unpooled {entry['first_call_ratio_unpooled']:.2f}"
    )
    if pooled.get("pool"):
        stats = pooled["pool"]
        print(
            f"      pool: {stats['created']} warm sandboxes made, {stats['assigned']} handed out,"
            f" {stats['cold']} runs started cold"
        )
    sys.stdout.flush()


def verdicts(levels: dict[int, dict[str, Any]]) -> list[str]:
    """The closing lines: each target of the warm pool and whether this run met it."""

    def said(ok: bool) -> str:
        return "met" if ok else "NOT met"

    lines = []
    four, one = levels.get(4), levels.get(1)
    if four is not None:
        value = four["ratio_pooled"]
        lines.append(
            f"target (a) >= 0.9 at concurrency 4 (pooled, submit's default): {value:.2f} "
            f"({said(value >= 0.9)}; unpooled {four['ratio_unpooled']:.2f})"
        )
    for level, bound, entry in ((1, 0.2, one), (4, 0.5, four)):
        if entry is not None:
            value = entry["first_call_ratio_pooled"]
            lines.append(
                f"target (b) <= {bound} with the pool at concurrency {level}: {value:.2f} "
                f"({said(value <= bound)}; unpooled {entry['first_call_ratio_unpooled']:.2f})"
            )
    return lines


if __name__ == "__main__":
    main()
