"""Where tool code comes from: locate, source, static reading, MCP, the snapshot.

``locate`` finds each ``tools`` entry of a workflow without importing it (`locate_tools`;
``programs``: a program step's module); ``source`` reads tool manifests and saved MCP lists and
is the one host import of tool code (`registry_for_workflow`, ``record`` alone); ``static``
(with ``static_walk``, ``static_decl``, ``static_values``) reads tool modules from source
(`static_registry`: ``check`` imports nothing); ``mcp`` turns an MCP ``tools/list`` into tools
with effect classes; ``snapshot/`` is the read-only copy of the tool code a sandbox mounts.

May import: `runner.backends` (``Mount``), `runner.domain`, `runner.settings`,
`runner.resources`, `runner.wire.protocol`, `runner.sdk`, `runner.trace`, `runner.errors`;
never a sandbox run (`runner.episode`) or anything above it.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562): `check` reads tools from source
# and must not load the snapshot or the host import of `record`.
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.tools.locate import ToolLocations, locate_tools
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot
    from runner.tools.source import registry_for_workflow
    from runner.tools.static import static_registry

__all__ = [
    "ToolLocations",
    "ToolSnapshot",
    "locate_tools",
    "registry_for_workflow",
    "static_registry",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ToolLocations": "runner.tools.locate",
        "ToolSnapshot": "runner.tools.snapshot.toolsnapshot",
        "locate_tools": "runner.tools.locate",
        "registry_for_workflow": "runner.tools.source",
        "static_registry": "runner.tools.static",
    },
)
