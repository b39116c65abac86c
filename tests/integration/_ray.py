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
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import _unusable

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


@dataclass
class Engine:
    """A second dockerd: its socket address and the folders it owns."""

    host: str
    root: Path
    pid: int


def _engine_answers(host: str) -> bool:
    try:
        out = subprocess.run(
            ["docker", "-H", host, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def bridge_state() -> str | None:
    """``docker0`` of the host's network namespace (its interface index), None when absent."""
    try:
        return Path("/sys/class/net/docker0/ifindex").read_text().strip()
    except OSError:
        return None


def _image_id(host: str | None, image: str) -> str | None:
    cmd = ["docker", *(["-H", host] if host else []), "image", "inspect", "-f", "{{.Id}}", image]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


@contextlib.contextmanager
def second_engine(image: str, extra_args: Sequence[str] = ()) -> Iterator[Engine]:
    """Start a dockerd of its own with ``image`` loaded; stop it (by pid) on exit.

    ``extra_args`` go to that dockerd (``--add-runtime=crun=/usr/bin/crun``: the runtime tests).
    """
    if os.geteuid() != 0:
        _unusable("a second dockerd needs root")
    if shutil.which("dockerd") is None:
        _unusable("dockerd is not installed")
    if shutil.which("unshare") is None:
        _unusable("unshare (util-linux) is needed to give the second dockerd a network of its own")
    bridge_before = bridge_state()
    # short paths: a unix socket path is limited to 108 bytes
    root = Path(tempfile.mkdtemp(prefix="srray-", dir="/tmp"))
    host = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("wb")
    # A network namespace of its own (only lo, down: the engine needs none, its sandboxes have
    # none); unshare execs dockerd, so the pid stays dockerd's and it is stopped by it.
    netns = ["unshare", "--net", "--"]
    proc = subprocess.Popen(
        [
            *netns,
            "dockerd",
            f"--data-root={root}/data",
            f"--exec-root={root}/exec",
            f"--pidfile={root}/docker.pid",
            f"-H={host}",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--log-level=warn",
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not _engine_answers(host):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
                _unusable(f"the second dockerd did not start: {tail}")
            time.sleep(0.5)
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["docker", "-H", host, "load", "-q"], stdin=save.stdout, capture_output=True
        )
        save.wait(timeout=300)
        if load.returncode != 0 or save.returncode != 0:
            _unusable(f"cannot load {image} into the second engine: {load.stderr!r}")
        assert _image_id(host, image) == _image_id(None, image)
        assert bridge_state() == bridge_before, "the second dockerd changed the host's docker0"
        yield Engine(host, root, proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        subprocess.run(["umount", "-R", f"{root}/exec"], capture_output=True, check=False)
        subprocess.run(["umount", "-R", f"{root}/data"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


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
