"""The same submit on the local Docker backend and on a 3-node local Ray cluster.

Head (no slots) + worker A (main engine) + worker B (a second dockerd of its own), as in
tests/integration/_ray.py (root needed). Each run is one tool step that waits ``--sleep-s``
(standing in for a model wait). Prints wall times and ray ÷ local; on one 2-core machine the
ratio measures the Ray backend's overhead (scheduling, relay, shipping), not a speed-up.

    .venv/bin/python bench/ray_vs_local.py [--tasks 6] [--sleep-s 2] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration._ray import ray_cluster, second_engine
from tests.integration.test_ray_backend import _project, _submit


def _timed(work: Path, concurrency: int, ray: bool) -> float:
    args = ["--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl"]
    args += ["--concurrency", str(concurrency)]
    start = time.monotonic()
    code, report = _submit(work, *args, backend="ray" if ray else "docker")
    assert code == 0, report
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--sleep-s", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    ns = parser.parse_args()
    image = os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    root = Path(tempfile.mkdtemp(prefix="srbench-"))
    root.chmod(0o755)
    try:
        local = _timed(_project(root / "local", ns.tasks, ns.sleep_s), ns.concurrency, False)
        import ray

        with second_engine(image) as engine, ray_cluster(engine) as cluster:
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
            try:
                distributed = _timed(
                    _project(root / "ray", ns.tasks, ns.sleep_s), ns.concurrency, True
                )
            finally:
                ray.shutdown()
        runs = 2 * ns.tasks
        ideal = runs * ns.sleep_s / ns.concurrency
        print(
            f"{runs} runs x {ns.sleep_s} s wait, concurrency {ns.concurrency}: ideal {ideal:.1f} s"
        )
        print(f"local docker backend: {local:.1f} s ({local / ideal:.2f} x ideal)")
        print(f"ray, head + 2 workers: {distributed:.1f} s ({distributed / ideal:.2f} x ideal)")
        print(f"ray / local: {distributed / local:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
