"""The warm pool: sandboxes started before their runs, each handed out once (``submit``).

Modules:
    pool      `WarmPool`: the spares per key, their refills, hand-out and drain
    poolkey   what fixes a warm sandbox at creation (`PoolKey`), the pool's size, its spec
    pooled    `PooledBackend`: a backend behind a warm pool

A backend pools through its hooks (`runner.backends.base.Backend.pool_size` and ``with_pool``):
the Docker backend always, the namespace backend when it starts sandboxes from zygotes with
cgroups. Nothing here names a backend.

May import: `runner.backends` (base, labels), `runner.wire` (environment names),
`runner.errors`, `runner.hostlog`.
"""

__all__ = ["pool", "pooled", "poolkey"]
