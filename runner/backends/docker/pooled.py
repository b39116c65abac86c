"""The Docker backend with a warm pool in front of it (`runner.backends.docker.pool`).

`PooledBackend` hands every runtime sandbox (``spec.init``: the runtime as PID 1, which waits
for its run on stdin) to the pool and everything else (a command that is not the runtime) to
the backend as it is. `pooled_backend` makes one for ``submit`` when the settings allow it
(``SANDBOX_REPLAY_POOL``, default on; ``0`` turns it off), sized by the admitted concurrency.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from runner.backends.base import Backend, Reaped, Sandbox, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.pool import WarmPool

__all__ = ["PooledBackend", "pooled_backend"]


class PooledBackend(Backend):
    """``inner``'s sandboxes, runtime sandboxes taken from a `WarmPool` of its own.

    Args:
        inner: the Docker backend (anything with ``sandbox``, ``reap``; other attributes, e.g.
            ``api`` and ``image_id``, are its own).
        size: warm sandboxes per key (`pool_size` of the concurrency, within the budget).
        idle_cap_s: a pooled sandbox's life while unassigned.
        on_assign, on_release: see `WarmPool`.
    """

    # its sandboxes are the Docker backend's (the trace's ``backend``; the conformance suite's
    # "docker" entry covers them: what it adds is tests/integration/test_pool.py's)
    name = "docker"

    def __init__(
        self,
        inner: Backend,
        *,
        size: int,
        idle_cap_s: float,
        on_assign: Callable[[str, Mapping[str, str], float], None] | None = None,
        on_release: Callable[[str], None] | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name  # the namespace backend's zygote sandboxes pool too
        self.pool = WarmPool(
            inner.sandbox,
            size=size,
            idle_cap_s=idle_cap_s,
            session=str(getattr(inner, "session_id", "")),
            on_assign=on_assign,
            on_release=on_release,
        )

    def __getattr__(self, attr: str) -> Any:  # api, image_id, containers, ... of the backend
        return getattr(self.inner, attr)

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """A warm sandbox for a runtime spec (else ``inner``'s own); see `WarmPool.take`."""
        return self.pool.take(spec) if spec.init else self.inner.sandbox(spec)

    def expect_runs(self, runs: int) -> None:
        """At most ``runs`` more runs are coming: the pool makes no sandbox beyond them."""
        self.pool.expect(runs)

    def engine_cpus(self) -> float | None:
        """``inner``'s."""
        return self.inner.engine_cpus()

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """``inner``'s (pooled sandboxes of dead owners are ordinary leftovers)."""
        return self.inner.reap(ledger)

    def close(self) -> None:
        """Drain the pool, then close ``inner``."""
        self.pool.close()
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


def pooled_backend(
    inner: Backend,
    *,
    enabled: bool,
    size: int,
    idle_cap_s: float,
    on_assign: Callable[[str, Mapping[str, str], float], None] | None = None,
    on_release: Callable[[str], None] | None = None,
) -> Backend:
    """``inner`` behind a warm pool of ``size`` when ``enabled`` and ``inner`` is Docker's.

    ``size`` is the spares the concurrency bound left room for beside the runs
    (`runner.backends.capacity.ConcurrencyBound.spares`, at most `pool_size` of the
    concurrency); 0 is no pool. The namespace backend pools when it starts sandboxes from
    zygotes (its ``warm_pool``: a fork is cheap, but its set-up and the runtime's ``hello``
    still take ~15-20 ms a run could wait for). Other backends (the unsandboxed process backend,
    namespace with bwrap per sandbox, Ray, test doubles) are returned as they are.
    """
    pools = isinstance(inner, DockerBackend) or getattr(inner, "warm_pool", False) is True
    if not enabled or size < 1 or not pools:
        return inner
    return PooledBackend(
        inner,
        size=size,
        idle_cap_s=idle_cap_s,
        on_assign=on_assign,
        on_release=on_release,
    )
