"""Which Docker engine to talk to, chosen as the docker CLI chooses it, and why.

`discover_engine` returns an `Engine`: the address, how to reach it (TLS, ssh) and the reason
it was chosen, which ``doctor`` prints and every "not reachable" error names. The order is the
docker CLI's (``docker/cli`` ``resolveContextName``: an explicit host wins, then
``DOCKER_HOST``, then ``DOCKER_CONTEXT``, then ``currentContext`` of the docker config file),
with this project's own setting first:

1. ``SANDBOX_REPLAY_DOCKER_HOST`` (the ``docker_host`` setting), with the TLS variables of the
   environment (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``);
2. ``DOCKER_HOST`` (with the same TLS variables);
3. the context named by ``DOCKER_CONTEXT``, else the ``currentContext`` of the docker config
   file (``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``), read with the docker
   SDK's context API (`docker.context.ContextAPI`): Docker Desktop (``desktop-linux``), Colima,
   OrbStack, Rancher Desktop and remote engines set one up. A context named but not found is an
   error (the CLI refuses it too), never a silent fall-back to another engine;
4. the platform's default: ``unix:///var/run/docker.sock``, or the named pipe
   ``npipe:////./pipe/docker_engine`` on Windows;
5. when that default socket does not exist, Podman's API socket (rootless
   ``$XDG_RUNTIME_DIR/podman/podman.sock``, rootful ``/run/podman/podman.sock``, a Podman
   machine's on macOS, the ``podman-machine-default`` pipe on Windows), the first that exists.

``ssh://`` addresses are reached through the system's ``ssh`` command (the docker SDK's
``use_ssh_client``), as the docker CLI does; no extra Python package is needed.

Nothing here talks to the engine: `runner.backends.docker.client.connect` does, with
`Engine.client_kwargs`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from runner.errors import InfrastructureError

__all__ = [
    "DEFAULT_NPIPE",
    "DEFAULT_UNIX_SOCKET",
    "Engine",
    "discover_engine",
    "engine_fix",
    "podman_sockets",
]

DEFAULT_UNIX_SOCKET = "unix:///var/run/docker.sock"
DEFAULT_NPIPE = "npipe:////./pipe/docker_engine"
_PODMAN_NPIPE = "npipe:////./pipe/podman-machine-default"


@dataclass(frozen=True)
class Engine:
    """The engine a client connects to, and why it was chosen.

    Attributes:
        address: the engine's address (``unix://...``, ``npipe://...``, ``tcp://...``,
            ``ssh://...``).
        source: what chose it: ``setting``, ``DOCKER_HOST``, ``context``, ``default`` or
            ``podman``.
        reason: the same in words, for ``doctor`` and error messages.
        context: the docker context's name when a context chose it, else None.
        tls: TLS settings for the client (a `docker.tls.TLSConfig`, True, or None: no TLS).
    """

    address: str
    source: str
    reason: str
    context: str | None = None
    tls: Any = field(default=None, compare=False)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``docker.APIClient`` that reach this engine (no version)."""
        kwargs: dict[str, Any] = {"base_url": self.address}
        if self.tls is not None and self.tls is not False:
            kwargs["tls"] = self.tls
        if self.address.startswith("ssh://"):
            kwargs["use_ssh_client"] = True
        return kwargs

    def describe(self) -> str:
        """``ADDRESS (REASON)``: one line for ``doctor`` and errors."""
        return f"{self.address} ({self.reason})"


def engine_fix(platform: str | None = None) -> str:
    """The fix line for an engine that does not answer, worded for ``platform``.

    Args:
        platform: a ``sys.platform`` value (default: this host's).
    """
    platform = platform or sys.platform
    choose = (
        "or point at a running engine: `docker context use NAME` (docker context ls lists "
        "them), or DOCKER_HOST / SANDBOX_REPLAY_DOCKER_HOST set to its address"
    )
    if platform == "darwin":
        return (
            "start Docker Desktop (or `colima start`, OrbStack, `podman machine start`), " + choose
        )
    if platform == "win32":
        return "start Docker Desktop (or Podman Desktop's machine), " + choose
    return "start the engine (`sudo systemctl start docker`, or Podman's socket), " + choose


def podman_sockets(
    environ: Mapping[str, str], platform: str, home: Path | None = None
) -> list[str]:
    """The addresses where Podman serves its Docker-compatible API, most specific first.

    Args:
        environ: the environment (``XDG_RUNTIME_DIR``).
        platform: a ``sys.platform`` value.
        home: the user's home folder (default ``Path.home()``).
    """
    if platform == "win32":
        return [_PODMAN_NPIPE]
    found: list[str] = []
    runtime_dir = environ.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        found.append(f"unix://{PurePosixPath(runtime_dir) / 'podman' / 'podman.sock'}")
    if platform == "darwin":
        machine = (home or Path.home()) / ".local/share/containers/podman/machine"
        found += [f"unix://{machine / 'podman.sock'}", f"unix://{machine / 'qemu/podman.sock'}"]
    else:
        found.append("unix:///run/podman/podman.sock")
    return found


def _socket_path(address: str) -> str | None:
    """The file an ``unix://`` or ``npipe://`` address names (None for network addresses)."""
    if address.startswith("unix://"):
        return address[len("unix://") :]
    if address.startswith("npipe://"):
        return address[len("npipe://") :].replace("/", "\\")
    return None


def _from_env(explicit: str | None, environ: Mapping[str, str]) -> tuple[str, Any] | None:
    """``(address, tls)`` from an explicit address or ``DOCKER_HOST`` with the TLS variables."""
    from docker.utils import kwargs_from_env

    env = dict(environ)
    if explicit:
        env["DOCKER_HOST"] = explicit
    if not env.get("DOCKER_HOST"):
        return None
    try:
        kwargs = kwargs_from_env(environment=env)
    except Exception as exc:  # the SDK's TLSParameterError, a bad DOCKER_CERT_PATH
        raise InfrastructureError(
            f"the TLS settings of the Docker engine address are unusable: {exc}",
            address=env["DOCKER_HOST"],
            fix="check DOCKER_TLS_VERIFY and DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem)",
        ) from exc
    return str(kwargs.get("base_url") or env["DOCKER_HOST"]), kwargs.get("tls")


def _config_file(environ: Mapping[str, str], home: Path | None) -> Path:
    """The docker CLI's config file: ``$DOCKER_CONFIG/config.json``, else ``~/.docker/...``."""
    folder = environ.get("DOCKER_CONFIG")
    base = Path(folder) if folder else (home or Path.home()) / ".docker"
    return base / "config.json"


def _from_context(name: str, why: str, config: Path) -> Engine:
    """The engine of docker context ``name`` (read with the docker SDK's context API).

    Raises:
        InfrastructureError: no such context, or its metadata or TLS files are unreadable.
    """
    from docker.context import ContextAPI
    from docker.utils.config import find_config_file

    fix = "`docker context ls` lists the contexts; `docker context use NAME` picks one"
    # The SDK looks for contexts beside the config file it finds; without one it would read
    # a ``contexts`` folder of the working directory: refuse instead.
    found = find_config_file()
    if found is None or Path(str(found)).resolve() != config.resolve():
        raise InfrastructureError(
            f"docker context {name!r} ({why}) cannot be read: no docker config file at "
            f"{config} (the docker SDK finds contexts beside it)",
            address=f"docker context {name}",
            fix=f"run `docker context use {name}` once, or set DOCKER_HOST",
        )
    try:
        context = ContextAPI.get_context(name)
    except Exception as exc:  # the SDK raises a bare Exception for a corrupted meta file
        raise InfrastructureError(
            f"docker context {name!r} ({why}) is unreadable: {exc}",
            address=f"docker context {name}",
            fix=fix,
        ) from exc
    host = getattr(context, "Host", None) if context is not None else None
    if not host:
        raise InfrastructureError(
            f"docker context {name!r} ({why}) does not exist or has no Docker endpoint",
            address=f"docker context {name}",
            fix=fix,
        )
    tls = context.TLSConfig if context is not None else None
    return Engine(str(host), "context", f"docker context {name!r}, {why}", name, tls)


def _current_context(config: Path) -> str | None:
    """``currentContext`` of the docker config file; None when absent or unreadable."""
    import json

    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("currentContext") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


def discover_engine(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
    exists: Callable[[str], bool] = os.path.exists,
) -> Engine:
    """The engine a command uses, in the docker CLI's order (see the module docstring).

    Args:
        explicit: the ``docker_host`` setting (``SANDBOX_REPLAY_DOCKER_HOST``), or None.
        environ: the environment (default ``os.environ``).
        platform: a ``sys.platform`` value (default this host's).
        home: the user's home folder (default ``Path.home()``).
        exists: whether a socket or pipe path exists (tests simulate other hosts).

    Returns:
        The chosen `Engine`; nothing was connected yet.

    Raises:
        InfrastructureError: a context was named (``DOCKER_CONTEXT`` or the config file) but
            cannot be read, or the TLS variables are unusable (``fix`` names what to do).
    """
    environ = os.environ if environ is None else environ
    platform = platform or sys.platform
    if explicit:
        address, tls = _from_env(explicit, environ) or (explicit, None)
        return Engine(address, "setting", "SANDBOX_REPLAY_DOCKER_HOST", tls=tls)
    from_env = _from_env(None, environ)
    if from_env is not None:
        return Engine(from_env[0], "DOCKER_HOST", "DOCKER_HOST", tls=from_env[1])
    config = _config_file(environ, home)
    named = environ.get("DOCKER_CONTEXT")
    if named and named != "default":
        return _from_context(named, "from DOCKER_CONTEXT", config)
    current = None if named else _current_context(config)
    if current and current != "default":
        return _from_context(current, f"the current context of {config}", config)
    default = DEFAULT_NPIPE if platform == "win32" else DEFAULT_UNIX_SOCKET
    default_path = _socket_path(default)
    if default_path is not None and not exists(default_path):
        for candidate in podman_sockets(environ, platform, home):
            path = _socket_path(candidate)
            if path is not None and exists(path):
                return Engine(
                    candidate, "podman", f"Podman's socket: the default {default} is absent"
                )
    return Engine(default, "default", "the platform's default address")
