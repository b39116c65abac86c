"""Benchmark: what the worker process costs, measured in a real container.

Two figures, each against its in-process baseline measured in the same container, in the same
run (printed, not asserted):

- per call: 1,000 trivial tool calls through the episode's `Caller`, executed in-process
  (`runner.runtime.replay.rawserve.run_here`, how tools ran before the worker) and through the
  worker pipe (`runner.runtime.worker.client.Worker.execute`); µs per call;
- start-up CPU: a fresh runtime interpreter that imports the runtime and loads the tool module
  itself (before) against one that also spawns the worker and has it load the module (after),
  counting the worker's CPU (``/proc/PID/schedstat``: ns, where ``stat``'s 10 ms ticks read a
  forked worker as 0); ms of CPU; and the same with the egress
  witness off (``SANDBOX_REPLAY_EGRESS_WITNESS=off``: the witness's own start-up cost), split
  into the runtime's CPU and the worker's.

Usage: ``.venv/bin/python bench/bench_worker.py [--calls 1000] [--image sandbox-replay:latest]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.backends.base import STDOUT, LifetimeCap, Mount, SandboxSpec  # noqa: E402
from runner.backends.docker import DockerBackend  # noqa: E402
from runner.episode.prepare import runner_mounts  # noqa: E402
from runner.wire import protocol  # noqa: E402

TOOLS = """
from runner.sdk import Effect, tool

@tool("bench.echo", effect=Effect.PURE)
def echo(x: int) -> int:
    return x
"""

INNER = r"""
import json, os, resource, subprocess, sys, time
sys.path.insert(0, "/bench")
CALLS = int(sys.argv[1])
from runner.sdk import tool_def
import benchtools
entry = dict(tool_def(benchtools.echo).manifest_entry(), disposition="execute")
MANIFEST = {"tools": [entry], "policy": {"name": "bench"}}

def caller(execute=None):
    from runner.runtime.replay.calls import Caller
    from runner.runtime.replay.clock import Clock
    from runner.runtime.replay.recordings import ObservationStore, TraceStore
    return Caller(lambda *a, **k: None, lambda f: {}, "shadow", ObservationStore(None),
                  TraceStore(None), Clock(0.0, 1.0), execute=execute)

def per_call(execute, tool):
    c = caller(execute)
    for i in range(50):
        c.call_tool("s", tool, {"x": i})
    start = time.perf_counter()
    for i in range(CALLS):
        c.call_tool("s", tool, {"x": i})
    return (time.perf_counter() - start) / CALLS * 1e6

from runner.runtime.registry import RuntimeRegistry
local = RuntimeRegistry.from_manifest(MANIFEST, "shadow", ["/bench"], ["benchtools"])
in_process_us = per_call(None, local.resolve("bench.echo"))

from runner.runtime.pid1 import Reaper
from runner.runtime.worker.client import Worker
reaper = Reaper(); reaper.start()
worker = Worker(reaper); worker.spawn()
code = worker.load(MANIFEST, "shadow", ["/bench"], ["benchtools"])
remote = RuntimeRegistry.from_manifest(MANIFEST, "shadow", code=code)
pipe_us = per_call(worker.execute, remote.resolve("bench.echo"))

BEFORE = ("import runner.runtime.main\nfrom runner.runtime.registry import RuntimeRegistry\n"
          "RuntimeRegistry.from_manifest(%r, 'shadow', ['/bench'], ['benchtools'])\n" % MANIFEST)
AFTER = ("import os, sys\nimport runner.runtime.main\nfrom runner.runtime.pid1 import Reaper\n"
         "from runner.runtime.worker.client import Worker\n"
         "w = Worker(Reaper()); w.spawn(); w.load(%r, 'shadow', ['/bench'], ['benchtools'])\n"
         "f = open('/proc/%%d/schedstat' %% w.pid).read().split()\n"
         "sys.stdout.write(str(int(f[0]) / 1e9))\n" % MANIFEST)

def cpu_split(code, runs=11, witness="on"):
    # (runtime ms, worker ms) of the run with the least total CPU
    best = None
    env = dict(os.environ, SANDBOX_REPLAY_EGRESS_WITNESS=witness)
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=env).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        split = (spent * 1000, float(out or 0) * 1000)
        best = split if best is None or sum(split) < sum(best) else best
    return best

def cpu_ms(code, witness="on"):
    return sum(cpu_split(code, witness=witness))

print(json.dumps({"calls": CALLS, "in_process_us": in_process_us, "pipe_us": pipe_us,
                  "startup_before_ms": cpu_ms(BEFORE), "startup_after_ms": cpu_ms(AFTER),
                  "startup_no_witness_ms": cpu_ms(AFTER, witness="off"),
                  "split_witness_ms": cpu_split(AFTER),
                  "split_no_witness_ms": cpu_split(AFTER, witness="off")}))
"""


def main() -> int:
    """Run the measurement in one container; print the figures and the ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--image", default="sandbox-replay:latest")
    options = parser.parse_args()
    bench = Path("/tmp") / f"bench-worker-{uuid.uuid4().hex[:8]}"
    bench.mkdir(mode=0o755)
    (bench / "benchtools.py").write_text(TOOLS)
    (bench / "benchtools.py").chmod(0o644)
    spec = SandboxSpec(
        run_id=f"bench-worker-{uuid.uuid4().hex[:10]}",
        image=options.image,
        command=("python3", "-c", INNER, str(options.calls)),
        mounts=(*runner_mounts(), Mount(bench, "/bench")),
        env={"PYTHONPATH": protocol.RUNTIME_ROOT},
        cap=LifetimeCap(300.0),
    )
    backend = DockerBackend.connect()
    out = bytearray()
    try:
        with backend.sandbox(spec) as box:
            for frame in box.frames(0.5):
                if frame is not None and frame[0] == STDOUT:
                    out.extend(frame[1])
            state = box.wait(300)
    finally:
        backend.close()
    if state.exit_code != 0 or not out:
        print(f"the benchmark container failed: {state}", file=sys.stderr)
        return 1
    result = json.loads(out.decode().strip().splitlines()[-1])
    print(
        "per call, {calls} trivial tool calls: in-process {in_process_us:.1f} µs, "
        "through the worker pipe {pipe_us:.1f} µs (x{ratio:.2f}, +{extra:.1f} µs)".format(
            ratio=result["pipe_us"] / result["in_process_us"],
            extra=result["pipe_us"] - result["in_process_us"],
            **result,
        )
    )
    print(
        "start-up CPU: runtime loading tools itself {startup_before_ms:.1f} ms, runtime + "
        "worker {startup_after_ms:.1f} ms (x{ratio:.2f}, +{extra:.1f} ms)".format(
            ratio=result["startup_after_ms"] / result["startup_before_ms"],
            extra=result["startup_after_ms"] - result["startup_before_ms"],
            **result,
        )
    )
    print(
        "start-up CPU of the egress witness: runtime + worker without it "
        "{startup_no_witness_ms:.1f} ms, with it {startup_after_ms:.1f} ms"
        " (+{extra:.1f} ms)".format(
            extra=result["startup_after_ms"] - result["startup_no_witness_ms"], **result
        )
    )
    (rt_on, wk_on), (rt_off, wk_off) = result["split_witness_ms"], result["split_no_witness_ms"]
    print(
        f"  (least-total run of 11) runtime {rt_off:.1f} -> {rt_on:.1f} ms "
        f"(+{rt_on - rt_off:.1f}), worker {wk_off:.1f} -> {wk_on:.1f} ms (+{wk_on - wk_off:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
