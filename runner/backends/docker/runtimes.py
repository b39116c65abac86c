"""The engine's OCI runtimes, and the check of the one a command asks for (``--runtime``).

Docker runs each container with an OCI runtime: ``runc`` by default; ``crun`` (C, smaller and
faster to start) and ``runsc`` (gVisor: a user-space kernel between the sandbox and the host's)
when the engine registers them (``dockerd --add-runtime NAME=PATH`` or ``"runtimes"`` in
``/etc/docker/daemon.json``; ``.ci/ensure-engine.sh`` registers those it finds installed).
``GET /info`` lists them under ``Runtimes``, with ``DefaultRuntime``.

A runtime the engine does not have is the caller's input (``--runtime`` or
``SANDBOX_REPLAY_RUNTIME`` names something absent on this engine): `InputError`, exit 2, naming
the runtimes it has, before any container is created. The engine left unreachable is exit 6,
as for every engine call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.backends.docker.client import retrying
from runner.errors import InputError

__all__ = ["EngineRuntimes", "engine_runtimes", "require_runtime"]


@dataclass(frozen=True)
class EngineRuntimes:
    """The runtimes an engine offers.

    Attributes:
        names: every registered runtime, sorted (e.g. ``("crun", "runc", "runsc")``).
        default: the engine's ``DefaultRuntime`` (``runc`` unless configured otherwise).
    """

    names: tuple[str, ...]
    default: str


def engine_runtimes(api: Any) -> EngineRuntimes:
    """The runtimes of the engine behind ``api`` (a ``docker.APIClient``), from ``GET /info``.

    Raises:
        InfrastructureError: the engine failed or is unreachable.
    """
    info = retrying("engine info", api.info)
    raw = info.get("Runtimes") if isinstance(info, dict) else None
    names = tuple(sorted(str(k) for k in raw)) if isinstance(raw, dict) else ()
    default = info.get("DefaultRuntime") if isinstance(info, dict) else None
    return EngineRuntimes(names=names, default=str(default or "runc"))


def require_runtime(api: Any, runtime: str) -> EngineRuntimes:
    """Check that the engine has ``runtime``; return what it has.

    Raises:
        InputError: the engine has no runtime of that name (exit 2; the message names the
            engine's runtimes and how one is registered).
        InfrastructureError: the engine failed or is unreachable.
    """
    have = engine_runtimes(api)
    if runtime not in have.names:
        offered = ", ".join(have.names) or "none listed"
        raise InputError(
            f"the Docker engine has no runtime {runtime!r} (it has: {offered}; register one"
            ' with dockerd --add-runtime NAME=PATH or daemon.json "runtimes")',
            field="runtime (--runtime, SANDBOX_REPLAY_RUNTIME)",
        )
    return have
