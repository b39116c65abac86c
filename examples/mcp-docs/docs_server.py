"""A documentation MCP server: stdio transport, written with the official ``mcp`` package.

``MCPServer`` is what the package called ``FastMCP`` before 2.0 (``from mcp.server.fastmcp
import FastMCP`` in 1.x; the decorators are the same). Two tools, their MCP annotations
deciding their effect classes in sandbox-replay: ``search_docs`` is read-only (``read``:
served from recordings in a sandbox), ``delete_doc`` is destructive (``unsafe``: a workflow
whose step declares it is ineligible).
"""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("docs", instructions="The product documentation.")

DOCS = {
    "install": "Install with `pip install acme` (Python 3.9 or newer).",
    "refund": "Refunds are paid to the original card within 14 days.",
    "password": "Reset a password under Settings > Security > Reset password.",
}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def search_docs(query: str) -> str:
    """Search the documentation; the matching passages, or 'no page found'."""
    hits = [text for key, text in DOCS.items() if key in query.lower()]
    return " ".join(hits) or "no page found"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_doc(key: str) -> str:
    """Delete a documentation page."""
    DOCS.pop(key, None)
    return "deleted"


if __name__ == "__main__":
    server.run("stdio")
