"""The Docker backend: hardened containers, one per run attempt, always removed.

Lifecycle of `DockerBackend.sandbox`: create (deterministic name) -> attach stdio -> start ->
body -> kill if still running -> read the exit state -> close the socket -> remove (force).
Removal runs in ``finally``: also when attach or start fails half-way, or the body raises.

Hardening of every container (SPEC.md, issue 2 item 7; asserted flag by flag in
tests/unit/backends/test_docker_backend.py): ``network_mode=none``; read-only root filesystem; a
size-limited tmpfs ``/tmp`` with ``HOME`` and ``TMPDIR`` in it; a private IPC namespace whose
``/dev/shm`` is no larger than ``/tmp`` (``shm_size``: multiprocessing still works) and whose
POSIX message queues take no memory (``msgqueue`` ulimit 0: ``/dev/mqueue`` creates nothing);
``cap_drop=ALL``; ``no-new-privileges``; pids, memory (swap equal to memory: none extra) and
CPU limits; user 10001:10001; the ``none`` log driver (the output is captured over attach); no
host environment (only the spec's ``env``; docker-py's proxy injection is off); bind mounts in
the structured form with ``read_only`` (paths with spaces, colons, non-ASCII work).

Containment when the host is gone (issue 10 item 9; DOCKER-NOTES.md "Lifecycle traps"):
- The runtime (``SandboxSpec.init``) is itself PID 1 and enforces the cap, read from
  `CAP_ENV` (`runner.runtime.pid1`: not dumpable, no handler for any signal, orphans reaped):
  the process holding the channel is then the one the kernel protects.
- Any other command runs under the sandbox's hard lifetime cap (`capped_command`): PID 1 is
  coreutils ``timeout -s KILL N`` (the image's execute-only copy `CAP_PROGRAM` when present,
  else ``timeout``), its only child the spec's command. The kernel lets no process of the
  container stop, kill or (execute-only: not dumpable) ptrace a namespace's PID 1, so tool
  code cannot freeze the cap the way it can a ``timeout`` that is the child of an init
  (measured: one ``SIGSTOP`` did). ``timeout`` forwards SIGTERM to the command, which stands in
  for docker's init process; what it does not do is reap orphaned grandchildren (they wait
  as zombies, within the pids limit, until the container ends). When the cap fires the
  command is SIGKILLed and the container exits 137 (``timeout -s KILL`` reports it so).
- The container is created with ``StdinOnce`` (docker-py: ``stdin_open`` and not
  ``detach``): when the attach connection closes, also because the host process died, the
  engine closes the container's stdin and the runtime sees end-of-file and exits
  (`runner.runtime.channel`). Without ``StdinOnce`` a half-close never reaches the process.

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
from typing import Any

import structlog
from docker.types import HostConfig, LogConfig, Mount, Ulimit

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import Backend, Reaped, SandboxSpec
from runner.backends.docker.client import call, connect, engine_address, retrying
from runner.backends.docker.reaper import reap_dead
from runner.backends.docker.sandbox import DockerSandbox
from runner.errors import InfrastructureError, TransientInfrastructureError
from runner.runtime import pid1

log = structlog.get_logger(__name__)

SANDBOX_TMP = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not a host path
# An execute-only (mode 0111) copy of coreutils timeout in the image (images/Dockerfile): a
# process that runs a file it cannot read is not dumpable, so no same-uid process can ptrace
# it. Images built before it existed fall back to ``timeout`` (the cap still holds against
# signals, not against ptrace).
CAP_PROGRAM = "/usr/local/sbin/sandbox-replay-cap"
# The variable an init command reads its cap from (runner.runtime.pid1.ENV_HARD_CAP).
CAP_ENV = pid1.ENV_HARD_CAP
_CAP_SCRIPT = (
    f'c={CAP_PROGRAM}; [ -x "$c" ] || c=timeout; '
    'command -v "$c" >/dev/null 2>&1 || { echo "sandbox-replay: the sandbox image has no'
    ' coreutils timeout, which enforces the sandbox lifetime cap" >&2; exit 125; }; '
    # the shell's own variables (dash exports PWD) must not reach the command: env -u
    'exec env -u PWD -u OLDPWD -u SHLVL -u _ "$c" -s KILL "$0" "$@"'
)
_CREATE_ATTEMPTS = 3
_OUTPUT_IN_ERRORS = 4096


def host_config(api_version: str, spec: SandboxSpec) -> HostConfig:
    """The hardened ``HostConfig`` for ``spec`` (see the module docstring)."""
    limits = spec.limits
    return HostConfig(
        version=api_version,
        network_mode="none",
        read_only=True,
        tmpfs={SANDBOX_TMP: f"rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777"},
        ipc_mode="private",
        shm_size=limits.tmpfs_mb * 1024 * 1024,
        ulimits=[Ulimit(name="msgqueue", soft=0, hard=0)],
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=limits.pids_limit,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        nano_cpus=round(limits.cpus * 1e9),
        init=False,  # PID 1 is the runtime or the lifetime cap (`capped_command`), never docker's
        log_config=LogConfig(type="none"),
        mounts=[
            Mount(target=m.target, source=str(m.source), type="bind", read_only=m.read_only)
            for m in spec.mounts
        ],
    )


def capped_command(spec: SandboxSpec) -> list[str]:
    """The container's argv: ``spec.command`` under its hard lifetime cap, PID 1 ``timeout``.

    ``/bin/sh`` picks the cap program (`CAP_PROGRAM`, else ``timeout``) and ``exec``s it
    through ``env -u`` (which drops the variables the shell itself set), so PID 1 is the cap
    itself and the command its only child: ``timeout -s KILL N COMMAND...`` with ``N`` =
    ``spec.hard_cap.whole_s``. An image without either exits 125 with a message. A command
    that is the sandbox's init (``spec.init``) runs as it is: it enforces the cap itself.
    """
    if spec.init:
        return list(spec.command)
    return ["/bin/sh", "-c", _CAP_SCRIPT, str(spec.hard_cap.whole_s), *spec.command]


def sandbox_environment(spec: SandboxSpec) -> dict[str, str]:
    """The complete environment inside: HOME and TMPDIR on the tmpfs, then the spec's.

    An init command (``spec.init``) also gets its lifetime cap in `CAP_ENV` (whole seconds).
    """
    env = {"HOME": SANDBOX_TMP, "TMPDIR": SANDBOX_TMP, **spec.env}
    if spec.init:
        env[CAP_ENV] = str(spec.hard_cap.whole_s)
    return env


class DockerBackend(Backend):
    """Sandboxes as hardened Docker containers.

    Args:
        api: a low-level ``docker.APIClient`` (or a test double with the same methods).
        address: the engine address, for messages.
        session_id: labels every container of this backend; default a fresh random id.
        owner: the owning process (default: this one).
        version: project version label.
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
    ) -> None:
        self.api = api
        self.address = address or engine_address()
        self.session_id = session_id or uuid.uuid4().hex[:16]
        self.owner = owner or L.current_owner()
        self.version = version

    @classmethod
    def connect(
        cls, docker_host: str | None = None, *, session_id: str | None = None
    ) -> DockerBackend:
        """Connect to the engine (``docker_host``, else ``DOCKER_HOST``, else the default).

        Raises:
            InfrastructureError: the engine is unreachable (message names address and fix).
        """
        address = engine_address(docker_host)
        return cls(connect(docker_host), address=address, session_id=session_id)

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

    # -- create ------------------------------------------------------------------------------

    def create_kwargs(self, spec: SandboxSpec) -> dict[str, Any]:
        """Arguments of ``APIClient.create_container`` for ``spec`` (exact; unit-tested)."""
        return {
            "image": spec.image,
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
            "host_config": host_config(self.api.api_version, spec),
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

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Remove leftover containers of dead owners on this host (never a live owner's).

        Each one's run time is read from the engine first; one of another ledger is left
        alone while recent (`runner.backends.docker.reaper`).

        Raises:
            InfrastructureError: the engine failed while listing.
        """
        return reap_dead(self.api, self.containers(), self.owner.host, ledger=ledger)


__all__ = [
    "CAP_ENV",
    "CAP_PROGRAM",
    "DockerBackend",
    "capped_command",
    "host_config",
    "sandbox_environment",
]
