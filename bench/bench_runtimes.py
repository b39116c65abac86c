"""Benchmark: a hardened sandbox's start to exit under each OCI runtime of the engine.

For every runtime asked (default: ``runc crun``), N runs (default 20) of ``python3 -c pass`` in
the sandbox image, interleaved runtime by runtime so that machine load hits all alike, each
through the Docker backend itself (`DockerBackend(runtime=...)`: the hardened HostConfig, the
lifetime cap as PID 1, create + attach + start + wait + remove). Printed per runtime: the median
and quartiles of the wall time from ``sandbox()`` entered to the container removed, and of the
in-sandbox run (``ExitState.ran_s``, the engine's StartedAt to FinishedAt); a runtime whose
containers cannot start here is reported with the engine's error instead.

``--engine-with-runtimes`` starts a second dockerd of its own (socket, data root, no network of
its own; the sandbox image loaded into it) with crun and runsc registered, for a machine whose
shared engine has only runc (never restarting that one). Needs root.

Usage: ``.venv/bin/python bench/bench_runtimes.py [--runs 20] [--runtimes runc,crun]
[--engine-with-runtimes] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.backends.base import SandboxSpec  # noqa: E402
from runner.backends.docker import DockerBackend  # noqa: E402
from runner.errors import InfrastructureError  # noqa: E402
from runner.settings import DEFAULT_IMAGE  # noqa: E402

DAEMON_JSON = {
    "runtimes": {
        "crun": {"path": "/usr/bin/crun"},
        "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]},
    }
}


@contextlib.contextmanager
def _engine(with_runtimes: bool, image: str) -> Iterator[str | None]:
    if not with_runtimes:
        yield None
        return
    from tests.integration._ray import second_engine  # the tests' own second dockerd

    with tempfile.NamedTemporaryFile("w", suffix=".json", dir="/tmp", delete=False) as f:
        json.dump(DAEMON_JSON, f)
    try:
        with second_engine(image, [f"--config-file={f.name}"]) as engine:
            yield engine.host
    finally:
        Path(f.name).unlink(missing_ok=True)


def _one(backend: DockerBackend, image: str) -> tuple[float, float]:
    spec = SandboxSpec(
        run_id=f"bench-{uuid.uuid4().hex[:10]}", image=image, command=("python3", "-c", "pass")
    )
    started = time.perf_counter()
    output = bytearray()
    with backend.sandbox(spec) as box:
        for frame in box.frames(0.05):
            if frame is not None:
                output.extend(frame[1])
        state = box.wait(60)
    wall = time.perf_counter() - started
    if state.exit_code != 0:
        said = output.decode(errors="replace").strip()[-300:]
        raise InfrastructureError(f"exit {state.exit_code}: {state.error or said!r}")
    return wall, state.ran_s or 0.0


def _quartiles(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"p25_ms": 1000 * q[0], "median_ms": 1000 * q[1], "p75_ms": 1000 * q[2]}


def measure(host: str | None, runtimes: list[str], runs: int, image: str) -> dict[str, Any]:
    """Per runtime: quartiles of wall and in-sandbox time, or the error that stopped it."""
    backends: dict[str, DockerBackend] = {}
    out: dict[str, Any] = {}
    for name in runtimes:
        try:
            backends[name] = DockerBackend.connect(host, runtime=name)
            _one(backends[name], image)  # warm-up, and the check that it starts here at all
        except Exception as exc:
            out[name] = {"error": str(exc)}
            backends.pop(name, None)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in backends}
    for _ in range(runs):
        for name, backend in backends.items():
            samples[name].append(_one(backend, image))
    for name, pairs in samples.items():
        out[name] = {
            "runs": len(pairs),
            "wall": _quartiles([w for w, _ in pairs]),
            "in_sandbox": _quartiles([r for _, r in pairs]),
        }
        backends[name].close()
    return out


def main() -> None:
    """Print one line per runtime and the closing comparison (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--runtimes", default="runc,crun")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--engine-with-runtimes", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    with _engine(args.engine_with_runtimes, args.image) as host:
        result = measure(host, runtimes, args.runs, args.image)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"sandbox start to exit of python3 -c pass, {args.runs} runs each, interleaved")
    for name, row in result.items():
        if "error" in row:
            print(f"{name:<6} cannot run here: {row['error']}")
            continue
        w, r = row["wall"], row["in_sandbox"]
        print(
            f"{name:<6} wall median {w['median_ms']:.0f} ms (p25 {w['p25_ms']:.0f}, p75"
            f" {w['p75_ms']:.0f}); in sandbox median {r['median_ms']:.0f} ms"
        )
    base = result.get("runc", {})
    for name, row in result.items():
        if name != "runc" and "wall" in row and "wall" in base:
            ratio = row["wall"]["median_ms"] / base["wall"]["median_ms"]
            print(f"{name} / runc wall median: {ratio:.2f}")


if __name__ == "__main__":
    main()
