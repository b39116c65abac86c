"""The Docker backend: hardened containers, one per run attempt, always removed.

Lifecycle of `DockerBackend.sandbox`: create (deterministic name) -> attach stdio -> start ->
body -> kill if still running -> read the exit state -> close the socket -> remove (force).
Removal runs in ``finally``: also when attach or start fails half-way, or the body raises.

Hardening and containment of every container: `runner.backends.docker.hardening`.

Idempotency: ``create`` is not blindly retried. The container name derives from the run id
and the backend's session id, so a repeated create meets a name conflict; a conflicting
container that carries this run id and this owner is our own earlier attempt and is adopted,
anything else is an error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import (
    MountSeen,
    Reaped,
    Sandbox,
    SandboxSpec,
)
from runner.backends.docker.client import call, connect, retrying
from runner.backends.docker.engine import Engine, discover_engine
from runner.backends.docker.hardening import capped_command, host_config, sandbox_environment
from runner.backends.docker.hostfiles import HostFiles, HostFilesMode
from runner.backends.docker.reaper import reap_dead
from runner.backends.docker.runtimes import require_runtime
from runner.backends.docker.sandbox import DockerSandbox
from runner.backends.warmpool.pooled import PoolingBackend
from runner.errors import InfrastructureError, TransientInfrastructureError
from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions

log = get_logger(__name__)

_CREATE_ATTEMPTS = 3
_OUTPUT_IN_ERRORS = 4096


class DockerBackend(PoolingBackend):
    """Sandboxes as hardened Docker containers.

    Args:
        api: a low-level ``docker.APIClient`` (or a test double with the same methods).
        address: the engine address, for messages.
        session_id: labels every container of this backend; default a fresh random id.
        owner: the owning process (default: this one).
        version: project version label.
        runtime: the engine's OCI runtime for every container (HostConfig ``Runtime``, e.g.
            ``crun``, ``runsc``); None is the engine's default. `connect` checks it exists.
        engine: how the engine was chosen (`runner.backends.docker.engine.Engine`), for
            ``doctor`` and messages; None: unknown (a test double).
        host_files: how the host's folders reach the sandboxes (`HostFiles`): ``bind``
            mounts, ``copy`` through the engine's API, or ``auto`` (probed at the first sandbox
            with mounts); `connect` defaults to ``auto``.
    """

    name = "docker"

    def __init__(
        self,
        api: Any,
        *,
        address: str = "",
        session_id: str | None = None,
        owner: L.Owner | None = None,
        version: str = __version__,
        runtime: str | None = None,
        engine: Engine | None = None,
        host_files: HostFilesMode = "bind",
    ) -> None:
        self.api = api
        self.runtime = runtime
        self.engine = engine
        self.address = address or (engine or discover_engine()).address
        self.session_id = session_id or uuid.uuid4().hex[:16]
        self.owner = owner or L.current_owner()
        self.version = version
        helper_labels = L.sandbox_labels(
            session_id=self.session_id, run_id="", owner=self.owner, version=version, extra={}
        )
        self.files = HostFiles(api, host_files, labels=helper_labels, version=version)

    @classmethod
    def connect(
        cls,
        docker_host: str | None = None,
        *,
        session_id: str | None = None,
        runtime: str | None = None,
        host_files: HostFilesMode = "auto",
    ) -> DockerBackend:
        """Connect to the engine: ``docker_host``, else the one `discover_engine` chooses.

        Args:
            docker_host: the engine address (None: ``DOCKER_HOST``, the docker context, the
                platform default, Podman's socket: `runner.backends.docker.engine`).
            session_id: labels every container of this backend; default a fresh random id.
            runtime: the OCI runtime of every container (None: the engine's default); checked
                against the engine's runtimes here, before any container exists.
            host_files: ``auto`` (probe), ``bind`` or ``copy`` (`HostFiles`).

        Raises:
            InfrastructureError: the engine is unreachable (message names address, why it was
                chosen, and the fix), or a named docker context cannot be read.
            InputError: the engine has no runtime ``runtime`` (exit 2, naming those it has).
        """
        engine = discover_engine(docker_host)
        api = connect(engine=engine)
        if runtime is not None:
            try:
                require_runtime(api, runtime)
            except BaseException:
                api.close()
                raise
        return cls(
            api,
            address=engine.address,
            session_id=session_id,
            runtime=runtime,
            engine=engine,
            host_files=host_files,
        )

    @classmethod
    def from_settings(cls, settings: Any, options: BackendOptions | None = None) -> DockerBackend:
        """`connect` with a command's `runner.settings.Settings` (the registry's factory).

        Reads ``docker_host``, ``runtime`` and ``host_files``; ``options.session_id`` labels
        its containers (None: a fresh id).

        Raises:
            InfrastructureError, InputError: as `connect`.
        """
        return cls.connect(
            settings.docker_host,
            runtime=settings.runtime,
            host_files=settings.host_files,
            session_id=options.session_id if options is not None else None,
        )

    def close(self) -> None:
        """Close the HTTP connections of the client."""
        closer = getattr(self.api, "close", None)
        if callable(closer):
            closer()

    def image_id(self, image: str) -> str:
        """The id (``sha256:...``) of ``image``, for the trace's environment manifest.

        Raises:
            InfrastructureError: the image is missing (message names the fix) or the engine
                failed.
        """
        info = retrying(f"inspect image {image}", self.api.inspect_image, image)
        return str(info["Id"])

    def engine_cpus(self) -> float | None:
        """The engine's CPU count (``NCPU`` of ``GET /info``): the most ``cpus`` it accepts.

        Raises:
            InfrastructureError: the engine failed.
        """
        info = retrying("engine info", self.api.info)
        value = info.get("NCPU") if isinstance(info, dict) else None
        return float(value) if isinstance(value, int) and value > 0 else None

    def engine_memory_bytes(self) -> int | None:
        """``MemTotal`` of ``GET /info``, bytes (the concurrency's budget); may raise as above."""
        info = retrying("engine info", self.api.info)
        value = info.get("MemTotal") if isinstance(info, dict) else None
        return value if isinstance(value, int) and value > 0 else None

    @property
    def is_local(self) -> bool:
        """The engine is on this machine: a Unix socket or a Windows named pipe."""
        return self.address.startswith(("unix://", "npipe://", "/"))

    def engine_mounts(self, sandbox: Sandbox) -> list[MountSeen] | None:
        """The bind mounts of a started container as the engine reports them.

        None in copy mode (volumes and a baked runtime, no host path: the view from inside is
        the check).
        """
        container = getattr(sandbox, "container_id", None)
        visibility = self.files.visibility
        if container is None or visibility is None or not visibility.visible:
            return None
        info = retrying("inspect container", self.api.inspect_container, container)
        return [(m["Destination"], m["Source"], not m["RW"]) for m in info.get("Mounts") or ()]

    # -- create ------------------------------------------------------------------------------

    def create_kwargs(self, spec: SandboxSpec) -> dict[str, Any]:
        """Arguments of ``APIClient.create_container`` for ``spec`` (exact; unit-tested).

        The image and the mounts are placed by `HostFiles.place` (copy mode: the runtime image
        and read-only volumes instead of bind mounts).

        Raises:
            InfrastructureError: copy mode could not build the runtime image or fill a volume.
        """
        placement = self.files.place(spec)
        return {
            "image": placement.image,
            "command": capped_command(spec),
            "name": L.container_name(spec.run_id, self.session_id),
            "user": spec.user,
            # not detached + stdin_open: docker-py sets StdinOnce (and the Attach* flags), so
            # closing the attach connection (or the host dying) gives the command EOF
            "detach": False,
            "stdin_open": True,
            "tty": False,
            "environment": sandbox_environment(spec),
            "working_dir": spec.workdir,
            "labels": L.sandbox_labels(
                session_id=self.session_id,
                run_id=spec.run_id,
                owner=self.owner,
                version=self.version,
                extra=spec.labels,
            ),
            "host_config": host_config(
                self.api.api_version, spec, runtime=self.runtime, mounts=placement.mounts
            ),
            "use_config_proxy": False,
        }

    def _adoptable(self, name: str, run_id: str) -> str | None:
        """Id of an existing container ``name`` that is our own earlier create of ``run_id``."""
        try:
            info = retrying(f"inspect {name}", self.api.inspect_container, name)
        except InfrastructureError as exc:
            if exc.fields.get("status") == 404:
                return None
            raise
        config_labels = (info.get("Config") or {}).get("Labels") or {}
        state = (info.get("State") or {}).get("Status")
        if (
            config_labels.get(L.RUN) == run_id
            and config_labels.get(L.OWNER) == self.owner.label()
            and state == "created"
        ):
            return str(info["Id"])
        raise InfrastructureError(
            f"a container named {name} already exists (state {state}, owner "
            f"{config_labels.get(L.OWNER, '?')}): run attempt ids must be unique",
            run_id=run_id,
        )

    def _own_container(self, name: str, run_id: str) -> str | None:
        """Id of container ``name`` if it carries this run id and this owner, else None."""
        try:
            info = retrying(f"inspect {name}", self.api.inspect_container, name)
        except InfrastructureError:
            return None
        found = (info.get("Config") or {}).get("Labels") or {}
        if found.get(L.RUN) == run_id and found.get(L.OWNER) == self.owner.label():
            return str(info["Id"])
        return None

    def _create(self, spec: SandboxSpec) -> str:
        kwargs = self.create_kwargs(spec)
        name = kwargs["name"]
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                created = call(
                    f"create container {name}",
                    self.api.create_container,
                    **kwargs,
                    address=self.address,
                )
                return str(created["Id"])
            except TransientInfrastructureError as exc:
                # The engine may have created it before the answer was lost: look, never guess.
                adopted = self._adoptable(name, spec.run_id)
                if adopted:
                    return adopted
                if attempt == _CREATE_ATTEMPTS:
                    raise
                log.warning("docker_create_retry", container=name, attempt=attempt, error=str(exc))
                time.sleep(0.2 * 2 ** (attempt - 1))
            except InfrastructureError as exc:
                if exc.fields.get("status") != 409:
                    raise
                adopted = self._adoptable(name, spec.run_id)
                if adopted:
                    return adopted
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the lifecycle -----------------------------------------------------------------------

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[DockerSandbox]:
        """Create, attach and start a hardened container; kill, inspect and remove it on exit.

        Yields:
            The started `DockerSandbox`.

        Raises:
            InfrastructureError: the engine is unusable, the image is missing, or the container
                could not start (the engine's explanation and any output attached).
        """
        name = L.container_name(spec.run_id, self.session_id)
        container_id: str | None = None
        box: DockerSandbox | None = None
        started_at = time.monotonic()
        body_failed = False
        try:
            try:
                container_id = self._create(spec)
            except InfrastructureError:
                raise  # nothing of ours exists (a conflicting container is never touched)
            except BaseException:
                # Interrupted mid-create (Ctrl-C): the engine may have made it; find it by name.
                container_id = self._own_container(name, spec.run_id)
                raise
            sock = call(
                f"attach to {name}",
                self.api.attach_socket,
                container_id,
                params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1},
                address=self.address,
            )
            box = DockerSandbox(self.api, container_id, name, spec.run_id, sock)
            box.start_reader()
            try:
                retrying(f"start {name}", self.api.start, container_id, address=self.address)
            except InfrastructureError as exc:
                output = box.drain()[-_OUTPUT_IN_ERRORS:].decode("utf-8", "replace")
                exc.fields.setdefault("run_id", spec.run_id)
                if output:
                    exc.fields["output"] = output
                raise
            log.debug(
                "container_started",
                container=name,
                run_id=spec.run_id,
                session=self.session_id,
                start_s=round(time.monotonic() - started_at, 3),
            )
            yield box
        except BaseException:
            body_failed = True
            raise
        finally:
            self._teardown(name, container_id, box, raise_errors=not body_failed)

    def _teardown(
        self, name: str, container_id: str | None, box: DockerSandbox | None, *, raise_errors: bool
    ) -> None:
        """Kill if running, read the exit state, close the socket, remove. Never leaks."""
        if container_id is None:
            return
        error: InfrastructureError | None = None
        if box is not None:
            try:
                if box.exit_state is None:
                    if box.is_running():
                        box.kill()
                    box.read_exit_state()
            except InfrastructureError as exc:
                error = exc
            box.close()
        try:
            retrying(
                f"remove {name}",
                self.api.remove_container,
                container_id,
                force=True,
                address=self.address,
            )
            log.debug("container_removed", container=name)
        except InfrastructureError as exc:
            if exc.fields.get("status") != 404:
                log.error("container_remove_failed", container=name, error=str(exc))
                error = error or exc
        if error is not None and raise_errors:
            raise error

    # -- leftovers ---------------------------------------------------------------------------

    def containers(self, *, session_only: bool = False) -> list[dict[str, Any]]:
        """Summaries (``docker ps -a`` style) of the containers this project made.

        Args:
            session_only: only those of this backend's session.
        """
        label = f"{L.SESSION}={self.session_id}" if session_only else f"{L.MANAGED}=1"
        found: list[dict[str, Any]] = retrying(
            "list containers",
            self.api.containers,
            all=True,
            filters={"label": [label]},
            address=self.address,
        )
        return found

    def session_sandboxes(self) -> list[str]:
        """Names of this session's containers that still exist."""
        return [str(c["Names"][0]).lstrip("/") for c in self.containers(session_only=True)]

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Remove leftover containers of dead owners on this host (never a live owner's).

        Each one's run time is read from the engine first; one of another ledger is left
        alone while recent (`runner.backends.docker.reaper`). Copy mode's tool volumes older
        than a week that no container uses go too (`HostFiles.prune`).

        Raises:
            InfrastructureError: the engine failed while listing.
        """
        reaped = reap_dead(self.api, self.containers(), self.owner.host, ledger=ledger)
        try:
            self.files.prune()  # copy mode's old tool volumes (`HostFiles.prune`)
        except InfrastructureError as exc:  # never fail a command over it
            log.warning("files_volumes_prune_failed", error=str(exc))
        return reaped


__all__ = ["DockerBackend"]
