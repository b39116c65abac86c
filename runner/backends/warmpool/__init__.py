"""The warm pool: sandboxes started before their runs, each handed out once (``submit``).

Modules:
    pool      `WarmPool`: the spares per key, their refills, hand-out and drain
    poolkey   what fixes a warm sandbox at creation (`PoolKey`), the pool's size, its spec
    pooled    `PooledBackend`: a backend behind a warm pool; `PoolingBackend`: one that can be

A backend pools through its hooks (`runner.backends.base.Backend.pool_size` and ``with_pool``),
which `pooled.PoolingBackend` implements once: the Docker backend derives from it and always
pools, the namespace backend derives from it and pools when it starts sandboxes from zygotes
with cgroups. Nothing here names a backend.

May import: `runner.backends` (base, labels), `runner.wire` (environment names),
`runner.errors`, `runner.hostlog`.
"""

__all__ = ["pool", "pooled", "poolkey"]
