"""The Ray backend (``--backend ray``): episodes' sandboxes on the worker nodes of a cluster.

Modules:
    backend   `RayBackend` and `RaySandbox` (driver side): episode tasks, reaping, node facts
    node      what runs on a node: one sandbox on its own engine (the Docker backend), reaper
    relay     the actor on the driver's node that carries every sandbox's stdio
    shipping  mount sources as content-addressed bytes (packed on the driver, unpacked on nodes)

Importing this package imports ``ray`` (the optional extra ``sandbox-replay[ray]``, ~1 s):
import it where it is used.

May import: `runner.backends` (base, docker), `runner.errors`, ray and the standard library.
"""

from runner.backends.ray.backend import SLOTS, RayBackend, RaySandbox, connect_cluster

__all__ = ["SLOTS", "RayBackend", "RaySandbox", "connect_cluster"]
