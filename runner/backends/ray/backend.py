"""`RayBackend`: each sandbox is a Ray task on a worker node, run by that node's Docker engine.

What travels and what stays: the episode's host side (`runner.episode.driver`: the
channel decoder, the provider with every key, the ledger and its ceilings, the trace writer)
stays in the driver process, exactly as with the local Docker backend, so ceilings hold across
nodes as they hold across threads and no worker ever sees a key or the ledger. A worker gets a
`SandboxSpec` and the bytes of its mounts (`runner.backends.ray.shipping`, content-addressed:
the tool snapshot and the runtime travel once per node); the stdio of its container comes and
goes through the relay actor on the driver's node (`runner.backends.ray.relay`).

Episode tasks ask for ``num_cpus=0`` and one unit of the custom resource `SLOTS` that each node
advertises (``ray start --resources '{"sandbox_slots": N}'``), so Ray's CPU accounting never
bounds sandboxes; ``max_retries=0``: a lost worker is the run's ``infra_error`` and
``submit --resume`` runs it again. `Sandbox.node` names the node, for the trace's ``run`` line.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from runner.backends.base import Backend, ExitState, Reaped, Sandbox, SandboxSpec
from runner.backends.ray import auth, shipping
from runner.backends.ray import node as N
from runner.backends.ray.driverenv import seal_driver
from runner.backends.ray.relay import Relay
from runner.errors import InfrastructureError, InputError
from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions

log = get_logger(__name__)

SLOTS = "sandbox_slots"
ADDRESS_ENV = "RAY_ADDRESS"
# Seconds the driver waits for a node's answer past the sandbox's own wait.
_SLACK_S = 30.0
_START_POLL_S = 1.0

_episode_task = ray.remote(N.run_sandbox)
_node_task = ray.remote(N.on_node)
_reap_task = ray.remote(N.reap_node)
_facts_task = ray.remote(N.engine_facts)
_RelayActor = ray.remote(Relay)


def _infra(message: str, exc: BaseException | None = None, **fields: Any) -> InfrastructureError:
    error = InfrastructureError(message + (f": {exc}" if exc is not None else ""), **fields)
    return error


def connect_cluster(address: str | None, *, allow_open: bool = False) -> tuple[bool, auth.Verdict]:
    """Join the Ray cluster at ``address`` (else ``RAY_ADDRESS``) as a driver, safely.

    Before joining, the provider keys leave this process's environment
    (`runner.backends.ray.driverenv.seal_driver`) and the cluster's GCS is asked whether it
    answers a client without credentials (`runner.backends.ray.auth`); after joining, every
    node's raylet is asked the same, before anything is sent to the cluster. Usage statistics
    are off (``RAY_USAGE_STATS_ENABLED=0``) and no dashboard is asked for; the cluster itself is
    started by its operator (README, "Many machines").

    Args:
        address: ``host:port`` of the cluster's GCS (or ``auto``); None: ``RAY_ADDRESS``.
        allow_open: the ``--unsafe-open-cluster`` opt-in: join a cluster that answers clients
            without credentials (logged as a warning).

    Returns:
        ``(owns, verdict)``: ``owns`` True when this call connected (the backend disconnects
        on close), False when the process was connected already (its cluster is still asked);
        ``verdict`` what the GCS and the raylets answered a client without credentials.

    Raises:
        InputError: no address was given, or one that would not join a running cluster
            (``local`` starts one in this process; ``ray://`` is the Ray Client).
        ClusterNotAuthenticated: the cluster answers clients without credentials and
            ``allow_open`` is False (exit 6).
        InfrastructureError: the cluster did not answer, or the environment could not be
            sealed.
    """
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    seal_driver()
    owns = not ray.is_initialized()
    if owns:
        address = address or os.environ.get(ADDRESS_ENV)
        if not address:
            raise InputError(
                "--backend ray needs the cluster's address: --ray-address or RAY_ADDRESS"
            )
        if address == "local" or "://" in address:
            raise InputError(
                f"--ray-address {address!r}: give the GCS address (host:port) of a running"
                " cluster (README, 'Many machines')",
                field="--ray-address",
            )
        if address != "auto":  # refused before joining: nothing of ours reaches an open GCS
            gcs = auth.probe_cluster(address)
            if gcs.endpoints[0].answer == "open":
                auth.require_authenticated(gcs, allow_open=allow_open)
            _require_driver_token(gcs, address)
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                namespace="sandbox-replay",
            )
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError, ...
            message = f"cannot connect to the Ray cluster at {address}"
            raise _infra(message, exc, address=address) from exc
    try:
        verdict = cluster_verdict()
        auth.require_authenticated(verdict, allow_open=allow_open)
    except BaseException:
        if owns:
            ray.shutdown()
        raise
    if not verdict.authenticated:
        log.warning("ray_cluster_open", unsafe=auth.UNSAFE_FLAG, detail=verdict.describe())
    return owns, verdict


def _require_driver_token(verdict: auth.Verdict, address: str) -> None:
    """Say what to set when the cluster wants a token this driver would not send.

    Ray's own error is a ``ConnectionError`` after ~20 s of retries; this one names the fix.

    Raises:
        InfrastructureError: the GCS refused the probe with token mode and this process's
            ``RAY_AUTH_MODE`` is not ``token``.
    """
    token_mode = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
    if verdict.how.startswith("token") and not token_mode:
        fix = (
            "set RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN,"
            " RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) in the driver's environment"
        )
        raise InfrastructureError(
            f"the Ray cluster at {address} requires its token and this driver would not send"
            f" it: {fix}",
            fix=fix,
            address=address,
        )


def cluster_verdict() -> auth.Verdict:
    """Ask the connected cluster's GCS and every live node's raylet (`runner.backends.ray.auth`)."""
    gcs = str(ray.get_runtime_context().gcs_address)
    raylets = [
        (str(n["NodeID"]), f"{n['NodeManagerAddress']}:{n['NodeManagerPort']}")
        for n in alive_nodes()
    ]
    return auth.probe_cluster(gcs, raylets)


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live nodes (``ray.nodes()`` entries with ``Alive``)."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return [n for n in nodes if n.get("Alive")]


class RaySandbox(Sandbox):
    """The driver's handle on one container running on a worker node.

    Attributes:
        run_id: the run attempt's id.
        node: the Ray node id of the node that runs it.
    """

    def __init__(self, relay: Any, key: str, ref: Any, run_id: str, node: str) -> None:
        self.relay, self.key, self.ref = relay, key, ref
        self.run_id, self.node = run_id, node
        self.killed = False
        self.result: dict[str, Any] | None = None
        self.task_error: BaseException | None = None

    def _ask(self, call: Any, timeout_s: float | None) -> Any:
        try:
            return ray.get(call, timeout=timeout_s)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise _infra("the relay did not answer", exc, run_id=self.run_id) from exc

    def done(self) -> bool:
        """True when the node task has ended (normally or not)."""
        ready, _ = ray.wait([self.ref], timeout=0)
        return bool(ready)

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        """Queue bytes for the container's stdin (the node writes them with ``timeout_s``).

        Raises:
            InfrastructureError: the relay is gone or the node task ended.
        """
        if self.done():
            raise _infra("the sandbox's node task has ended", run_id=self.run_id)
        if not self._ask(self.relay.command.remote(self.key, ("write", data, timeout_s)), None):
            raise _infra("the sandbox's mailbox is closed", run_id=self.run_id)

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        """Output frames as the node relays them; ends at the end of output or of the task."""
        while True:
            frames, eof = self._ask(self.relay.read_output.remote(self.key, poll_s), None)
            yield from frames
            if eof:
                return
            if not frames:
                if self.done():  # the node or its worker died: read what arrived, then stop
                    rest, _ = self._ask(self.relay.read_output.remote(self.key, 0.0), None)
                    yield from rest
                    return
                yield None

    def kill(self) -> None:
        """Ask the node to kill the container now (SIGKILL); the host did it."""
        self.killed = True
        try:
            self._ask(self.relay.command.remote(self.key, ("kill",)), _SLACK_S)
        except InfrastructureError as exc:
            log.warning("ray_kill_not_delivered", run_id=self.run_id, error=str(exc))

    def wait(self, timeout_s: float) -> ExitState:
        """The container's exit state, read by its node before removal.

        Raises:
            InfrastructureError: the node task failed (the worker or the node was lost), or its
                engine did.
        """
        try:
            ray.get(self.relay.command.remote(self.key, ("wait", timeout_s)), timeout=_SLACK_S)
            result = ray.get(self.ref, timeout=timeout_s + _SLACK_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            self.task_error = exc
            raise _infra(
                f"the sandbox's Ray task on node {self.node} was lost", exc, run_id=self.run_id
            ) from exc
        self.result = result
        if "error" in result:
            raise _infra(f"node {self.node}: {result['error']}", run_id=self.run_id)
        state: ExitState = result["exit"]
        if self.killed and not state.killed_by_host:
            state = ExitState(state.exit_code, state.oom_killed, True, state.error, state.ran_s)
        return state


class RayBackend(Backend):
    """Sandboxes on the worker nodes of a Ray cluster (see the module docstring).

    Args:
        address: the cluster (``host:port``; None: ``RAY_ADDRESS``, or an existing connection).
        slots: the custom resource each episode task takes one unit of.
        allow_open: ``--unsafe-open-cluster``: accept a cluster that answers clients without
            credentials (`connect_cluster`).

    Attributes:
        auth: what the cluster answered a client without credentials (`connect_cluster`).

    Raises:
        ClusterNotAuthenticated: see `connect_cluster`.
    """

    name = "ray"

    def __init__(
        self, address: str | None = None, *, slots: str = SLOTS, allow_open: bool = False
    ) -> None:
        self._owns_connection, self.auth = connect_cluster(address, allow_open=allow_open)
        self.slots = slots
        total = ray.cluster_resources().get(slots, 0)  # type: ignore[no-untyped-call]
        if total <= 0:
            self.close()
            raise InfrastructureError(
                f"no node of the Ray cluster advertises the resource {slots!r}",
                fix=f"start each node with: ray start ... --resources '{{\"{slots}\": 8}}'",
            )
        self.driver_node = str(ray.get_runtime_context().get_node_id())
        self.relay: Any = cast(
            Any,
            _RelayActor.options(
                num_cpus=0,
                max_concurrency=10_000,
                scheduling_strategy=NodeAffinitySchedulingStrategy(self.driver_node, soft=False),
            ).remote(),
        )
        try:
            ray.get(self.relay.ping.remote(), timeout=120)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            self.close()
            raise _infra("the relay actor did not start on the driver's node", exc) from exc
        self._blobs: dict[str, tuple[shipping.Blob, Any]] = {}
        self._blob_lock = threading.Lock()
        self._image_ids: dict[str, str] = {}

    @classmethod
    def from_settings(cls, settings: Any, options: BackendOptions | None = None) -> RayBackend:
        """The registry's factory: join the cluster of ``--ray-address`` (else ``RAY_ADDRESS``).

        The provider keys leave this process's environment first: a command reads them into
        its settings before (`runner.cli.backend_choice.with_host_endpoints`).
        ``--unsafe-open-cluster`` (``options.flags``) accepts a cluster without authentication.

        Raises:
            InputError: no address was given (exit 2).
            InfrastructureError: see the class (unreachable, open, no sandbox slots; exit 6).
        """
        flags = options.flags if options is not None else {}
        address = flags.get("--ray-address")
        return cls(
            str(address) if address else None,
            allow_open=bool(flags.get("--unsafe-open-cluster", False)),
        )

    @property
    def is_local(self) -> bool:
        """False: the sandboxes run on the cluster's nodes (bounded per node, not here)."""
        return False

    def close(self) -> None:
        """Stop the relay and leave the cluster if this backend joined it."""
        relay = getattr(self, "relay", None)
        if relay is not None:
            ray.kill(relay)
            self.relay = None
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()

    # -- what runs on every node -------------------------------------------------------------

    def on_every_node(self, task: Any, *args: Any) -> dict[str, Any]:
        """Run a node task once on every live node that advertises `SLOTS`.

        Returns:
            ``{node id: result}``; a node whose task failed maps to its `InfrastructureError`.
        """
        refs = {}
        for info in alive_nodes():
            if info.get("Resources", {}).get(self.slots, 0) <= 0:
                continue
            strategy = NodeAffinitySchedulingStrategy(info["NodeID"], soft=False)
            refs[info["NodeID"]] = task.options(
                num_cpus=0, max_retries=0, scheduling_strategy=strategy
            ).remote(*args)
        results: dict[str, Any] = {}
        for node, ref in refs.items():
            try:
                results[node] = ray.get(ref, timeout=300)
            except Exception as exc:  # a node's engine or worker failed: that node's answer
                results[node] = _infra(f"node {node}", exc, node=node)
        return results

    def call_on_every_node(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """``fn(*args)`` on every node (``doctor --backend ray``); see `on_every_node`."""
        out: dict[str, Any] = {}
        for node, answer in self.on_every_node(_node_task, fn, *args).items():
            out[node] = answer[1] if isinstance(answer, tuple) else answer
        return out

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Run the reaper on every node's engine; a node that failed is logged and skipped."""
        removed: list[Reaped] = []
        for node, answer in self.on_every_node(_reap_task, ledger).items():
            if isinstance(answer, BaseException):
                log.warning("ray_reap_failed", node=node, error=str(answer))
                continue
            removed.extend(answer[1])
        return removed

    def _facts(self, image: str) -> dict[str, dict[str, Any]]:
        facts = self.on_every_node(_facts_task, image)
        for node, answer in facts.items():
            if isinstance(answer, BaseException):
                raise answer
            if answer["image_id"] is None:
                raise InfrastructureError(f"node {node} has no image {image}", node=node)
        return facts

    def image_id(self, image: str) -> str:
        """The image's id, the same on every node.

        Raises:
            InfrastructureError: a node lacks the image, or two nodes have different images
                under that name.
        """
        if image not in self._image_ids:
            ids = {f["image_id"] for f in self._facts(image).values()}
            if len(ids) != 1:
                raise InfrastructureError(f"the nodes have different images {image}: {sorted(ids)}")
            self._image_ids[image] = ids.pop()
        return self._image_ids[image]

    def engine_cpus(self) -> float | None:
        """The smallest CPU count of the nodes' engines (the most ``cpus`` every one accepts)."""
        facts = self.on_every_node(_facts_task, "")
        cpus = [f["cpus"] for f in facts.values() if isinstance(f, dict) and f["cpus"]]
        return float(min(cpus)) if cpus else None

    # -- one sandbox -------------------------------------------------------------------------

    def _blob(self, source: Path) -> tuple[shipping.Blob, Any]:
        """The blob of ``source`` and its object in the cluster, packed again only on change."""
        key = shipping.fingerprint(source)
        with self._blob_lock:
            if key not in self._blobs:
                blob = shipping.pack(source)
                self._blobs[key] = (blob, ray.put(blob.data))
            return self._blobs[key]

    def shipped(self, spec: SandboxSpec) -> list[N.ShippedMount]:
        """Every mount of ``spec`` as a blob reference (`runner.backends.ray.node.ShippedMount`).

        Raises:
            InfrastructureError: a mount source cannot be packed.
        """
        out: list[N.ShippedMount] = []
        for index, mount in enumerate(spec.mounts):
            try:
                blob, ref = self._blob(mount.source)
            except OSError as exc:
                raise _infra(f"cannot ship mount {mount.source}", exc) from exc
            out.append((index, blob.digest, blob.is_file, [ref]))
        return out

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[RaySandbox]:
        """Start the container on a node with a free slot; stop and forget it on exit.

        Waiting for a free slot is not part of the run's time (the driver's deadline starts
        when this yields).

        Raises:
            InfrastructureError: the node could not start it (its engine's error), or the task
                was lost before it started.
        """
        if self.relay is None:
            raise InfrastructureError("the Ray backend is closed")
        key = f"{spec.run_id}.{uuid.uuid4().hex[:8]}"
        shipped = self.shipped(spec)
        relay = self.relay
        try:
            ray.get(relay.open.remote(key), timeout=_SLACK_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise _infra("the relay did not answer", exc, run_id=spec.run_id) from exc
        ref = _episode_task.options(num_cpus=0, resources={self.slots: 1}, max_retries=0).remote(
            key, spec, shipped, relay
        )
        box: RaySandbox | None = None
        try:
            box = RaySandbox(relay, key, ref, spec.run_id, self._started(relay, key, ref, spec))
            yield box
        finally:
            self._stop(relay, key, ref, box)

    def _started(self, relay: Any, key: str, ref: Any, spec: SandboxSpec) -> str:
        while True:
            try:
                info = ray.get(relay.wait_started.remote(key, _START_POLL_S), timeout=_SLACK_S)
            except (ray.exceptions.RayError, TimeoutError) as exc:
                raise _infra("the relay did not answer", exc, run_id=spec.run_id) from exc
            if info is None and ray.wait([ref], timeout=0)[0]:
                try:
                    info = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    lost = "the sandbox's Ray task was lost"
                    raise _infra(lost, exc, run_id=spec.run_id) from exc
            if info is None:
                continue
            if "error" in info:
                raise InfrastructureError(
                    f"node {info['node']}: {info['error']}", run_id=spec.run_id, node=info["node"]
                )
            return str(info["node"])

    def _stop(self, relay: Any, key: str, ref: Any, box: RaySandbox | None) -> None:
        try:
            if not ray.wait([ref], timeout=0)[0]:
                ray.get(relay.command.remote(key, ("close",)), timeout=_SLACK_S)
                ray.wait([ref], timeout=_SLACK_S)
            if not ray.wait([ref], timeout=0)[0]:
                log.warning("ray_task_cancelled", key=key)
                ray.cancel(ref, force=True)
        except Exception as exc:  # the cluster is going away: the node's reaper has the rest
            log.warning("ray_stop_failed", key=key, error=str(exc))
        finally:
            try:
                ray.get(relay.close.remote(key), timeout=_SLACK_S)
            except Exception as exc:
                log.warning("ray_mailbox_not_closed", key=key, error=str(exc))
        del box


__all__ = ["ADDRESS_ENV", "SLOTS", "RayBackend", "RaySandbox", "alive_nodes", "connect_cluster"]
