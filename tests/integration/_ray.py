"""Fixtures of the Ray tests: a second Docker engine and a small Ray cluster on 127.0.0.1.

The second engine is a ``dockerd`` of its own (data root, exec root, pidfile, unix socket;
``--bridge=none --iptables=false``: no network of its own, no firewall rules) in a network
namespace of its own (``unshare --net``, only ``lo``): a dockerd started with
``--bridge=none`` in the host's namespace deletes the main engine's ``docker0`` bridge
(verified; the user-image build then failed), so the fixture also checks that ``docker0`` is
untouched. The sandbox image is loaded into it, so the worker node that uses it
(``DOCKER_HOST`` in that node's environment) runs containers its own engine made. The cluster
(``ray.cluster_utils.Cluster``): a head with no sandbox slots and two workers, each with one CPU
and a few slots, usage stats off, no dashboard, everything on 127.0.0.1, and token
authentication on (``RAY_AUTH_MODE=token`` with a token made per test session, in this process
and every node: ``submit`` refuses a cluster without it). Teardown always stops every process
the fixture started (Ray's by the cluster's own shutdown, dockerd by its pid), never anything
by name.

Tests that need Ray or root fail (never skip) under CI=true, like the Docker tests.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import _unusable
from tests.support.dockerd import Engine, second_dockerd

SLOTS = 3
# Ray turns a loopback address into the machine's own IP unless it believes it runs on a
# laptop (ray._private.services.get_node_ip_address); read when ray is first imported, so
# the test cluster and its drivers stay on 127.0.0.1.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
os.environ.update(LOOPBACK_ENV)
# Token authentication (README, "Many machines"): read by Ray's C++ config when this process
# first uses ray, and inherited by the GCS the head starts from here.
AUTH_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
os.environ.update(AUTH_ENV)


@contextlib.contextmanager
def second_engine(image: str, extra_args: Sequence[str] = ()) -> Iterator[Engine]:
    """Start a dockerd of its own with ``image`` loaded; stop it (by pid) on exit.

    ``extra_args`` go to that dockerd (``--add-runtime=crun=/usr/bin/crun``: the runtime tests).
    The start, the network namespace and the ``docker0`` check: `tests.support.dockerd`.
    """
    with second_dockerd(image, prefix="srray-", extra_args=extra_args) as engine:
        yield engine


def ray_module() -> Any:
    """``ray`` (the test fails under CI when the extra is missing, skips otherwise)."""
    try:
        import ray
        from ray.cluster_utils import Cluster  # noqa: F401
    except ImportError as exc:
        _unusable(f"ray is not installed (pip install 'sandbox-replay[ray]'): {exc}")
    return ray


NODE_ENV = {
    **LOOPBACK_ENV,
    **AUTH_ENV,
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_metrics_collection": "0",
}


def worker_args(docker_host: str | None, cache: Path, slots: int = SLOTS) -> dict[str, Any]:
    """``Cluster.add_node`` arguments of a worker with ``slots`` sandbox slots on an engine."""
    env = {**NODE_ENV, "SANDBOX_REPLAY_RAY_CACHE": str(cache)}
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    return {
        "num_cpus": 1,
        "resources": {"sandbox_slots": slots},
        "node_ip_address": "127.0.0.1",
        "env_vars": env,
        "object_store_memory": 80 * 1024 * 1024,
    }


@dataclass
class RayCluster:
    """A running test cluster: its address, the cluster object and its worker nodes."""

    address: str
    cluster: Any
    workers: list[Any]
    engine: Engine | None
    caches: Path


@contextlib.contextmanager
def ray_cluster(engine: Engine | None) -> Iterator[RayCluster]:
    """Head (no slots) + worker A (main engine) + worker B (``engine``, when given); always
    shut down."""
    ray_module()
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    caches = Path(tempfile.mkdtemp(prefix="srray-cache-", dir="/tmp"))
    caches.chmod(0o755)  # the sandbox user reads the unpacked blobs through it
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 0,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "env_vars": dict(NODE_ENV),
            "object_store_memory": 80 * 1024 * 1024,
        },
    )
    try:
        workers = [cluster.add_node(**worker_args(None, caches / "a"))]
        if engine is not None:
            workers.append(cluster.add_node(**worker_args(engine.host, caches / "b")))
        cluster.wait_for_nodes()
        yield RayCluster(cluster.address, cluster, workers, engine, caches)
    finally:
        cluster.shutdown()
        shutil.rmtree(caches, ignore_errors=True)


def node_ids(cluster: RayCluster) -> dict[str, str]:
    """``{"a" | "b": Ray node id}`` of the two workers."""
    return {name: w.node_id for name, w in zip("ab", cluster.workers, strict=True)}
