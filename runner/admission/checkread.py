"""``check``'s registry builder: tools read from source, a sandbox only for an MCP server.

`check_describer` is the ``describe`` callable `runner.admission.eligibility.check_eligibility`
takes. It keeps ``check`` quick: a workflow without an MCP stdio server is read from source
(`runner.tools.static.static_registry`), and only one that names such a server makes a
backend (the settings' backend of this machine, `runner.backends.registry.here`) and
loads the sandbox describer (`runner.admission.describe`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner.domain.registry import Registry
from runner.domain.workflow import WorkflowFile
from runner.policy import Policy, load_policy
from runner.tools.locate import locate_tools
from runner.tools.static import static_registry

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.settings import Settings

__all__ = ["check_describer"]


class check_describer:  # used as a function: describe = check_describer(...)
    """``check``'s registry builder: read from source, except where only a sandbox can tell.

    A workflow naming an MCP stdio server (``tools: [{mcp: {command: [...]}}]``) has tools
    that only the server can list, and the server is the challenger's code: for such a
    workflow the registry is described inside a sandbox (`sandbox_registry`, the server's
    files in a tool snapshot), so ``check`` needs the engine and the image then. Every other
    workflow is read from source as before (`runner.tools.static.static_registry`).
    Close it (``with``) to release the backend it may have connected.
    """

    def __init__(self, settings: Settings, policy: Policy | str | Path) -> None:
        self.settings = settings
        self.policy = policy
        self._backend: Backend | None = None  # made once a workflow needs it

    def __call__(self, workflow: WorkflowFile) -> Registry:
        """The unfiltered registry of ``workflow``.

        Raises:
            InputError: see `static_registry` and `sandbox_registry`.
            InfrastructureError: no engine for a workflow that needs a sandbox.
        """
        if not locate_tools(workflow).mcp_servers:
            return static_registry(workflow)
        # imported on use, not at module top: start-up speed (`check` of a workflow without an
        # MCP server needs neither the engine nor the sandbox describer and its driver)
        from runner.admission.describe import sandbox_registry
        from runner.backends.registry import here

        if self._backend is None:
            self._backend = here(self.settings).make(self.settings)
        policy = self.policy if isinstance(self.policy, Policy) else load_policy(self.policy)
        return sandbox_registry(
            workflow,
            backend=self._backend,
            settings=self.settings,
            image=self.settings.image,
            policy=policy,
        )

    def __enter__(self) -> check_describer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._backend is not None:
            self._backend.close()
