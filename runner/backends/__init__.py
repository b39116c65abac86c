"""Sandbox backends: the interface (``base``), the registry of backends, and the implementations.

``base`` defines `Backend` / `Sandbox` and the immutable `SandboxSpec` (mounts, limits, user);
``registry`` is the one place a concrete backend is named (name → lazy factory): ``docker/``
(the only code that imports the docker SDK), ``namespace/`` (bubblewrap), ``ray/`` (a Ray
cluster; the ``ray`` extra) and ``unsandboxed`` (``record``'s local process, no isolation, by
name); ``conformance`` the checks every sandboxing backend passes; ``labels`` the owner labels
that find leftovers of crashed processes; ``capacity`` how many sandboxes run at once;
``doctor`` the values ``doctor`` reports.

Nothing outside ``runner.cli`` and the backends' own packages imports a concrete backend
(import-linter, the ``concrete-backends`` contract): everything else asks the registry. This
package's names load on first use (`lazy_exports`), so that the registry's import (``--help``
lists its names) loads nothing else.

May import: `runner.wire` (protocol, environment names), `runner.resources`,
`runner.errors`, `runner.settings` (types), the standard library and docker (``docker/``
only), ray (``ray/`` only); never the packages above.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

if TYPE_CHECKING:  # the names for mypy and import-linter; loaded on first use at run time
    from runner.backends.base import (
        Backend,
        ExitState,
        Mount,
        ResourceLimits,
        Sandbox,
        SandboxSpec,
        sandbox_user,
    )

__all__ = [
    "Backend",
    "ExitState",
    "Mount",
    "ResourceLimits",
    "Sandbox",
    "SandboxSpec",
    "sandbox_user",
]
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "runner.backends.base"))
