"""``--backend``, ``--ray-address`` and ``--runtime``: where a command's sandboxes run.

``docker`` (the default) is the local engine of the settings; ``namespace`` is bubblewrap on
this Linux host (`runner.backends.namespace`: no engine, the image's root filesystem exported
once); ``ray`` is a Ray cluster (`runner.backends.ray`, the optional extra
``sandbox-replay[ray]``) selected by ``--ray-address`` or ``RAY_ADDRESS``. Without
``--backend`` the setting ``SANDBOX_REPLAY_BACKEND`` chooses (default ``docker``). The backend
packages are imported when the backend is made, not before (the docker SDK ~0.14 s, ray ~1 s).
``--runtime`` (``SANDBOX_REPLAY_RUNTIME``) is the Docker engine's OCI runtime for the
sandboxes (``crun``, ``runsc``); the Docker backend refuses a name its engine lacks, exit 2
(`runner.backends.docker.runtimes`).

``submit`` takes all three backends (`backend_factory`); ``run`` and ``reproduce`` take
``docker`` and ``namespace`` (`one_episode_backend`); ``record`` takes none: it runs outside
any sandbox by design (`runner.backends.unsandboxed`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.errors import InputError

if TYPE_CHECKING:  # pydantic-settings stays out of CLI start-up (`--help`)
    from runner.settings import Settings


class BackendName(StrEnum):
    """The backends a command can run its sandboxes on."""

    docker = "docker"
    namespace = "namespace"
    ray = "ray"


BackendOption = Annotated[
    BackendName | None,
    typer.Option(
        "--backend",
        help="Where sandboxes run: docker (this machine's engine), namespace (bubblewrap on"
        " this Linux host) or ray (a Ray cluster's nodes). Default: SANDBOX_REPLAY_BACKEND,"
        " else docker.",
        show_default=False,
    ),
]
OneEpisodeBackendOption = Annotated[
    BackendName | None,
    typer.Option(
        "--backend",
        help="Where the sandbox runs: docker (this machine's engine) or namespace (bubblewrap"
        " on this Linux host); ray is for submit (exit 2). Default: SANDBOX_REPLAY_BACKEND,"
        " else docker.",
        show_default=False,
    ),
]
"""``--backend`` of ``run`` and ``reproduce`` (`one_episode_backend`): ray is refused there."""
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster (host:port) for --backend ray (default: RAY_ADDRESS).",
        show_default=False,
    ),
]
UnsafeOpenClusterOption = Annotated[
    bool,
    typer.Option(
        "--unsafe-open-cluster",
        help="UNSAFE: with --backend ray, use a cluster that runs the code of any client that"
        " reaches it (no token authentication, no mutual TLS). Without it such a cluster is"
        " refused (exit 6).",
    ),
]
"""The opt-in to an unauthenticated Ray cluster: a flag only, so it is seen where it is used
(never inherited from an environment variable)."""
RuntimeOption = Annotated[
    str | None,
    typer.Option(
        "--runtime",
        help="The Docker engine's OCI runtime for the sandboxes, e.g. crun or runsc (gVisor);"
        " default: SANDBOX_REPLAY_RUNTIME, else the engine's default (runc). `doctor` lists"
        " the engine's runtimes.",
        metavar="NAME",
        show_default=False,
    ),
]


def with_runtime(
    settings: Settings, runtime: str | None, *, backend: BackendName | None = None
) -> Settings:
    """``settings`` with ``--runtime`` in place of ``SANDBOX_REPLAY_RUNTIME`` (when given).

    Args:
        settings: the command's settings.
        runtime: ``--runtime`` (None: the setting stands).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``): the flag is the Docker
            engine's, so another backend refuses it rather than run without the asked
            boundary (the namespace backend runs no container; a Ray node's engine takes no
            runtime from the driver).

    Raises:
        InputError: ``runtime`` is not a runtime name (`runner.settings.RUNTIME_NAME`), or the
            chosen backend is not ``docker`` (exit 2).
    """
    if runtime is None:
        return settings
    chosen = chosen_backend(settings, backend)
    if chosen is not BackendName.docker:
        raise InputError(
            f"the Docker engine's OCI runtime, but --backend {chosen.value} runs no Docker"
            " container here: drop --runtime or use --backend docker",
            field="--runtime",
        )
    # imported on use, not at module top: start-up speed (pydantic-settings; `--help`)
    from runner.settings import RUNTIME_NAME

    if not re.fullmatch(RUNTIME_NAME, runtime):
        raise InputError(f"not a runtime name: {runtime!r}", field="--runtime")
    return settings.model_copy(update={"runtime": runtime})


def ray_backend(address: str | None, *, allow_open: bool = False) -> Any:
    """Connect to the Ray cluster and make a `runner.backends.ray.RayBackend`.

    The provider keys leave this process's environment first (read them into the settings
    before: `with_host_endpoints`).

    Args:
        address: ``--ray-address`` (None: ``RAY_ADDRESS``).
        allow_open: ``--unsafe-open-cluster``.

    Raises:
        InputError: the ``ray`` extra is not installed, or no address was given (exit 2).
        InfrastructureError: the cluster is unreachable, answers clients without credentials
            (`runner.backends.ray.auth.ClusterNotAuthenticated`, unless ``allow_open``) or
            advertises no sandbox slots (exit 6).
    """
    try:
        from runner.backends.ray import RayBackend  # lazy: ray takes ~1 s to import
    except ImportError as exc:
        raise InputError(
            "--backend ray needs the ray extra: pip install 'sandbox-replay[ray]'"
        ) from exc
    return RayBackend(address, allow_open=allow_open)


# The host fallbacks of the providers (runner.providers.httpcall.endpoint) by settings field.
_HOST_ENDPOINT_ENV = {
    "openai_base_url": "OPENAI_BASE_URL",
    "openai_api_key": "OPENAI_API_KEY",
    "anthropic_base_url": "ANTHROPIC_BASE_URL",
    "anthropic_api_key": "ANTHROPIC_API_KEY",
}


def with_host_endpoints(settings: Settings, environ: Mapping[str, str] | None = None) -> Settings:
    """``settings`` with the host's ``OPENAI_*``/``ANTHROPIC_*`` endpoints and keys in them.

    The providers fall back to those variables when they are built; ``--backend ray`` removes
    them from the process's environment before it joins the cluster (`runner.backends.ray.
    driverenv`), so they are read into the settings first. A value the settings already hold
    wins, as in the providers' own fallback.

    Args:
        settings: the command's settings.
        environ: the environment to read (default ``os.environ``).
    """
    from pydantic import SecretStr  # imported on use: CLI start-up speed (`--help`)

    env = os.environ if environ is None else environ
    update: dict[str, Any] = {}
    for field, name in _HOST_ENDPOINT_ENV.items():
        if getattr(settings, field) is None and env.get(name):
            value = env[name]
            update[field] = SecretStr(value) if field.endswith("_key") else value
    return settings.model_copy(update=update) if update else settings


def chosen_backend(settings: Settings, backend: BackendName | None) -> BackendName:
    """``--backend`` when given, else the setting ``SANDBOX_REPLAY_BACKEND``."""
    return backend if backend is not None else BackendName(settings.backend)


def namespace_backend(settings: Settings) -> Any:
    """A `runner.backends.namespace.NamespaceBackend` in ``STATE_DIR/namespace``.

    Raises:
        InfrastructureError: bwrap is not installed (exit 6, the message names the fix).
    """
    from runner.backends.namespace import NamespaceBackend  # lazy: start-up speed

    return NamespaceBackend(
        settings.state_dir / "namespace",
        rootfs=settings.namespace_rootfs,
        docker_host=settings.docker_host,
        start=settings.namespace_start,
    )


def backend_factory(
    settings: Settings,
    backend: BackendName | None,
    ray_address: str | None,
    *,
    unsafe_open_cluster: bool = False,
) -> Callable[[], Any]:
    """A function that makes the chosen backend (called once the plan stands).

    Args:
        settings: the command's settings (for ``ray``: read through `with_host_endpoints`).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``).
        ray_address: ``--ray-address``.
        unsafe_open_cluster: ``--unsafe-open-cluster``.

    Raises:
        InputError: ``--ray-address`` or ``--unsafe-open-cluster`` was given without
            ``--backend ray``.
    """
    backend = chosen_backend(settings, backend)
    if ray_address and backend is not BackendName.ray:
        raise InputError("--ray-address needs --backend ray")
    if unsafe_open_cluster and backend is not BackendName.ray:
        raise InputError("--unsafe-open-cluster needs --backend ray")
    if backend is BackendName.ray:
        return lambda: ray_backend(ray_address, allow_open=unsafe_open_cluster)
    if backend is BackendName.namespace:
        return lambda: namespace_backend(settings)

    def docker() -> Any:
        from runner.backends.docker import DockerBackend  # lazy: the docker SDK, ~0.14 s

        return DockerBackend.from_settings(settings)

    return docker


def one_episode_backend(
    settings: Settings, backend: BackendName | None, *, command: str
) -> Callable[[], Any]:
    """The backend maker of ``run`` and ``reproduce``: `backend_factory`'s, then reaped.

    The same backends ``submit`` makes (one way to make each), connected, then the leftovers of
    dead owners reaped and settled in this state folder's ledger (`runner.episode.reaping.
    connect`). ``ray`` is refused, not made: these commands run one episode (``run``) or one
    replay after another (``reproduce``), so a cluster spreads nothing out and only adds its
    start-up (importing ray ~1 s, connecting, shipping the snapshot to a node); a reproduce
    verdict is also meant to be judged where it is read (a CI job, a reviewer's machine), and
    ``submit --backend ray`` is the command whose many runs a cluster is for.

    Args:
        settings: the command's settings (``backend``, ``docker_host``, ``state_dir``).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``).
        command: the command's name, for the refusal.

    Raises:
        InputError: the chosen backend is ``ray`` (exit 2; checked now, before anything runs).
    """
    chosen = chosen_backend(settings, backend)
    if chosen is BackendName.ray:
        raise InputError(
            f"{command} runs on this machine: --backend docker or namespace (ray is for"
            " submit's many runs; check SANDBOX_REPLAY_BACKEND)",
            field="--backend",
        )
    make = backend_factory(settings, chosen, None)
    # imported on use, not at module top: start-up speed (the ledger, `--help`)
    from runner.episode.reaping import connect

    return lambda: connect(make, settings.state_dir)
