"""The ``{mcp: {...}}`` entry of a workflow's ``tools``: a stdio server, a URL, or a saved list.

The spec only (what a workflow file may say); what the listed tools are and their effect
classes is `runner.tools.mcp`'s.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MAX_ARGS", "MAX_URL_CHARS", "McpEntry", "McpSource"]

MAX_ARGS = 64
"""Parts of an MCP server's command."""
MAX_URL_CHARS = 2048
"""Characters of an MCP server's URL (what browsers and proxies commonly accept)."""


def _url_problem(url: str) -> str | None:
    """Why ``url`` is no Streamable HTTP endpoint this project routes, or None.

    ``http`` or ``https`` only (the transport is HTTP; MCP specification 2025-06-18,
    "Transports"), a plain host (no user information: a password would be copied into every
    trace's workflow; no fragment, which HTTP never sends), a numeric port, printable ASCII.
    """
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        return "an mcp url is printable ASCII without spaces"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"an mcp url does not parse: {exc}"
    if parts.scheme not in ("http", "https"):
        return "an mcp url is http:// or https:// (the Streamable HTTP transport)"
    if not parts.hostname or "@" in parts.netloc:
        return "an mcp url names a host, without user information (no user:password@)"
    if parts.fragment or "#" in url:
        return "an mcp url has no #fragment"
    if port == 0:
        return "an mcp url's port is 1-65535"
    return None


class McpSource(BaseModel):
    """The ``mcp`` mapping of a workflow ``tools`` entry: a stdio server, a URL, or a saved list.

    Attributes:
        command: the stdio server's command and arguments (run inside a sandbox, with the
            workflow's folder copy as its working folder; an argument naming a file below the
            workflow's folder brings that file into the tool snapshot).
        url: a Streamable HTTP server's endpoint (``https://host/mcp``): only ``record``
            contacts it, from the host; in a sandbox the agent's requests to it reach the
            runtime instead (`runner.runtime.mcphttp`).
        tools_list: a saved ``tools/list`` result, relative to the workflow file; with
            ``url``, what ``check`` knows of the server's tools (it never contacts a URL).
        prefix: put before every tool name with a dot (``fs`` → ``fs.read_file``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=MAX_ARGS)
    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL_CHARS)
    tools_list: str | None = Field(default=None, min_length=1, max_length=1024)
    prefix: str = Field(default="", max_length=64, pattern=r"^([A-Za-z0-9_-]+)?$")

    @model_validator(mode="after")
    def _one_kind(self) -> McpSource:
        if self.command is not None and self.url is not None:
            raise ValueError("an mcp entry names a 'command' or a 'url', not both")
        if self.command is None and self.url is None and self.tools_list is None:
            raise ValueError("an mcp entry needs one of 'command', 'url' and 'tools_list'")
        if self.command is not None and self.tools_list is not None:
            raise ValueError("an mcp entry needs exactly one of 'command' and 'tools_list'")
        if self.command is not None and any(
            not part or len(part) > 4096 or "\x00" in part for part in self.command
        ):
            raise ValueError("each part of an mcp command is non-empty text of <= 4096 characters")
        if self.url is not None:
            problem = _url_problem(self.url)
            if problem is not None:
                raise ValueError(problem)
        if self.tools_list is not None and not self.tools_list.endswith(".json"):
            raise ValueError("an mcp tools_list is a .json file")
        return self

    def label(self) -> str:
        """How diagnostics name the source: ``mcp server python3 server.py``, the URL or file."""
        if self.command is not None:
            return "mcp server " + " ".join(self.command)[:200]
        if self.url is not None:
            return f"mcp server {self.url[:200]}"
        return f"mcp tools_list {self.tools_list}"


class McpEntry(BaseModel):
    """A workflow ``tools`` entry ``{mcp: {...}}`` (`McpSource`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mcp: McpSource
