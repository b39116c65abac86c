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

__all__ = ["PooledBackend"]


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
