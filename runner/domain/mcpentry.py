"""The ``{mcp: {...}}`` entry of a workflow's ``tools``: a stdio server or a saved list.

The spec only (what a workflow file may say); what the listed tools are and their effect
classes is `runner.tools.mcp`'s.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MAX_ARGS", "McpEntry", "McpSource"]

MAX_ARGS = 64
"""Parts of an MCP server's command."""


class McpSource(BaseModel):
    """The ``mcp`` mapping of a workflow ``tools`` entry: a stdio server or a saved list.

    Attributes:
        command: the stdio server's command and arguments (run inside a sandbox, with the
            workflow's folder copy as its working folder; an argument naming a file below the
            workflow's folder brings that file into the tool snapshot).
        tools_list: a saved ``tools/list`` result, relative to the workflow file.
        prefix: put before every tool name with a dot (``fs`` → ``fs.read_file``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=MAX_ARGS)
    tools_list: str | None = Field(default=None, min_length=1, max_length=1024)
    prefix: str = Field(default="", max_length=64, pattern=r"^([A-Za-z0-9_-]+)?$")

    @model_validator(mode="after")
    def _one_kind(self) -> McpSource:
        if (self.command is None) == (self.tools_list is None):
            raise ValueError("an mcp entry needs exactly one of 'command' and 'tools_list'")
        if self.command is not None and any(
            not part or len(part) > 4096 or "\x00" in part for part in self.command
        ):
            raise ValueError("each part of an mcp command is non-empty text of <= 4096 characters")
        if self.tools_list is not None and not self.tools_list.endswith(".json"):
            raise ValueError("an mcp tools_list is a .json file")
        return self

    def label(self) -> str:
        """How diagnostics name the source: ``mcp server python3 server.py`` or the file."""
        if self.command is not None:
            return "mcp server " + " ".join(self.command)[:200]
        return f"mcp tools_list {self.tools_list}"


class McpEntry(BaseModel):
    """A workflow ``tools`` entry ``{mcp: {...}}`` (`McpSource`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mcp: McpSource
