"""What runs on a worker node: one sandbox on the node's own engine, the reaper, checks.

Every function here runs inside a Ray worker process of some node and uses that node's Docker
engine through the Docker backend itself (`runner.backends.docker.DockerBackend`, connected to
the node's ``DOCKER_HOST`` or the default socket): the same hardened create, attach, start,
kill, exit state and removal as a local run, and the same owner labels, so the node's reaper
knows the leftovers of a worker process that died.

`run_sandbox` is one episode's Ray task: it unpacks the shipped mounts into the node's blob
cache (`runner.backends.ray.shipping`), starts the container, says so to the relay
(`runner.backends.ray.relay`), then pumps output frames to the relay while a second thread
applies the driver's commands (write, kill, wait, close). It receives a `SandboxSpec` and
bytes, nothing else: no settings, no keys, no ledger.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import ray

from runner.backends.base import ExitState, Reaped, SandboxSpec
from runner.backends.docker import DockerBackend
from runner.backends.docker.sandbox import DockerSandbox
from runner.backends.ray import shipping
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

# The node's blob folder (default: sandbox-replay-ray-<uid>/blobs in the node's temp folder).
CACHE_ENV = "SANDBOX_REPLAY_RAY_CACHE"
POLL_S = 0.2
# One shipped mount: (index in spec.mounts, digest, is_file, [ObjectRef of the tar bytes]). The
# reference sits in a list so that Ray hands it over unresolved: a node fetches a blob only
# when its cache lacks the digest.
ShippedMount = tuple[int, str, bool, list[Any]]

# How often one worker process looks for long-unused blobs to remove.
EVICT_EVERY_S = 3600.0

_lock = threading.Lock()
_backend: list[DockerBackend] = []
_last_evicted: list[float] = []


def node_id() -> str:
    """This node's Ray node id (hex)."""
    return str(ray.get_runtime_context().get_node_id())


def cache_dir() -> Path:
    """The node's blob cache folder (`CACHE_ENV`, else one under the temp folder)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"sandbox-replay-ray-{os.getuid()}" / "blobs"


def node_backend() -> DockerBackend:
    """The Docker backend of this worker process, on the node's own engine (made once).

    Raises:
        InfrastructureError: the node's engine is unreachable.
    """
    with _lock:
        if not _backend:
            _backend.append(DockerBackend.connect(None))
        return _backend[0]


def materialized(spec: SandboxSpec, shipped: list[ShippedMount]) -> SandboxSpec:
    """``spec`` with each shipped mount's source replaced by its unpacked copy on this node.

    Raises:
        InfrastructureError: a blob could not be fetched, verified or unpacked.
    """
    cache = cache_dir()
    mounts = list(spec.mounts)
    _evict_now_and_then(cache)
    with shipping.cache_lock(cache, exclusive=False):
        for index, digest, is_file, ref in shipped:
            if not shipping.is_unpacked(cache, digest):
                try:
                    data = cast(bytes, ray.get(ref[0]))
                except ray.exceptions.RayError as exc:
                    raise InfrastructureError(
                        f"cannot fetch blob {digest} from the driver"
                    ) from exc
                shipping.unpack(cache, digest, data)
            shipping.mark_used(cache, digest)
            source = shipping.unpacked_path(cache, digest, is_file)
            mounts[index] = replace(mounts[index], source=source)
    return replace(spec, mounts=tuple(mounts))


def _evict_now_and_then(cache: Path) -> None:
    """Evict the cache's long-unused blobs, at most once an `EVICT_EVERY_S` per process."""
    now = time.monotonic()
    with _lock:
        if _last_evicted and now - _last_evicted[0] < EVICT_EVERY_S:
            return
        _last_evicted[:] = [now]
    removed = shipping.evict_unused(cache)
    if removed:
        log.info("ray_blob_cache_evicted", folders=removed, cache=str(cache))


class _Commands(threading.Thread):
    """Takes the driver's commands from the relay and applies them to the sandbox."""

    def __init__(self, key: str, box: DockerSandbox, relay: Any, default_wait_s: float) -> None:
        super().__init__(name=f"ray-commands-{key}", daemon=True)
        self.key, self.box, self.relay = key, box, relay
        self.wait_s = default_wait_s
        self.wait_asked = threading.Event()
        # when the driver's `Sandbox.wait(timeout_s)` runs out (monotonic): past it the sandbox
        # is killed, as every backend's wait does, even while its output still flows
        self.wait_deadline: float | None = None
        self.closing = threading.Event()
        self.write_error: str | None = None

    def run(self) -> None:
        try:
            while not self.closing.is_set():
                for command in ray.get(self.relay.take_commands.remote(self.key, POLL_S)):
                    self._apply(command)
        except Exception as exc:  # the relay is gone (the driver died): end the sandbox
            log.warning("ray_relay_lost", key=self.key, error=str(exc))
            self.closing.set()
            self.box.kill()
        finally:
            self.wait_asked.set()

    def _apply(self, command: tuple[Any, ...]) -> None:
        kind = command[0]
        if kind == "write":
            try:
                self.box.write(bytes(command[1]), timeout_s=command[2])
            except InfrastructureError as exc:
                self.write_error = str(exc)
                if isinstance(exc.__cause__, TimeoutError):
                    self.box.kill()  # it stopped reading: the driver's deadline rule
        elif kind == "kill":
            self.box.kill()
        elif kind == "wait":
            self.wait_s = float(command[1])
            self.wait_deadline = time.monotonic() + self.wait_s
            self.wait_asked.set()
        elif kind == "close":
            self.closing.set()
            self.wait_asked.set()


def _pump(key: str, box: DockerSandbox, relay: Any, spec: SandboxSpec) -> ExitState:
    commands = _Commands(key, box, relay, default_wait_s=5.0)
    commands.start()
    try:
        for frame in box.frames(POLL_S):
            if frame is not None and not ray.get(relay.put_output.remote(key, [frame], False)):
                commands.closing.set()
            if commands.closing.is_set():
                box.kill()
                break
            deadline = commands.wait_deadline
            if deadline is not None and time.monotonic() >= deadline:
                box.kill()  # the driver's wait ran out: the output ends with the sandbox
                commands.wait_deadline = None
        ray.get(relay.put_output.remote(key, [], True))
        commands.wait_asked.wait(timeout=spec.hard_cap.total_s)
        return box.wait(commands.wait_s)
    finally:
        commands.closing.set()
        commands.join(timeout=POLL_S * 5)


def run_sandbox(
    key: str, spec: SandboxSpec, shipped: list[ShippedMount], relay: Any
) -> dict[str, Any]:
    """One episode's sandbox on this node (the body of the episode task).

    Args:
        key: the attempt key of the sandbox's mailbox in the relay.
        spec: the spec as the driver built it (mount sources are the driver's paths).
        shipped: the mounts' blobs (`ShippedMount`).
        relay: the relay actor's handle.

    Returns:
        ``{"node", "exit": ExitState}``, or ``{"node", "error", "fields"}`` when the sandbox
        could not be made or removed (the relay was told at once when it never started).
    """
    node = node_id()
    started = False
    try:
        local = materialized(spec, shipped)
        with node_backend().sandbox(local) as box:
            ray.get(relay.started.remote(key, {"node": node}))
            started = True
            return {"node": node, "exit": _pump(key, box, relay, spec)}
    except InfrastructureError as exc:
        info = {
            "node": node,
            "error": str(exc),
            "fields": {k: str(v) for k, v in exc.fields.items()},
        }
        if not started:
            ray.get(relay.started.remote(key, info))
        return info


def reap_node(ledger: str | None) -> tuple[str, list[Reaped]]:
    """Run the Docker backend's reaper on this node's engine.

    Returns:
        ``(node id, removed sandboxes)``.

    Raises:
        InfrastructureError: the node's engine failed.
    """
    return node_id(), node_backend().reap(ledger=ledger)


def on_node(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """Call ``fn(*args)`` on this node (checks of ``doctor``); returns ``(node id, result)``."""
    return node_id(), fn(*args)


def engine_facts(image: str) -> dict[str, Any]:
    """This node's engine: its CPU count and the image's id (None when missing).

    Raises:
        InfrastructureError: the engine is unreachable.
    """
    backend = node_backend()
    try:
        image_id: str | None = backend.image_id(image)
    except InfrastructureError:
        image_id = None
    return {"node": node_id(), "cpus": backend.engine_cpus(), "image_id": image_id}


__all__ = [
    "CACHE_ENV",
    "ShippedMount",
    "cache_dir",
    "engine_facts",
    "materialized",
    "node_backend",
    "node_id",
    "on_node",
    "reap_node",
    "run_sandbox",
]
