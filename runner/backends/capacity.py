"""How many sandboxes may run at once: the asked concurrency, bounded by what runs need.

A run spends most of its time waiting on a model API, not on a CPU (DOCKER-NOTES.md), so the
bound is not the CPU count. `bound_concurrency` admits at most the asked number, and at most
what each of these resources has room for (every share below leaves the rest of the resource to
the engine itself, page cache, this process's own work and everyone else on the machine):

- **memory**: the sum of the runs' memory limits (``memory_mb``, with no extra swap) at most
  `MEMORY_SHARE` of the engine's memory (``MemTotal`` of ``docker info``): a limit is a cap,
  not a use, so this can never overcommit the engine however the runs behave;
- **pids**: each run may use ``pids_limit`` pids in its container plus the engine's own per
  container (the ``containerd-shim``: `ENGINE_PIDS_PER_SANDBOX` threads, measured) and this
  process's threads for it (`HOST_THREADS_PER_SANDBOX`); together at most `SHARE` of the
  kernel's free pids (``min(kernel.pid_max, kernel.threads-max)`` less the tasks that exist
  now, ``/proc/loadavg``). Only when the engine is local (a Unix socket): a remote engine's
  kernel cannot be read from here, and that bound is then reported as unknown;
- **host threads**: `HOST_THREADS_PER_SANDBOX` threads of this process per run, and (the
  sandboxes' processes run as the invoking user: `runner.backends.base.sandbox_user`) the
  run's ``pids_limit``, at most `SHARE` of what ``RLIMIT_NPROC`` leaves free (when it is finite);
- **file descriptors**: `HOST_FDS_PER_SANDBOX` per run, at most `SHARE` of what
  ``RLIMIT_NOFILE`` leaves free (its soft limit raised to the hard one first: `raise_nofile`).

A warm pool's spare sandboxes (`runner.backends.warmpool.pool`: started before their runs, each
with the runs' memory and pids limits already) count in these same bounds, sandbox for
sandbox: the admitted runs plus the spares never pass any of them. The runs come first (a
spare only saves a start, ~0.25 s of engine CPU, while a run not admitted waits a whole run),
so the pool gets what the bounds leave, up to the size it wants (`ConcurrencyBound.spares`).

The per-run costs were measured on a waiting sandbox (bench/model_latency.py, bench/README.md).
A resource that cannot be read bounds nothing and is reported as unknown. The Ray backend
applies the same rule per node with that node's figures.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.domain.words import counted

try:  # POSIX only; on other platforms the host's limits bound nothing
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "ENGINE_PIDS_PER_SANDBOX",
    "HOST_FDS_PER_SANDBOX",
    "HOST_THREADS_PER_SANDBOX",
    "MEMORY_SHARE",
    "SHARE",
    "STARTS_PER_ENGINE_CPU",
    "Bound",
    "ConcurrencyBound",
    "HostResources",
    "bound_concurrency",
    "raise_nofile",
    "starts_at_once",
]

# The engine's memory the sandboxes' limits may add up to: a quarter stays for the engine,
# the host process and the page cache (the sandbox image's files are read through it).
MEMORY_SHARE = 0.75
# The share of the free pids, threads and file descriptors the runs may take (the pids of a
# run are its cap, like its memory limit, not its use: the same share as memory).
SHARE = 0.75
# Measured on a waiting sandbox (Docker 20.10, containerd 1.4, cgroup v1; bench/README.md):
# the containerd-shim of one container has 12 threads.
ENGINE_PIDS_PER_SANDBOX = 12
# This process's threads per running sandbox: its scheduler worker (driving the channel) and
# its attach reader; a model call in flight adds the provider's deadline thread.
HOST_THREADS_PER_SANDBOX = 3
# This process's file descriptors per running sandbox: the attach socket, a docker API
# connection, the trace file, a model API connection, and one to spare.
HOST_FDS_PER_SANDBOX = 5

# Sandboxes being started at once per engine CPU: a start is CPU work of the engine, and its
# throughput saturates at about 2 per core (DOCKER-NOTES.md: ~7 runs/s from concurrency 4 on 2
# cores); more at once only make each start slower.
STARTS_PER_ENGINE_CPU = 2

_MIB = 1024 * 1024


def starts_at_once(engine_cpus: float | None) -> int:
    """How many sandboxes may be starting at once on an engine of ``engine_cpus`` CPUs.

    `STARTS_PER_ENGINE_CPU` per CPU (at least 2); 4 when the engine's CPUs are unknown.
    """
    if engine_cpus is None or engine_cpus <= 0:
        return 4
    return max(2, math.ceil(STARTS_PER_ENGINE_CPU * engine_cpus))


@dataclass(frozen=True)
class Bound:
    """One resource's bound on the concurrency.

    Attributes:
        name: ``memory``, ``pids``, ``threads`` or ``fds``.
        runs: how many runs it admits, or None when the resource could not be read.
        why: the arithmetic, for people (``0.75 x 23.5 GiB engine memory / 96 MiB per run``).
    """

    name: str
    runs: int | None
    why: str

    def to_json(self) -> dict[str, object]:
        """``{"runs", "why"}``."""
        return {"runs": self.runs, "why": self.why}


@dataclass(frozen=True)
class ConcurrencyBound:
    """The concurrency admitted and every bound that was weighed.

    Attributes:
        asked: what ``--concurrency`` (or the settings) asked.
        admitted: what runs at once: ``asked``, or the lowest bound below it (>= 1).
        bounds: every resource's bound, in the order weighed.
        spares: the warm pool's spare sandboxes admitted beside the runs (0: no pool).
        spares_wanted: the pool's size at ``admitted`` (0: no pool).
        spares_bound: why ``spares`` is below ``spares_wanted`` (``memory: 24 sandboxes``).
    """

    asked: int
    admitted: int
    bounds: tuple[Bound, ...] = field(default_factory=tuple)
    spares: int = 0
    spares_wanted: int = 0
    spares_bound: str = ""

    @property
    def binding(self) -> Bound | None:
        """The bound that lowered the concurrency, or None when ``asked`` was admitted."""
        if self.admitted >= self.asked:
            return None
        known = [b for b in self.bounds if b.runs is not None]
        return min(known, key=lambda b: b.runs or 0) if known else None

    def describe(self) -> str:
        """One line: what runs at once and why (the plan prints it)."""
        limit = self.binding
        known = [b for b in self.bounds if b.runs is not None]
        unknown = [b.name for b in self.bounds if b.runs is None]
        if limit is not None:
            why = f"bound by {limit.name}: {limit.why}"
            head = f"{self.admitted} at once (asked {self.asked}; {why})"
        else:
            head = f"{self.admitted} at once (as asked: nothing here bounds it lower)"
        others = [f"{b.name} {b.runs}" for b in known if b is not limit]
        tail = f"; runs each other bound allows: {', '.join(others)}" if others else ""
        if unknown:
            tail += f"; unknown: {', '.join(unknown)}"
        if self.spares_wanted:
            tail += f"; warm pool: {counted(self.spares, 'spare sandbox', 'spare sandboxes')}"
            if self.spares < self.spares_wanted:
                tail += f" (of {self.spares_wanted} wanted; bound by {self.spares_bound})"
        return head + tail

    def to_json(self) -> dict[str, object]:
        """The bound as JSON: ``{"asked", "admitted", "binding", "bounds", "pool_spares"}``.

        ``bounds`` maps each name to ``{"runs", "why"}``; ``pool_spares`` is `spares`.
        """
        limit = self.binding
        return {
            "asked": self.asked,
            "admitted": self.admitted,
            "binding": limit.name if limit is not None else None,
            "bounds": {b.name: b.to_json() for b in self.bounds},
            "pool_spares": self.spares,
        }


@dataclass(frozen=True)
class HostResources:
    """What this host has free now (each None when it cannot be read).

    Attributes:
        pids_free: ``min(kernel.pid_max, kernel.threads-max)`` less the tasks that exist now.
        nproc_free: ``RLIMIT_NPROC`` (soft) less the tasks that exist now (an upper bound of
            the user's own); None when unlimited.
        fds_free: ``RLIMIT_NOFILE`` (soft) less this process's open descriptors.
    """

    pids_free: int | None
    nproc_free: int | None
    fds_free: int | None

    @classmethod
    def read(cls, proc: Path = Path("/proc")) -> HostResources:
        """Read them from ``/proc`` and the process's rlimits (nothing raises)."""
        tasks = _tasks_now(proc)
        pid_max = _read_int(proc / "sys/kernel/pid_max")
        threads_max = _read_int(proc / "sys/kernel/threads-max")
        kernel = [v for v in (pid_max, threads_max) if v is not None]
        pids_free = min(kernel) - tasks if kernel and tasks is not None else None
        nproc_free = None
        fds_free = None
        if resource is not None:
            nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
            if nproc != resource.RLIM_INFINITY and tasks is not None:
                nproc_free = nproc - tasks
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if nofile != resource.RLIM_INFINITY:
                fds_free = nofile - _open_fds(proc)
        return cls(pids_free, nproc_free, fds_free)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _tasks_now(proc: Path) -> int | None:
    """Every task (thread) of the machine now: ``/proc/loadavg``'s ``running/total`` field."""
    try:
        return int(proc.joinpath("loadavg").read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


def _open_fds(proc: Path) -> int:
    try:
        return len(os.listdir(proc / "self/fd"))
    except OSError:
        return 0


def raise_nofile() -> int | None:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return the new soft one.

    Nothing is raised beyond what the hard limit already allows (no privilege is used); a
    platform without rlimits, or a refusal, leaves the limit as it was.
    """
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _share_of(free: int | None, per_run: int, share: float, what: str) -> tuple[int | None, str]:
    if free is None:
        return None, f"{what} unknown"
    runs = max(0, math.floor(share * max(0, free) / per_run))
    return runs, f"{share:g} x {free:,} free {what} / {per_run} per run"


def bound_concurrency(
    asked: int,
    *,
    memory_mb: int,
    pids_limit: int,
    engine_memory_bytes: int | None,
    host: HostResources,
    engine_is_local: bool = True,
    extra: tuple[Bound, ...] = (),
    pool: Callable[[int], int] | None = None,
) -> ConcurrencyBound:
    """Admit at most ``asked`` runs at once, within every bound of the module docstring.

    Args:
        asked: the concurrency asked (>= 1).
        memory_mb: each run's memory limit, MiB.
        pids_limit: each run's pids limit.
        engine_memory_bytes: the engine's memory (``docker info`` ``MemTotal``), or None.
        host: this host's free resources (`HostResources.read`).
        engine_is_local: the engine runs on this kernel (its pids are this kernel's).
        extra: the caller's own bounds, weighed with these (a ceiling's, say); they bound
            runs only (a spare sandbox reserves no ceiling).
        pool: the warm pool's wanted size at a concurrency (`runner.backends.warmpool.pool.
            pool_size`), or None when the runs have no pool.

    Returns:
        The admitted concurrency (never below 1: one run always fits its own limits) with
        every bound weighed, and the pool's spares: what the resource bounds leave beside the
        admitted runs, up to the pool's wanted size.
    """
    bounds: list[Bound] = []
    if engine_memory_bytes is None:
        bounds.append(Bound("memory", None, "engine memory unknown"))
    else:
        runs = math.floor(MEMORY_SHARE * engine_memory_bytes / (memory_mb * _MIB))
        bounds.append(
            Bound(
                "memory",
                runs,
                f"{MEMORY_SHARE:g} x {engine_memory_bytes / 1024**3:.1f} GiB engine memory"
                f" / {memory_mb} MiB per run",
            )
        )
    per_pids = pids_limit + ENGINE_PIDS_PER_SANDBOX + HOST_THREADS_PER_SANDBOX
    if engine_is_local:
        bounds.append(Bound("pids", *_share_of(host.pids_free, per_pids, SHARE, "kernel pids")))
    else:
        bounds.append(Bound("pids", None, "a remote engine's kernel pids are unknown"))
    per_thread = HOST_THREADS_PER_SANDBOX + (pids_limit if engine_is_local else 0)
    if host.nproc_free is None:
        bounds.append(Bound("threads", None, "RLIMIT_NPROC unlimited"))
    else:
        bounds.append(
            Bound("threads", *_share_of(host.nproc_free, per_thread, SHARE, "RLIMIT_NPROC tasks"))
        )
    bounds.append(
        Bound(
            "fds",
            *_share_of(host.fds_free, HOST_FDS_PER_SANDBOX, SHARE, "RLIMIT_NOFILE descriptors"),
        )
    )
    per_sandbox = [b for b in bounds if b.runs is not None]  # each spare costs what a run does
    bounds.extend(extra)
    known = [b.runs for b in bounds if b.runs is not None]
    admitted = max(1, min([asked, *known]))
    wanted = max(0, pool(admitted)) if pool is not None else 0
    spares, why = wanted, ""
    tightest = min(per_sandbox, key=lambda b: b.runs or 0) if per_sandbox else None
    if tightest is not None and tightest.runs is not None and tightest.runs - admitted < wanted:
        spares = max(0, tightest.runs - admitted)
        why = f"{tightest.name}: {counted(tightest.runs, 'sandbox', 'sandboxes')}"
    return ConcurrencyBound(asked, admitted, tuple(bounds), spares, wanted, why)
