"""The accepted range of every per-run limit, with its source: one table for policy, settings, CLI.

Below the policy and the settings in the layers (both use these types; import-linter's
``layers`` contract in pyproject.toml), so it imports pydantic and nothing of runner.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from pydantic import AfterValidator, Field

__all__ = [
    "LIMIT_BOUNDS",
    "MAX_COUNT",
    "Bounds",
    "Cpus",
    "MaxCalls",
    "MaxTraceMb",
    "MemoryMb",
    "PidsLimit",
    "TimeoutS",
    "TmpfsMb",
]


class Bounds(NamedTuple):
    """The accepted range of one limit, both ends included, and where the range comes from."""

    low: float
    high: float
    source: str


_MIB = 1024 * 1024
_INT64_MAX = 2**63 - 1
# The largest count the ledger stores: SQLite's INTEGER is a signed 64-bit value
# (https://www.sqlite.org/datatype3.html, "Storage Classes and Datatypes").
MAX_COUNT = _INT64_MAX

# Per-run limits the policy, the settings and the CLI may set (one table for all three).
LIMIT_BOUNDS: dict[str, Bounds] = {
    # threading.TIMEOUT_MAX is 4294967 s on Windows (2**32-1 ms): a longer wait raises
    # OverflowError in the host's own timers. A week is well below it on every platform.
    "timeout_s": Bounds(0.001, 7 * 24 * 3600, "host timers; at most a week"),
    # Docker refuses less than 6 MiB ("Minimum memory limit allowed is 6MB": moby
    # daemon/daemon_unix.go, linuxMinMemory = 6291456, measured on Engine 20.10); the runtime
    # (Python) does not start in less than 16 MiB. The engine takes bytes as int64.
    "memory_mb": Bounds(16, _INT64_MAX // _MIB, "Docker: >= 6 MiB, bytes fit int64"),
    # The kernel refuses pids.max above PID_MAX_LIMIT = 4 * 1024 * 1024 on 64-bit
    # (kernel/cgroup/pids.c, include/linux/threads.h; the engine's start fails there,
    # measured); the runtime needs a few threads of its own.
    "pids_limit": Bounds(8, 4 * 1024 * 1024, "Linux PID_MAX_LIMIT"),
    # Docker: "Range of CPUs is from 0.01 to N" (moby daemon/daemon_unix.go, NanoCPUs >= 1e7;
    # 0.009 fails at start, and a NanoCPUs value that rounds to 0 turns the limit off). The
    # upper end is the engine's CPU count, checked when the engine is known
    # (`runner.backends.base.Backend.check_limits`).
    "cpus": Bounds(0.01, 4096, "Docker NanoCPUs: 0.01 to the engine's CPUs"),
    # tmpfs size= and shm_size are bytes the engine takes as int64.
    "tmpfs_mb": Bounds(1, _INT64_MAX // _MIB, "Docker: bytes fit int64"),
    # Host-side bounds of one episode (the sandbox cannot cost the host more than these).
    "max_calls": Bounds(1, 10_000_000, "calls per episode"),
    "max_trace_mb": Bounds(1, 64 * 1024, "MiB of trace per episode"),
}


def _show(value: float) -> str:
    """``8796093022207`` and ``0.01`` rather than ``8.79609e+12``; huge values stay short."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _range(name: str) -> Any:
    """A validator keeping limit ``name`` within `LIMIT_BOUNDS`, naming the bounds' source."""
    low, high, source = LIMIT_BOUNDS[name]

    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(
                f"{_show(value)} is out of range: {_show(low)} to {_show(high)} ({source})"
            )
        return value

    return AfterValidator(check)


_FINITE = Field(allow_inf_nan=False)

# The limits' types, shared by the policy (strict) and the settings (read from text).
TimeoutS = Annotated[float, _FINITE, _range("timeout_s")]
MemoryMb = Annotated[int, _range("memory_mb")]
PidsLimit = Annotated[int, _range("pids_limit")]
Cpus = Annotated[float, _FINITE, _range("cpus")]
TmpfsMb = Annotated[int, _range("tmpfs_mb")]
MaxCalls = Annotated[int, _range("max_calls")]
MaxTraceMb = Annotated[int, _range("max_trace_mb")]
