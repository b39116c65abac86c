"""What a trace recorded of a workflow's MCP servers: their tools, and which calls were theirs.

``reproduce`` never starts an MCP server, not even to ask for its tools: the tools of each
``{mcp: {command: [...]}}`` entry come from the ``tools/list`` answers the trace recorded for
that server (docs/trace-format.md, "MCP traffic"; their calls are served from the same trace).
A server the trace never listed has no tools, so a recorded ``tools/call`` of it is refused as
"missing from today's registry", which is what it is. A protocol call (``initialize``,
``tools/list``...: `runner.tracetools.records.CallRecord.is_mcp_protocol_call`) is a call of
the server's protocol, not of a tool, so the registry check of the refusals leaves it out.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from runner.domain.mcpentry import McpEntry

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile
    from runner.tracetools.reader import Trace

__all__ = ["recorded_tools_lists"]


def recorded_tools_lists(trace: Trace, workflow: WorkflowFile) -> dict[int, dict[str, Any]]:
    """Each MCP server entry of ``workflow`` → the ``tools/list`` result the trace recorded.

    Args:
        trace: the read trace (hostile: each body is checked, a bad one ignored).
        workflow: the workflow being replayed.

    Returns:
        ``{entry index: {"tools": [...]}}`` for every ``{mcp: {command}}`` entry: the tools of
        every page recorded for that server (``args.server`` ``tools[i]``), in order, or an
        empty list when the trace has none. `runner.tools.mcp.listed_tools` checks them.
    """
    found: dict[int, dict[str, Any]] = {
        index: {"tools": []}
        for index, entry in enumerate(workflow.spec.tools)
        if isinstance(entry, McpEntry) and entry.mcp.command is not None
    }
    seen: dict[int, set[str]] = {index: set() for index in found}
    for call in trace.calls:
        if call.mcp_method != "tools/list" or call.error is not None or call.body is None:
            continue
        label = (call.args or {}).get("server")
        index = _entry_index(label)
        if index not in found:
            continue
        try:
            result = json.loads(call.body)
        except ValueError:
            continue
        page = result.get("tools") if isinstance(result, dict) else None
        for tool in page if isinstance(page, list) else []:
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(name, str) and name not in seen[index]:  # listed again: once
                seen[index].add(name)
                found[index]["tools"].append(tool)
    return found


def _entry_index(label: Any) -> int | None:
    if not isinstance(label, str) or not label.startswith("tools[") or not label.endswith("]"):
        return None
    digits = label[len("tools[") : -1]
    return int(digits) if digits.isdigit() and len(digits) < 6 else None
