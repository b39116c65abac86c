"""What a trace recorded of a workflow's MCP servers: the tools each one listed.

``reproduce`` does not start an MCP server whose ``tools/list`` the trace recorded, not even to
ask for its tools: the tools of that ``{mcp: {command: [...]}}`` entry come from the recorded
answers (docs/trace-format.md, "MCP traffic"), and its calls are served from the same trace.
A ``{mcp: {url}}`` entry is never contacted to list its tools: without a saved ``tools_list``
its tools are the trace's recording (`runner.admission.describe.sandbox_registry`).
Every agent that talks to a server lists its tools first, so a trace recorded from such an
agent holds them. A trace that never listed a server's tools (a workflow whose tool steps call
MCP tools as recorded-only tools, served from recordings; traces written before MCP traffic was
recorded) gets that server listed in a sandbox, as ``check`` does: it answers ``tools/list``
there and nothing else. A protocol call (``initialize``, ``tools/list``...:
`runner.tracetools.records.CallRecord.is_mcp_protocol_call`) is a call of the server's
protocol, not of a tool, so the registry check of the refusals leaves it out.
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
        ``{entry index: {"tools": [...]}}`` for each ``{mcp: {command}}`` or ``{mcp: {url}}``
        entry whose ``tools/list`` the trace recorded (``args.server`` ``tools[i]``): the
        tools of every page, in order, a name listed again kept once.
        `runner.tools.mcp.listed_tools` checks them. An entry the trace never listed is absent
        (a stdio server is asked in a sandbox; a URL's tools are then unknown).
    """
    servers = {
        index
        for index, entry in enumerate(workflow.spec.tools)
        if isinstance(entry, McpEntry)
        and (entry.mcp.command is not None or entry.mcp.url is not None)
    }
    found: dict[int, dict[str, Any]] = {}
    seen: dict[int, set[str]] = {}
    for call in trace.calls:
        if call.mcp_method != "tools/list" or call.error is not None or call.body is None:
            continue
        label = (call.args or {}).get("server")
        index = _entry_index(label)
        if index not in servers:
            continue
        try:
            result = json.loads(call.body)
        except ValueError:
            continue
        page = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(page, list):
            continue
        found.setdefault(index, {"tools": []})
        seen.setdefault(index, set())
        for tool in page:
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
