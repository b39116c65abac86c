"""The Ray backend (``--backend ray``): episodes' sandboxes on the worker nodes of a cluster.

Modules:
    backend   `RayBackend` and `RaySandbox` (driver side): episode tasks, reaping, node facts
    auth      does the cluster authenticate its clients? (a gRPC probe without credentials)
    driverenv the driver's provider keys out of every readable process environment
    node      what runs on a node: one sandbox on its own engine (the Docker backend), reaper
    relay     the actor on the driver's node that carries every sandbox's stdio
    shipping  mount sources as content-addressed bytes (packed on the driver, unpacked on nodes)
    doctor    ``doctor --backend ray``: the cluster's ``auth``, then the Docker checks per node

Importing `backend`, `node` or `relay` imports ``ray`` (the optional extra
``sandbox-replay[ray]``, ~1 s); the package's names load them on first use (`lazy_exports`),
so ``auth`` and ``driverenv`` run without ray (the probe's own process).

May import: `runner.backends` (base, docker), `runner.errors`, `runner.lazyexports`, ray, grpc
(`auth` only) and the standard library.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

if TYPE_CHECKING:  # the names for mypy and import-linter; loaded on first use at run time
    from runner.backends.ray.backend import SLOTS, RayBackend, RaySandbox, connect_cluster

__all__ = ["SLOTS", "RayBackend", "RaySandbox", "connect_cluster"]
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "runner.backends.ray.backend"))
