"""The sandbox backend interface: what every backend (docker now; namespaces, k8s later) provides.

A backend turns a `SandboxSpec` into one isolated process tree with a byte channel to its
stdin and its demultiplexed stdout/stderr. It knows nothing of the protocol spoken over that
channel (runner.episode.channel) nor of workflows. "The sandbox broke" is an
`InfrastructureError`; "the program inside failed" is a normal `ExitState`.

Callers never probe a backend for what it can do (no ``getattr``): `Backend` declares every
hook a caller uses, each with the default of a backend that lacks the feature (``close`` does
nothing, no engine figures, no warm pool, a local engine). `DelegatingBackend` is the base of a
backend in front of another (the warm pool, the scheduler's tracking): it forwards every hook.

Invariants every backend keeps (checked by `runner.backends.conformance`, which every
sandboxing backend's tests run):
- no network, read-only root filesystem, no capabilities, non-root, resource limits;
- a sandbox is always removed when its context exits, after its `ExitState` was read;
- `ExitState.killed_by_host` is True exactly when this process sent the kill;
- a retry never creates a second sandbox for the same `SandboxSpec.run_id`;
- a sandbox ends by itself at its hard lifetime cap (`SandboxSpec.hard_cap`), fixed when it is
  created and enforced inside it, so that no sandbox outlives a host that died without
  cleaning up (SIGKILL, power loss) by more than that; and the end of its stdin (the host's
  end of the channel closed) reaches the program inside as end-of-file.
"""

from __future__ import annotations

import abc
import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # capacity imports nothing of this module; the type is only named here
    from runner.backends.capacity import Bound

STDOUT = 1
STDERR = 2

# The unprivileged user of the sandbox image (images/Dockerfile).
DEFAULT_SANDBOX_USER = "10001:10001"

# Seconds a sandbox may live past everything it can legitimately wait for (`LifetimeCap`):
# container start, the host's deadline poll and kill, and the runtime's own deadline watchdog
# (`runner.runtime.watchdog`) all come first, so the cap only ends sandboxes nobody else ended.
CAP_GRACE_S = 10.0


@dataclass(frozen=True)
class Mount:
    """A host folder or file bound into the sandbox.

    Attributes:
        source: absolute host path (spaces, colons and non-ASCII are fine).
        target: absolute path inside the sandbox.
        read_only: True unless the mount is a deliberate, visibly named opt-in.
    """

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ResourceLimits:
    """Per-sandbox limits. Units are in the names.

    Attributes:
        memory_mb: memory limit (swap equal to it: no extra swap).
        pids_limit: maximum processes and threads.
        cpus: CPU share, e.g. 1.0 is one core.
        tmpfs_mb: size of the writable ``/tmp`` (HOME and TMPDIR point into it).
        timeout_s: wall time after which the host kills the sandbox (status ``timeout``).
        max_calls: call lines one episode may record (enforced by the host, not the backend;
            status ``limit_exceeded``).
        max_trace_mb: MiB of trace one episode may write (host-enforced, like ``max_calls``).
    """

    memory_mb: int = 512
    pids_limit: int = 128
    cpus: float = 1.0
    tmpfs_mb: int = 64
    timeout_s: float = 300.0
    max_calls: int = 10_000
    max_trace_mb: int = 128


@dataclass(frozen=True)
class LifetimeCap:
    """The hard cap on a sandbox's lifetime, one rule for every backend.

    Fixed when the sandbox is created and enforced by the sandbox itself (the Docker backend
    runs the command under coreutils ``timeout -s KILL`` as PID 1), so it holds when the host
    is gone: the host's own deadline (``timeout_s``) is the normal end, this is the backstop.
    The cap is everything a sandbox may legitimately wait for, plus a grace; every term is in
    seconds and the terms that do not exist yet are parameters at 0.

    Attributes:
        run_timeout_s: the longest run timeout of the policy (and settings) in effect.
        pool_lifetime_s: how long a sandbox may wait, started, before it gets a run (a warm
            pool; 0: sandboxes are started for one run).
        rate_limit_wait_s: the longest a run may be held waiting on a provider's rate limit
            beyond its own timeout (0: none).
        grace_s: the margin past all of that (`CAP_GRACE_S`).
    """

    run_timeout_s: float
    pool_lifetime_s: float = 0.0
    rate_limit_wait_s: float = 0.0
    grace_s: float = CAP_GRACE_S

    def __post_init__(self) -> None:
        terms = (self.run_timeout_s, self.pool_lifetime_s, self.rate_limit_wait_s, self.grace_s)
        if not all(math.isfinite(t) and t >= 0 for t in terms) or self.total_s <= 0:
            raise ValueError(f"lifetime cap terms must be finite and >= 0: {self!r}")

    @property
    def total_s(self) -> float:
        """The cap in seconds: pool lifetime + run timeout + rate-limit wait + grace."""
        return self.pool_lifetime_s + self.run_timeout_s + self.rate_limit_wait_s + self.grace_s

    @property
    def whole_s(self) -> int:
        """`total_s` rounded up to whole seconds (what ``timeout`` is given; at least 1)."""
        return max(1, math.ceil(self.total_s))


@dataclass(frozen=True)
class SandboxSpec:
    """Everything needed to start one sandbox for one run attempt.

    Attributes:
        run_id: validated id of the run attempt; the container name is derived from it, so a
            retried create cannot make a second container.
        image: image reference.
        command: the program's argv; the backend runs it under the lifetime cap (Docker:
            as the only child of coreutils ``timeout``, which is PID 1).
        mounts: bind mounts; read-only unless stated.
        env: the complete environment inside; nothing of the host's is passed through.
        limits: resource limits.
        labels: extra labels (the backend adds session, run, owner and version labels).
        workdir: working directory inside.
        user: ``uid:gid`` the command runs as; never root (`sandbox_user` picks it).
        cap: the hard lifetime cap; None means `LifetimeCap` of ``limits.timeout_s`` with the
            other terms at their defaults (see `hard_cap`).
        init: the command is the sandbox's init and enforces the lifetime cap itself (the
            runtime, `runner.runtime.pid1`): a backend runs it as PID 1 and passes the cap in
            `CAP_ENV` instead of wrapping it.
    """

    run_id: str
    image: str
    command: tuple[str, ...]
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    labels: Mapping[str, str] = field(default_factory=dict)
    workdir: str = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not a host path
    user: str = DEFAULT_SANDBOX_USER
    cap: LifetimeCap | None = None
    init: bool = False

    def __post_init__(self) -> None:
        uid = self.user.split(":", 1)[0]
        if not uid.isdigit() or int(uid) == 0:
            raise ValueError(f"sandbox user must be a numeric non-root uid[:gid]: {self.user!r}")

    @property
    def hard_cap(self) -> LifetimeCap:
        """The lifetime cap every backend enforces for this sandbox (never absent)."""
        return self.cap if self.cap is not None else LifetimeCap(self.limits.timeout_s)


def sandbox_user() -> str:
    """The ``uid:gid`` sandboxes run as: the invoking user's own ids when they are not root.

    Running as the host user lets the sandbox read tool folders that only their owner may read
    (a home folder of mode 0700 is common on Linux laptops); it is never root. When the host
    process is root, or the platform has no POSIX ids (Windows), the image's unprivileged
    ``sandbox`` user 10001:10001 is used (images/Dockerfile).
    """
    getuid = getattr(os, "getuid", None)
    getgid = getattr(os, "getgid", None)
    if getuid is None or getgid is None or getuid() == 0:
        return DEFAULT_SANDBOX_USER
    return f"{getuid()}:{getgid()}"


@dataclass(frozen=True)
class ExitState:
    """How a sandbox ended, read before it was removed.

    Attributes:
        exit_code: the main process's exit code (137 means only "SIGKILL", see DOCKER-NOTES.md).
        oom_killed: the engine's ``State.OOMKilled``.
        killed_by_host: this process sent the kill (timeout or interruption).
        error: the engine's own error text, if any (e.g. a failed start).
        ran_s: how long the sandbox ran, start to exit, as the engine (or the backend's own
            clock) measured it; None when unknown. It tells a sandbox that ended itself at its
            deadline (`LifetimeCap`, the runtime's watchdog) from one that died early.
    """

    exit_code: int
    oom_killed: bool = False
    killed_by_host: bool = False
    error: str = ""
    ran_s: float | None = None


@dataclass(frozen=True)
class Reaped:
    """A leftover sandbox the reaper removed, with what the engine recorded of its run.

    Attributes:
        name: the sandbox's name.
        run_id: its run label (None when it had none).
        labels: every label it carried (``io.sandbox-replay.ledger-key`` names its ledger run).
        sandbox_s: seconds it ran by the engine's own record (start to finish; a sandbox still
            running when reaped counts until its removal; one that never started, 0), or None
            when the engine could not tell.
    """

    name: str
    run_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    sandbox_s: float | None = None


class Sandbox(abc.ABC):
    """A started sandbox with its stdio attached. Used for exactly one run.

    Attributes:
        run_id: the run attempt's id.
        node: where it runs when the backend spans machines (the Ray backend: the Ray node
            id), written to the trace's ``run`` line; None for a local engine.
        name: the sandbox's own name (the Docker container's name, a pooled one's too; the
            namespace sandbox's id), written to the trace's ``run`` line as ``sandbox``; None
            where there is no sandbox to name (record's local process).
    """

    run_id: str
    node: str | None = None
    name: str | None = None

    @abc.abstractmethod
    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Send bytes to the sandbox's stdin, waiting at most ``timeout_s`` s (``None``: no limit).

        A sandbox that stops reading must not hold the host past its deadline
        (`runner.backends.timed_write.TimedWriter`); after a timed-out write the channel is
        unusable and the caller kills the sandbox.

        Raises:
            InfrastructureError: the channel is broken (the sandbox may have exited), or not all
                of ``data`` was taken within ``timeout_s`` seconds (raised ``from`` a
                `TimeoutError`, so the caller can tell the two apart).
        """

    @abc.abstractmethod
    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Yield ``(stream, payload)`` as output arrives, stream `STDOUT` or `STDERR`.

        Payloads are raw byte chunks with no relation to line or UTF-8 boundaries. Yields
        ``None`` when nothing arrived within ``poll_s`` seconds (so the caller can check its
        deadline); returns at end of output (the sandbox closed its stdout and stderr).
        """

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill every process of the sandbox now (SIGKILL) and remember that the host did it."""

    @abc.abstractmethod
    def wait(self, timeout_s: float) -> ExitState:
        """Wait for the sandbox to exit; kill it when it outlives ``timeout_s`` seconds.

        Returns:
            The exit state, read from the engine before removal.
        """


@dataclass(frozen=True)
class Capabilities:
    """Which limits a sandboxing backend enforces where backends legitimately differ.

    The conformance checks (`runner.backends.conformance`) read these flags and assert the
    stronger property wherever one is set; everything else is asserted of every backend.

    Attributes:
        reports_oom: a run killed by its memory limit has ``ExitState.oom_killed`` set (without
            it the allocation must still fail; the episode is then ``crashed``, not ``oom``).
        pids_limit: ``ResourceLimits.pids_limit`` is enforced (threads and processes count).
        cpu_limit: ``ResourceLimits.cpus`` is enforced as a CFS quota the sandbox's cgroup shows.
    """

    reports_oom: bool = True
    pids_limit: bool = True
    cpu_limit: bool = True


# (destination, source on the host, read-only) of one mount of a started sandbox, as its
# engine reports it (`Backend.engine_mounts`)
MountSeen = tuple[str, str, bool]

# Told when a warm pool hands a sandbox to a run (run id, labels, the run's cap in seconds)
# and when the run gives it back (run id): `runner.episode.poolbindings`.
OnAssign = Callable[[str, Mapping[str, str], float], None]
OnRelease = Callable[[str], None]


class Backend(abc.ABC):
    """A named way of making sandboxes.

    ``sandbox`` and ``reap`` are what every backend implements; every other method is a hook
    with the default of a backend that lacks the feature, so that callers ask instead of
    probing (`runner.backends.registry` names the backends, and makes them).

    Attributes:
        name: the registry name (`runner.backends.registry`), written to traces and reports.
    """

    name: str

    @abc.abstractmethod
    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """Create, attach and start a sandbox; on exit kill it if still running and remove it.

        Removal happens even when start fails half-way or the body raises.

        Raises:
            InfrastructureError: the engine is unusable or the sandbox could not start (with
                the engine's error and, when there is any, the sandbox's output attached).
        """

    @abc.abstractmethod
    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Remove leftover sandboxes of dead owners (never a live owner's).

        Each sandbox's run time is read from the engine before it is removed, so that the
        ledger can charge a dead run what it used (`runner.episode.reaping`). A sandbox
        labelled with another ledger than ``ledger`` is left to that ledger's own commands
        (removing it would lose the measurement) until it has been idle for a day.

        Args:
            ledger: the caller's ledger id (`runner.episode.reaping.ledger_id`), or None.

        Returns:
            The removed sandboxes.
        """

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - a hook with a default, not an abstract method
        """Release the backend's connections (default: it holds none). Idempotent."""

    # -- what the engine can tell -----------------------------------------------------------

    def engine_cpus(self) -> float | None:
        """How many CPUs a sandbox may be given at most (None: no such bound is known).

        The Docker engine refuses a ``cpus`` limit above its CPU count ("Range of CPUs is from
        0.01 to N"), so the host checks the limit before any run
        (`runner.episode.limits.check_engine_limits`).

        Raises:
            InfrastructureError: the engine could not be asked.
        """
        return None

    def engine_memory_bytes(self) -> int | None:
        """The engine's memory in bytes, the budget of the runs' memory limits (None: unknown).

        Raises:
            InfrastructureError: the engine could not be asked.
        """
        return None

    def image_id(self, image: str) -> str | None:
        """The id (``sha256:...``) of ``image`` for the trace's environment manifest.

        None: this backend cannot tell (the manifest then has none).

        Raises:
            InfrastructureError: the image is missing or the engine failed.
        """
        return None

    @property
    def is_local(self) -> bool:
        """The sandboxes run on this machine's kernel, so its free pids bound them.

        `runner.backends.capacity` weighs the pids only then; False for a remote engine or a
        cluster.
        """
        return True

    def concurrency_bounds(self) -> tuple[Bound, ...]:
        """Bounds this backend itself puts on the runs at once (default: none).

        E.g. the namespace backend without cgroups: one sandbox at a time.
        """
        return ()

    def engine_mounts(self, sandbox: Sandbox) -> list[MountSeen] | None:
        """The mounts of a started ``sandbox`` as the engine reports them.

        None: the engine reports none (the conformance checks then look from inside only).
        """
        return None

    # -- a warm pool ------------------------------------------------------------------------

    def pool_size(self, concurrency: int) -> int:
        """How many warm sandboxes this backend wants beside ``concurrency`` runs (0: no pool)."""
        return 0

    def with_pool(
        self,
        *,
        size: int,
        idle_cap_s: float,
        on_assign: OnAssign | None = None,
        on_release: OnRelease | None = None,
    ) -> Backend:
        """This backend behind a warm pool of ``size`` sandboxes (default: itself, no pool).

        Args:
            size: spare sandboxes the concurrency bound left room for (0: no pool).
            idle_cap_s: how long a pooled sandbox waits for a run before it ends itself.
            on_assign: told when a run takes a pooled sandbox (run id, labels, cap in s).
            on_release: told when the run gives it back (run id).
        """
        return self

    def expect_runs(self, runs: int) -> None:  # noqa: B027 - a hook with a default
        """At most ``runs`` more runs are coming (a warm pool makes no sandbox beyond them)."""

    # -- what the conformance checks read -----------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Which limits this backend enforces where backends differ (default: all)."""
        return Capabilities()

    def session_sandboxes(self) -> list[str] | None:
        """Names of this backend session's sandboxes that still exist.

        None: it cannot list them (a sandboxing backend must: the conformance checks count its
        leftovers).
        """
        return None


class DelegatingBackend(Backend):
    """A backend in front of another: every hook goes to ``inner`` unless overridden.

    Attribute lookups that `Backend` does not declare (a backend's own surface, e.g. the
    Docker backend's ``api``) go to ``inner`` too. `with_pool` is not forwarded: a pool would
    be put in front of ``inner`` and lose this wrapper, so a wrapper keeps none unless it says
    so.

    Args:
        inner: the backend that makes the sandboxes.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        # the wrapper's own name when its class has one (a backend of its own), else inner's
        self.name = getattr(type(self), "name", inner.name)

    def __getattr__(self, attr: str) -> Any:  # the inner backend's own surface
        if attr == "inner":  # not set yet (a half-made wrapper): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """``inner``'s."""
        return self.inner.sandbox(spec)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """``inner``'s."""
        return self.inner.reap(ledger)

    def close(self) -> None:
        """``inner``'s."""
        self.inner.close()

    def engine_cpus(self) -> float | None:
        """``inner``'s."""
        return self.inner.engine_cpus()

    def engine_memory_bytes(self) -> int | None:
        """``inner``'s."""
        return self.inner.engine_memory_bytes()

    def image_id(self, image: str) -> str | None:
        """``inner``'s."""
        return self.inner.image_id(image)

    @property
    def is_local(self) -> bool:
        """``inner``'s."""
        return self.inner.is_local

    def concurrency_bounds(self) -> tuple[Bound, ...]:
        """``inner``'s."""
        return self.inner.concurrency_bounds()

    def engine_mounts(self, sandbox: Sandbox) -> list[MountSeen] | None:
        """``inner``'s."""
        return self.inner.engine_mounts(sandbox)

    def pool_size(self, concurrency: int) -> int:
        """``inner``'s."""
        return self.inner.pool_size(concurrency)

    def expect_runs(self, runs: int) -> None:
        """``inner``'s."""
        self.inner.expect_runs(runs)

    def capabilities(self) -> Capabilities:
        """``inner``'s."""
        return self.inner.capabilities()

    def session_sandboxes(self) -> list[str] | None:
        """``inner``'s."""
        return self.inner.session_sandboxes()
