"""The concurrency bound: memory budget, kernel pids, RLIMIT_NPROC, RLIMIT_NOFILE (no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.backends.capacity import (
    ENGINE_PIDS_PER_SANDBOX,
    HOST_FDS_PER_SANDBOX,
    HOST_THREADS_PER_SANDBOX,
    HostResources,
    bound_concurrency,
)

GIB = 1024**3
ROOMY = HostResources(pids_free=10**7, nproc_free=None, fds_free=10**6)


def test_the_memory_budget_is_three_quarters_of_the_engines_memory() -> None:
    bound = bound_concurrency(
        500, memory_mb=512, pids_limit=128, engine_memory_bytes=16 * GIB, host=ROOMY
    )
    assert bound.admitted == 24  # 0.75 x 16 GiB / 512 MiB
    assert bound.binding is not None and bound.binding.name == "memory"
    assert bound.describe().startswith("24 at once (asked 500; bound by memory: 0.75 x 16.0 GiB")


def test_asked_is_admitted_when_every_bound_has_room() -> None:
    bound = bound_concurrency(
        128, memory_mb=96, pids_limit=128, engine_memory_bytes=24 * GIB, host=ROOMY
    )
    assert bound.admitted == 128 and bound.binding is None
    assert bound.describe().startswith(
        "128 at once (as asked: nothing here bounds it lower);"
        " runs each other bound allows: memory 192"
    )
    assert "unknown: threads" in bound.describe()  # RLIMIT_NPROC unlimited bounds nothing


def test_kernel_pids_count_the_sandbox_the_shim_and_the_hosts_threads() -> None:
    per_run = 128 + ENGINE_PIDS_PER_SANDBOX + HOST_THREADS_PER_SANDBOX
    host = HostResources(pids_free=8 * per_run, nproc_free=None, fds_free=10**6)
    bound = bound_concurrency(
        100, memory_mb=16, pids_limit=128, engine_memory_bytes=None, host=host
    )
    assert bound.admitted == 6 and bound.binding is not None and bound.binding.name == "pids"
    # a remote engine's kernel is not this one: its pids bound nothing here
    remote = bound_concurrency(
        100,
        memory_mb=16,
        pids_limit=128,
        engine_memory_bytes=None,
        host=host,
        engine_is_local=False,
    )
    assert remote.admitted == 100
    assert remote.to_json()["bounds"]["pids"] == {  # type: ignore[index]
        "runs": None,
        "why": "a remote engine's kernel pids are unknown",
    }


def test_file_descriptors_and_nproc_bound_too() -> None:
    fds = HostResources(pids_free=None, nproc_free=None, fds_free=40 * HOST_FDS_PER_SANDBOX)
    bound = bound_concurrency(100, memory_mb=16, pids_limit=8, engine_memory_bytes=None, host=fds)
    assert bound.admitted == 30 and bound.binding is not None and bound.binding.name == "fds"
    per_run = HOST_THREADS_PER_SANDBOX + 8
    nproc = HostResources(pids_free=None, nproc_free=6 * per_run, fds_free=None)
    bound = bound_concurrency(100, memory_mb=16, pids_limit=8, engine_memory_bytes=None, host=nproc)
    assert bound.admitted == 4 and bound.binding is not None and bound.binding.name == "threads"


def test_one_run_is_always_admitted() -> None:
    host = HostResources(pids_free=0, nproc_free=0, fds_free=0)
    bound = bound_concurrency(8, memory_mb=512, pids_limit=128, engine_memory_bytes=GIB, host=host)
    assert bound.admitted == 1


def test_host_resources_are_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "sys/kernel").mkdir(parents=True)
    (tmp_path / "sys/kernel/pid_max").write_text("32768\n")
    (tmp_path / "sys/kernel/threads-max").write_text("192726\n")
    (tmp_path / "loadavg").write_text("4.05 5.41 3.48 4/127 23193\n")
    (tmp_path / "self/fd").mkdir(parents=True)
    for n in range(3):
        (tmp_path / f"self/fd/{n}").write_text("")
    host = HostResources.read(tmp_path)
    assert host.pids_free == 32768 - 127
    assert host.fds_free is not None and host.fds_free > 0


@pytest.mark.parametrize("text", ["", "garbage", "1 2 3 4"])
def test_unreadable_proc_bounds_nothing(tmp_path: Path, text: str) -> None:
    (tmp_path / "loadavg").write_text(text)
    assert HostResources.read(tmp_path).pids_free is None
