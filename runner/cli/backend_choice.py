"""``--backend`` and the backend-specific flags: where a command's sandboxes run.

The flags: ``--ray-address``, ``--unsafe-open-cluster`` (Ray) and ``--runtime`` (Docker).

The backends are the registry's (`runner.backends.registry`: their names, what each is, which
flags each takes, which run on this machine); nothing here names one. Without ``--backend`` the
setting ``SANDBOX_REPLAY_BACKEND`` chooses (default ``docker``); a name the registry does not
have is invalid input (exit 2). The backend's package is imported when the backend is made, not
before (the docker SDK ~0.14 s, ray ~1 s). A backend-specific flag given to a backend that does
not take it is refused (``--runtime`` is the Docker engine's OCI runtime, ``crun``, ``runsc``;
``--ray-address`` and ``--unsafe-open-cluster`` are the Ray cluster's), never ignored.

``submit`` takes every ``--backend`` choice (`backend_factory`); ``run``, ``reproduce`` and
``packet`` the ones that run on this machine (`one_episode_backend`); ``record`` takes none: it
runs outside any sandbox by design (the registry's ``process`` entry).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.backends.registry import (
    BACKENDS,
    DEFAULT,
    BackendEntry,
    BackendOptions,
    entry,
    load,
)
from runner.errors import InputError

if TYPE_CHECKING:  # pydantic-settings stays out of CLI start-up (`--help`)
    from runner.backends.base import Backend
    from runner.settings import Settings


def _choices(*, here_only: bool = False) -> str:
    shown = [
        f"{e.name} ({e.summary})"
        for e in BACKENDS.values()
        if e.selectable and (e.runs_here or not here_only)
    ]
    return ", ".join(shown[:-1]) + (" or " if len(shown) > 1 else "") + shown[-1]


def _elsewhere() -> str:
    away = [e.name for e in BACKENDS.values() if e.selectable and not e.runs_here]
    return " and ".join(away) + (" are" if len(away) > 1 else " is")


BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help=f"Where sandboxes run: {_choices()}. Default: SANDBOX_REPLAY_BACKEND, else {DEFAULT}.",
        metavar="NAME",
        show_default=False,
    ),
]
OneEpisodeBackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help=f"Where the sandbox runs: {_choices(here_only=True)}; {_elsewhere()} for submit"
        f" (exit 2). Default: SANDBOX_REPLAY_BACKEND, else {DEFAULT}.",
        metavar="NAME",
        show_default=False,
    ),
]
"""``--backend`` of ``run`` and ``reproduce`` (`one_episode_backend`): a cluster is refused."""
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


def chosen_backend(settings: Settings, backend: str | None) -> BackendEntry:
    """The registry entry of ``--backend`` when given, else of ``SANDBOX_REPLAY_BACKEND``.

    Raises:
        InputError: no such backend (exit 2; the flag or the setting named, the choices listed).
    """
    if backend is not None:
        return entry(backend, source="--backend")
    return entry(settings.backend, source="SANDBOX_REPLAY_BACKEND")


def backend_options(chosen: BackendEntry, flags: Mapping[str, Any]) -> BackendOptions:
    """The options for ``chosen`` from the backend-specific flags a command was given.

    Args:
        chosen: the backend.
        flags: flag name -> value (None or False: not given).

    Raises:
        InputError: a flag was given that ``chosen`` does not take (exit 2, naming the
            backends that take it).
    """
    given = {flag: value for flag, value in flags.items() if value not in (None, False)}
    for flag in given:
        if flag not in chosen.flags:
            takers = [e.name for e in BACKENDS.values() if flag in e.flags]
            raise InputError(
                f"{flag} needs --backend {' or '.join(takers)} (the backend is {chosen.name})",
                field=flag,
            )
    return BackendOptions(flags=given)


def with_runtime(
    settings: Settings, runtime: str | None, *, backend: str | None = None
) -> Settings:
    """``settings`` with ``--runtime`` in place of ``SANDBOX_REPLAY_RUNTIME`` (when given).

    Args:
        settings: the command's settings.
        runtime: ``--runtime`` (None: the setting stands).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``): a backend that does not take
            ``--runtime`` (the Docker engine's) refuses it rather than run without the asked
            boundary (the namespace backend runs no container; a Ray node's engine takes no
            runtime from the driver).

    Raises:
        InputError: ``runtime`` is not a runtime name (`runner.settings.RUNTIME_NAME`), or the
            chosen backend does not take ``--runtime`` (exit 2).
    """
    if runtime is None:
        return settings
    backend_options(chosen_backend(settings, backend), {"--runtime": runtime})
    # imported on use, not at module top: start-up speed (pydantic-settings; `--help`)
    from runner.settings import RUNTIME_NAME

    if not re.fullmatch(RUNTIME_NAME, runtime):
        raise InputError(f"not a runtime name: {runtime!r}", field="--runtime")
    return settings.model_copy(update={"runtime": runtime})


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


def backend_factory(
    settings: Settings,
    backend: str | None,
    ray_address: str | None = None,
    *,
    unsafe_open_cluster: bool = False,
) -> Callable[[], Backend]:
    """A function that makes the chosen backend (called once the plan stands).

    Args:
        settings: the command's settings (for a backend that leaves this machine: read through
            `with_host_endpoints` first).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``).
        ray_address: ``--ray-address``.
        unsafe_open_cluster: ``--unsafe-open-cluster``.

    Raises:
        InputError: no such backend, a flag the chosen backend does not take, or the pip extra
            it needs is not installed (exit 2, now: before a plan names a job that never runs).
    """
    chosen = chosen_backend(settings, backend)
    options = backend_options(
        chosen, {"--ray-address": ray_address, "--unsafe-open-cluster": unsafe_open_cluster}
    )
    if chosen.extra:  # its package imported now (it is needed anyway): a missing extra, exit 2
        load(chosen.factory, extra=chosen.extra, backend=chosen.name)
    return lambda: chosen.make(settings, options)


def one_episode_backend(
    settings: Settings, backend: str | None, *, command: str
) -> Callable[[], Backend]:
    """The backend maker of ``run``, ``reproduce`` and ``packet``: `backend_factory`'s, reaped.

    The same backends ``submit`` makes (one way to make each), connected, then the leftovers of
    dead owners reaped and settled in this state folder's ledger (`runner.episode.reaping.
    connect`). A backend that does not run on this machine (a cluster) is refused, not made:
    these commands run one episode (``run``) or one replay after another (``reproduce``), so a
    cluster spreads nothing out and only adds its start-up (importing ray ~1 s, connecting,
    shipping the snapshot to a node); a reproduce verdict is also meant to be judged where it
    is read (a CI job, a reviewer's machine), and ``submit`` is the command whose many runs a
    cluster is for.

    Args:
        settings: the command's settings (``backend``, ``docker_host``, ``state_dir``).
        backend: ``--backend`` (None: ``SANDBOX_REPLAY_BACKEND``).
        command: the command's name, for the refusal.

    Raises:
        InputError: the chosen backend is not a backend of this machine (exit 2; checked now,
            before anything runs).
    """
    chosen = chosen_backend(settings, backend)
    if not chosen.runs_here:
        here = " or ".join(e.name for e in BACKENDS.values() if e.selectable and e.runs_here)
        raise InputError(
            f"{command} runs on this machine: --backend {here} ({chosen.name} is for submit's"
            " many runs; check SANDBOX_REPLAY_BACKEND)",
            field="--backend",
        )
    make = backend_factory(settings, chosen.name)
    # imported on use, not at module top: start-up speed (the ledger, `--help`)
    from runner.episode.reaping import connect

    return lambda: connect(make, settings.state_dir)
