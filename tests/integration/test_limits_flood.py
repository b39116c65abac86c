"""A real sandbox flooding forged call lines stays bounded.

The hostile tool writes call lines straight onto the runtime's private channel fd (as an
attacker in the tool's process can, tests/fixtures/attacks/hostile_tools.py ``_channel_fds``):
a million of them. Before the fix the host wrote every one to the trace (195 MB per run) and
the summaries loaded it whole (2.97 GB RSS). Now the host keeps ``limits.max_calls`` call lines
(or ``limits.max_trace_mb`` MiB), kills the sandbox, and the run ends ``limit_exceeded``;
the host's memory stays flat meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.episode.limits import check_engine_limits
from runner.errors import InputError
from runner.policy import load_policy
from runner.settings import Settings
from runner.tracetools.lint import lint_trace
from tests.integration._episodes import Project
from tests.integration._hostile import TOOLS

pytestmark = pytest.mark.docker

FLOOD_TOOL = """

@tool("forge.call_flood", effect=Effect.LOCAL)
def call_flood(count: int, pad: int) -> int:
    fd = _channel_fds(1)[0]
    body = "x" * pad
    batch = []
    for i in range(count):
        batch.append(json.dumps({"type": "call", "record": {
            "index": i, "step_id": "f", "tool": "kb.search", "args": {"q": i},
            "body": body, "body_encoding": "text", "clock": 1761574801.0}}))
        if len(batch) == 1000 or i == count - 1:
            data = ("\\n".join(batch) + "\\n").encode()
            while data:
                data = data[os.write(fd, data):]
            batch = []
    return count
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("limits") / "proj", TOOLS + FLOOD_TOOL)


@pytest.fixture(scope="module")
def backend(docker_client: Any) -> Iterator[Any]:
    from runner.backends.docker import DockerBackend

    backend = DockerBackend.connect()
    yield backend
    backend.close()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _flood(
    project: Project, backend: Any, image: str, tmp_path: Path, count: int, pad: int, **limits: Any
) -> tuple[Any, float, float]:
    workflow = project.workflow(
        f"- {{id: f, tool: forge.call_flood, args: {{count: {count}, pad: {pad}}}}}\n"
    )
    before = peak = _rss_mb()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_mb())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        out = project.run(
            backend, image, workflow, state_dir=tmp_path / "state", timeout_s=120.0, **limits
        )
    finally:
        done.set()
        sampler.join()
    return out, peak - before, time.monotonic() - started


def test_a_million_forged_call_lines_reach_only_the_worker_pipe(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Tool code holds only the worker's pipe, so the flood never reaches the host's
    channel; the runtime refuses the first forged line (a call record is not a worker message),
    the episode fails naming it, and the trace and the host's memory stay small. The host's own
    ``max_calls`` cut is tested where a channel can still carry calls (tests/unit/episode)."""
    out, grew_mb, took_s = _flood(project, backend, sandbox_image, tmp_path, 1_000_000, 100)
    end = out.end
    assert end["status"] == "failed", end
    assert end["error"]["class"].endswith("WorkerProtocolError"), end["error"]
    assert len(out.calls) <= 1  # at most the flooding call's own record
    size_mb = out.result.trace_path.stat().st_size / 2**20
    assert size_mb < 5, f"trace is {size_mb:.1f} MiB"
    assert grew_mb < 150, f"host RSS grew {grew_mb:.0f} MB"
    assert took_s < 60
    assert lint_trace(out.result.trace_path).failure_signature.ok


def test_big_forged_call_lines_reach_only_the_worker_pipe(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out, grew_mb, _ = _flood(
        project,
        backend,
        sandbox_image,
        tmp_path,
        100_000,
        20_000,  # 2 GB of call lines if all were kept
        max_calls=10_000_000,
        max_trace_mb=2,
    )
    end = out.end
    assert end["status"] == "failed", end
    assert end["error"]["class"].endswith("WorkerProtocolError"), end["error"]
    assert out.result.trace_path.stat().st_size <= 2 * 2**20
    assert len(out.calls) <= 1
    assert grew_mb < 150, f"host RSS grew {grew_mb:.0f} MB"


def test_cpus_above_the_real_engines_count_are_refused(backend: Any, tmp_path: Path) -> None:
    cpus = backend.engine_cpus()
    assert cpus == float(backend.api.info()["NCPU"])
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\nmode: shadow\nlimits:\n  cpus: {cpus + 1:g}\n")
    with pytest.raises(InputError) as info:
        check_engine_limits(backend, load_policy(path), Settings())
    assert info.value.fields["field"] == "limits.cpus"
    check_engine_limits(backend, load_policy("shadow"), Settings())
