"""Sandbox backends: the interface (``base``), labels and leftovers, and the implementations.

``base`` defines `Backend` / `Sandbox` and the immutable `SandboxSpec` (mounts, limits, user);
``labels`` the owner labels that find leftovers of crashed processes; ``docker/`` the Docker
backend (the only code that imports the docker SDK: import it where it is used, ~0.14 s);
``unsandboxed`` the local-process backend of ``record`` (no isolation, by name).

May import: `runner.runtime` (protocol, for the unsandboxed backend), `runner.resources`,
`runner.errors`, the standard library and docker (``docker/`` only); never the packages above.
"""

from runner.backends.base import (
    Backend,
    ExitState,
    Mount,
    ResourceLimits,
    Sandbox,
    SandboxSpec,
    sandbox_user,
)
from runner.backends.unsandboxed import UnsandboxedProcessBackend

__all__ = [
    "Backend",
    "ExitState",
    "Mount",
    "ResourceLimits",
    "Sandbox",
    "SandboxSpec",
    "UnsandboxedProcessBackend",
    "sandbox_user",
]
