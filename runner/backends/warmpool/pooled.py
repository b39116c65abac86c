"""A backend with a warm pool in front of it (`runner.backends.warmpool.pool`).

`PooledBackend` hands every runtime sandbox (``spec.init``: the runtime as PID 1, which waits
for its run on stdin) to the pool and everything else (a command that is not the runtime) to
the backend as it is. A backend's ``with_pool`` (Docker's; the namespace backend's with
zygotes) makes one for ``submit`` when the settings allow it (``SANDBOX_REPLAY_POOL``, default
on; ``0`` turns it off), sized by the admitted concurrency.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from runner.backends.base import (
    Backend,
    DelegatingBackend,
    OnAssign,
    OnRelease,
    Sandbox,
    SandboxSpec,
)
from runner.backends.warmpool.pool import WarmPool
from runner.backends.warmpool.poolkey import pool_size

__all__ = ["PooledBackend", "PoolingBackend"]


class PoolingBackend(Backend):
    """A backend whose runtime sandboxes can wait warm: ``with_pool`` wraps it in `PooledBackend`.

    The Docker backend and the namespace backend derive from it (one body for both hooks of
    `runner.backends.base.Backend`); `warm_pool` says whether this instance pools at all.
    """

    @property
    def warm_pool(self) -> bool:
        """Whether ``submit`` keeps a warm pool of this backend's sandboxes (default: yes)."""
        return True

    def pool_size(self, concurrency: int) -> int:
        """The warm pool's wanted size beside ``concurrency`` runs (0 unless `warm_pool`)."""
        return pool_size(concurrency) if self.warm_pool else 0

    def with_pool(
        self,
        *,
        size: int,
        idle_cap_s: float,
        on_assign: OnAssign | None = None,
        on_release: OnRelease | None = None,
    ) -> Backend:
        """This backend behind a `PooledBackend` of ``size`` (itself: ``size`` < 1, no pool)."""
        if size < 1 or not self.warm_pool:
            return self
        return PooledBackend(
            self, size=size, idle_cap_s=idle_cap_s, on_assign=on_assign, on_release=on_release
        )


class PooledBackend(DelegatingBackend):
    """``inner``'s sandboxes, runtime sandboxes taken from a `WarmPool` of its own.

    Its ``name`` is ``inner``'s (the trace's ``backend``; the conformance suite's "docker"
    entry covers its sandboxes: what it adds is tests/integration/test_pool.py's).

    Args:
        inner: the pooled backend (its other attributes, e.g. ``api``, stay reachable).
        size: warm sandboxes per key (`pool_size` of the concurrency, within the budget).
        idle_cap_s: a pooled sandbox's life while unassigned.
        on_assign, on_release: see `WarmPool`.
    """

    def __init__(
        self,
        inner: Backend,
        *,
        size: int,
        idle_cap_s: float,
        on_assign: OnAssign | None = None,
        on_release: OnRelease | None = None,
    ) -> None:
        super().__init__(inner)
        self.pool = WarmPool(
            inner.sandbox,
            size=size,
            idle_cap_s=idle_cap_s,
            session=str(getattr(inner, "session_id", "")),
            on_assign=on_assign,
            on_release=on_release,
        )

    def sandbox(self, spec: SandboxSpec) -> AbstractContextManager[Sandbox]:
        """A warm sandbox for a runtime spec (else ``inner``'s own); see `WarmPool.take`."""
        return self.pool.take(spec) if spec.init else self.inner.sandbox(spec)

    def expect_runs(self, runs: int) -> None:
        """At most ``runs`` more runs are coming: the pool makes no sandbox beyond them."""
        self.pool.expect(runs)

    def close(self) -> None:
        """Drain the pool, then close ``inner``."""
        self.pool.close()
        self.inner.close()
