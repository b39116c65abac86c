"""How an MCP server's JSON-RPC exchange becomes a call line: the rule every recorder shares.

Standard library only, Python 3.9+. Two recorders write MCP traffic (docs/trace-format.md, "MCP
traffic"): the sandbox's hub (`runner.runtime.mcphub`, behind the stand-in
`runner.runtime.mcpproxy`) and ``runner.sdk.record`` in a user's own process
(`runner.sdk.mcpstdio`). Both take from here, so a trace recorded in production is served by
``reproduce`` exactly like one ``sandbox-replay record`` wrote:

- which workflow entries are stdio servers and which argument list starts one (`servers_of`,
  `matching`);
- what a request is recorded as (`request_call`): ``tools/call`` as the MCP tool's call
  ``PREFIX.NAME`` with the call's ``arguments``; any other method as a protocol call
  ``mcp.METHOD`` (`protocol_tool_id`) with ``{"server": "tools[i]", "params": ...}``, params
  without their ``_meta`` member (`normalised_params`);
- what a response is recorded as (`response_outcome`): the ``result`` as compact JSON, or a
  JSON-RPC error as error class `ERROR_CLASS` whose message is the error object as JSON;
- the effect class an MCP tool's annotations give (`effect_of`; specification 2025-06-18,
  "Tool annotations"), which the host's registry (`runner.tools.mcp`) uses too.
"""

import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "ERROR_CLASS",
    "INTERNAL_ERROR",
    "MAX_LINE_BYTES",
    "effect_of",
    "input_schema",
    "matching",
    "mcp_entries",
    "normalised_params",
    "protocol_tool_id",
    "request_call",
    "response_outcome",
    "server_ended",
    "servers_of",
]

ERROR_CLASS = "McpError"
"""The error class of a JSON-RPC error response (the ``mcp`` client raises ``McpError``)."""
MAX_METHOD = 120  # "mcp." + the method stays within a tool id's 128 characters
MAX_TOOL_NAME = 128  # MCP tool names: 1-128 characters (specification 2025-06-18, "Tool names")
MAX_LINE_BYTES = 4 << 20
"""The longest line of the stdio transport read as a message, on either side."""
INTERNAL_ERROR = -32603  # JSON-RPC 2.0, "Error object"
_METHOD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/")
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


def servers_of(workflow: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The MCP stdio servers of a workflow: ``{label, command, prefix}`` each.

    Args:
        workflow: the normalised workflow, or the mapping a workflow file holds (its
            ``tools`` are read as they are, an entry that is no stdio server skipped).

    ``label`` is ``tools[i]``, the entry's place in the workflow's ``tools`` (how
    diagnostics name it; stable in the trace's own copy of the workflow).
    """
    found = []
    for label, mcp, prefix in mcp_entries(workflow):
        command = mcp.get("command")
        if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            found.append({"label": label, "command": command, "prefix": prefix})
    return found


def mcp_entries(workflow: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any], str]]:
    """Every ``{mcp: {...}}`` entry of a workflow's ``tools``: ``(label, mapping, prefix)``.

    ``label`` is ``tools[i]``; ``prefix`` the entry's string ``prefix`` or ``""``. Read as the
    mapping holds it (hostile: anything not a mapping is skipped); `servers_of` and
    `runner.sdk.mcphttp.url_servers` pick their kind of server from it.
    """
    tools = workflow.get("tools")
    found: List[Tuple[str, Dict[str, Any], str]] = []
    for index, entry in enumerate(tools if isinstance(tools, list) else []):
        mcp = entry.get("mcp") if isinstance(entry, dict) else None
        if isinstance(mcp, dict):
            prefix = mcp.get("prefix")
            found.append(
                ("tools[{}]".format(index), mcp, prefix if isinstance(prefix, str) else "")
            )
    return found


_PYTHON = re.compile(r"python(\d+(\.\d+)*)?(\.exe)?\Z", re.IGNORECASE)
"""A Python interpreter's program name: one server command whichever the agent names."""


def matching(args: Any, servers: Sequence[Dict[str, Any]]) -> Optional[str]:
    """The label of the server whose command ``args`` (a child's argument list) is, or None.

    A command matches when its argument list equals the declared ``command``, or equals it but
    for the directory of the program (``/usr/bin/python3`` for ``python3``) or, for a Python
    interpreter, its name (``python``, ``python3``, ``python3.11``: an agent starting its
    server with ``sys.executable``, a virtualenv's ``.venv/bin/python``, against a workflow
    saying ``python3``, was recorded by nobody: a new user's finding). A string (a shell
    command line) matches nothing.
    """
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        return None
    argv = [
        a if isinstance(a, str) else os.fsdecode(a) for a in args if isinstance(a, (str, bytes))
    ]
    if len(argv) != len(args) or not argv:
        return None
    for server in servers:
        command = server["command"]
        if len(command) != len(argv) or command[1:] != argv[1:]:
            continue
        mine, theirs = os.path.basename(command[0]), os.path.basename(argv[0])
        if (
            command[0] == argv[0]
            or mine == theirs
            or (_PYTHON.match(mine) and _PYTHON.match(theirs))
        ):
            return str(server["label"])
    return None


def protocol_tool_id(method: str) -> str:
    """The tool id of a protocol request: ``tools/list`` → ``mcp.tools.list``.

    Raises:
        ValueError: not a method name (empty, over `MAX_METHOD`, characters other than
            letters, digits, ``_ - /``, or an empty part).
    """
    if not method or len(method) > MAX_METHOD or not set(method) <= _METHOD_CHARS:
        raise ValueError("not an MCP method name")
    parts = method.split("/")
    if any(not part for part in parts):
        raise ValueError("not an MCP method name")
    return "mcp." + ".".join(parts)


def normalised_params(params: Any) -> Dict[str, Any]:
    """``params`` as recorded and matched: an object without its ``_meta`` member."""
    if not isinstance(params, dict):
        return {}
    return {k: v for k, v in params.items() if k != "_meta"}


def request_call(server: Dict[str, Any], method: str, params: Any) -> Tuple[str, Dict[str, Any]]:
    """The tool id and ``args`` a request of ``server`` (`servers_of`) is recorded with.

    Returns:
        ``(PREFIX.NAME, arguments)`` for ``tools/call`` (``NAME`` without a prefix; arguments
        that are no object are ``{}``), else ``(mcp.METHOD, {"server": label, "params":
        normalised params})``.

    Raises:
        ValueError: a ``tools/call`` without a tool name of 1 to 128 characters, or a method
            that is no method name (`protocol_tool_id`); such a request is no call.
    """
    params = normalised_params(params)
    if method != "tools/call":
        return protocol_tool_id(method), {"server": server["label"], "params": params}
    name = params.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_TOOL_NAME:
        raise ValueError("tools/call needs the tool's name")
    tool_id = "{}.{}".format(server["prefix"], name) if server["prefix"] else name
    arguments = params.get("arguments")
    return tool_id, arguments if isinstance(arguments, dict) else {}


def response_outcome(response: Any) -> Tuple[Optional[str], Optional[str]]:
    """``(body, None)`` or ``(None, error message)`` of a server's JSON-RPC response.

    ``body`` is the ``result`` as compact JSON (non-ASCII kept); the error message (of class
    `ERROR_CLASS`) is the error object as compact JSON, cut at 4,000 characters.

    Raises:
        ValueError: not a JSON-RPC response (neither or both of ``result`` and ``error``), or
            an error that is no JSON-RPC error object (an integer ``code``).
    """
    if not isinstance(response, dict) or ("result" in response) == ("error" in response):
        raise ValueError("the MCP server's answer is not a JSON-RPC response")
    if "error" in response:
        error = response["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            raise ValueError("the MCP server's error is not a JSON-RPC error object")
        return None, json.dumps(error, separators=(",", ":"))[:4000]
    return json.dumps(response["result"], separators=(",", ":"), ensure_ascii=False), None


def input_schema(tool: Dict[str, Any]) -> Any:
    """A listed tool's argument schema: its ``inputSchema``, else an object with no properties.

    What its schema hash is taken of, by the host's registry and by ``runner.sdk.record``.
    """
    if "inputSchema" in tool:
        return tool["inputSchema"]
    return {"type": "object", "properties": {}}


def server_ended(code: Optional[int]) -> Dict[str, Any]:
    """The response recorded for a request the server ended without answering (exit ``code``)."""
    return {"error": {"code": INTERNAL_ERROR, "message": "the MCP server ended ({})".format(code)}}


def effect_of(annotations: Any) -> Tuple[str, str]:
    """The effect class of an MCP tool and the annotations that decided it, in words.

    Rule (specification 2025-06-18, "Tool annotations"; defaults there: ``readOnlyHint``
    false, ``destructiveHint`` true, ``idempotentHint`` false, ``openWorldHint`` true):
    ``readOnlyHint: true`` → ``read``, unless the same annotations also say
    ``destructiveHint: true`` (contradictory hints: ``unsafe``, fail closed); anything else
    (no annotations, a write of any kind) → ``unsafe``.

    Args:
        annotations: the tool's ``annotations`` (any JSON; only boolean hints are read).

    Returns:
        (``"read"`` or ``"unsafe"``, e.g. ``"readOnlyHint: true, idempotentHint: true"``
        or ``"no annotations (MCP defaults: destructiveHint and openWorldHint true)"``).
    """
    if not isinstance(annotations, dict) or not any(
        isinstance(annotations.get(h), bool) for h in _HINTS
    ):
        return "unsafe", "no annotations (MCP defaults: destructiveHint and openWorldHint true)"
    hints = {
        h: annotations[h] if isinstance(annotations.get(h), bool) else _DEFAULTS[h] for h in _HINTS
    }

    def said(hint: str) -> str:
        given = isinstance(annotations.get(hint), bool)
        return "{}: {}".format(hint, str(hints[hint]).lower()) + ("" if given else " (default)")

    idempotent = [said("idempotentHint")] if "idempotentHint" in annotations else []
    if hints["readOnlyHint"] and annotations.get("destructiveHint") is True:
        return (
            "unsafe",
            "contradictory annotations: readOnlyHint: true with destructiveHint: true "
            "(fail closed)",
        )
    if hints["readOnlyHint"]:
        return "read", ", ".join([said("readOnlyHint"), *idempotent])
    deciding = [said(h) for h in ("destructiveHint", "openWorldHint") if hints[h]]
    if not deciding:  # explicitly additive and closed-world: still a change to the server
        deciding = [said("readOnlyHint"), "destructiveHint: false", "openWorldHint: false"]
    return "unsafe", ", ".join([*deciding, *idempotent])
