"""(c) namespace-backend episodes/s ÷ Docker-backend episodes/s on the same trivial workflow.

```
.venv/bin/python bench/bench_namespace.py [--tasks 40] [--concurrency 2] [--rounds 1] [--json]
```

Both sides run the whole ``submit`` path after the plan (`runner.submit.job.execute`: the job,
reservations, one sandbox per task of the one-step workflow bench/trivial/trivial.yaml, the
channel, the trace, settlement, grading), measured in one run, alternating Docker then
namespace each round; only the backend differs. The namespace backend's root filesystem is
exported before the clock starts (once per image id, as in use). Prints both rates, the ratio,
the load average (other sessions share the machine), and a closing line with the target
(≥ 3; stretch ≥ 10) and whether it was met.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.backends.docker import DockerBackend  # noqa: E402
from runner.backends.namespace import NamespaceBackend  # noqa: E402
from runner.cli.log import configure_logging  # noqa: E402
from runner.settings import Settings  # noqa: E402
from runner.submit.job import execute, prepare  # noqa: E402
from runner.submit.options import SubmitOptions  # noqa: E402

HERE = Path(__file__).resolve().parent / "trivial"
TARGET, STRETCH = 3.0, 10.0


def episodes_per_s(
    image: str, tasks: Path, state: Path, concurrency: int, factory: Callable[[], Any]
) -> float:
    """Episodes/s of one submit of ``tasks`` over the trivial workflow with ``factory``."""
    settings = Settings(state_dir=state, image=image, concurrency=concurrency, log_format="json")
    options = SubmitOptions(
        variants=(HERE / "trivial.yaml",),
        names=(None,),
        tasks=tasks,
        cwd=HERE,
        concurrency=concurrency,
    )
    started = time.monotonic()
    plan = prepare(options, settings)
    result = execute(plan, options, settings, backend_factory=factory, handle_signals=False)
    elapsed = time.monotonic() - started
    report = result.report.to_json() if result.report is not None else {}
    assert report.get("runs_by_status") == {"succeeded": len(plan.pairs)}, report
    return len(plan.pairs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--image", default=os.environ.get("SANDBOX_REPLAY_IMAGE", "sandbox-replay:latest")
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging("json", level=logging.WARNING)
    rates: dict[str, list[float]] = {"docker": [], "namespace": []}
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text(
            "".join(
                json.dumps({"task_id": f"t{i:03d}", "input": {"n": str(i)}}) + "\n"
                for i in range(args.tasks)
            )
        )
        ns_root = Path(tmp) / "namespace"
        NamespaceBackend(ns_root).rootfs(args.image)  # the one export, before the clock
        factories: dict[str, Callable[[], Any]] = {
            "docker": lambda: DockerBackend.connect(None),
            "namespace": lambda: NamespaceBackend(ns_root),
        }
        load_before = os.getloadavg()
        for round_no in range(args.rounds):
            for name, factory in factories.items():
                state = Path(tmp) / f"state-{name}-{round_no}"
                rates[name].append(
                    episodes_per_s(args.image, tasks, state, args.concurrency, factory)
                )
        load_after = os.getloadavg()
    docker_rate = sum(rates["docker"]) / len(rates["docker"])
    ns_rate = sum(rates["namespace"]) / len(rates["namespace"])
    ratio = ns_rate / docker_rate
    verdict = "met" if ratio >= TARGET else "NOT met"
    stretch = "met" if ratio >= STRETCH else "not met"
    if args.json:
        print(
            json.dumps(
                {
                    "tasks": args.tasks,
                    "concurrency": args.concurrency,
                    "episodes_per_s": rates,
                    "ratio": ratio,
                    "load_before": load_before,
                    "load_after": load_after,
                },
                indent=2,
            )
        )
    print(
        f"(c) concurrency {args.concurrency}, {args.tasks} tasks x {args.rounds} round(s): "
        f"namespace {ns_rate:.2f} episodes/s, docker {docker_rate:.2f} episodes/s"
    )
    print(
        "    load average before "
        + "/".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + "/".join(f"{x:.2f}" for x in load_after)
    )
    print(
        f"target (c) namespace / docker >= {TARGET:g} (stretch >= {STRETCH:g}): {ratio:.2f}"
        f" ({verdict}; stretch {stretch})"
    )


if __name__ == "__main__":
    main()
