"""Tools of an MCP server: a ``tools/list`` result → tool specs with effect classes.

A workflow's ``tools`` entry ``{mcp: {tools_list: FILE}}`` names a saved ``tools/list`` result
(the JSON-RPC response, its ``result``, or a list of tools); ``{mcp: {command: [...]}}`` names a
stdio server, whose ``tools/list`` is asked inside a sandbox (`runner.episode` describes it;
the server is the challenger's code and never runs on the host). Either way the tools arrive
here as hostile JSON and become recorded-only tools (no code: in shadow runs and ``reproduce``
their calls are served from recordings, like imported tools).

Effect class from the tool's ``annotations`` (MCP specification 2025-06-18, "Tool
annotations"; defaults there: ``readOnlyHint`` false, ``destructiveHint`` true,
``idempotentHint`` false, ``openWorldHint`` true; clients must treat them as untrusted hints):

- ``readOnlyHint: true`` → ``read`` (whatever ``openWorldHint`` says: a read of the open world
  is still a read), unless the same annotations also say ``destructiveHint: true``: hints that
  contradict themselves are no description to trust, so the tool is ``unsafe`` and
  ``decided_by`` says why (the specification calls ``destructiveHint``
  "meaningful only when readOnlyHint == false", which a server that sets both got wrong);
- anything else → ``unsafe`` (fail closed): ``destructiveHint`` or ``openWorldHint`` true, given
  or by default, or no annotations at all; a non-destructive closed-world write still changes
  the server's state, which no sandbox contains.

``idempotentHint`` is recorded with the deciding annotations (`ToolSpec.decided_by`), which
``check`` prints beside the class.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.domain.ids import path_under
from runner.errors import InputError
from runner.sdk import Effect, mcpcalls

__all__ = ["MAX_TOOLS", "effect_of", "listed_tools", "server_files"]

MAX_TOOLS = 1000
"""Tools one MCP source may list (more is refused: a server flooding the registry)."""

# MCP tool names: 1-128 characters of A-Z a-z 0-9 _ - . (specification 2025-06-18, "Tool
# names"); this project's tool ids add that dots separate non-empty parts.
_NAME = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")


def effect_of(annotations: Any) -> tuple[Effect, str]:
    """The effect class of an MCP tool and the annotations that decided it, in words.

    The rule (the module docstring) is `runner.sdk.mcpcalls.effect_of`'s, which
    ``runner.sdk.record`` applies to the tools it sees listed.

    Args:
        annotations: the tool's ``annotations`` (any JSON; only boolean hints are read).

    Returns:
        (`Effect.READ` or `Effect.UNSAFE`, e.g. ``"readOnlyHint: true, idempotentHint: true"``
        or ``"no annotations (MCP defaults: destructiveHint and openWorldHint true)"``).
    """
    effect, decided_by = mcpcalls.effect_of(annotations)
    return Effect(effect), decided_by


def _tools_of(data: Any, file: str) -> list[Any]:
    """The list of tools in a JSON-RPC response, a ``tools/list`` result or a bare list."""
    if isinstance(data, dict) and "result" in data and "jsonrpc" in data:
        data = data["result"]
    if isinstance(data, dict):
        if not isinstance(data.get("tools"), list):
            raise InputError("an MCP tools/list result needs a 'tools' list", file=file)
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError("an MCP tools/list result must be an object or a list", file=file)
    if len(data) > MAX_TOOLS:
        raise InputError(f"more than {MAX_TOOLS} MCP tools listed ({len(data)})", file=file)
    return data


def listed_tools(data: Any, *, file: str, prefix: str = "") -> list[dict[str, Any]]:
    """The tools of a ``tools/list`` result, each checked and given its effect class.

    Args:
        data: the decoded JSON (hostile: checked field by field).
        file: where it came from (a saved file, or ``mcp server CMD``), for errors.
        prefix: put before every tool name with a dot (``fs`` → ``fs.read_file``), or empty.

    Returns:
        ``{"id", "effect" (`Effect`), "decided_by", "description", "schema"}`` per tool, in
        the listed order (`runner.tools.source.mcp_tool_specs` makes them tool specs).

    Raises:
        InputError: not a tools/list result, a tool without a valid ``name`` (named with its
            index), a name listed twice, a non-object ``inputSchema``, over `MAX_TOOLS` tools.
    """
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(_tools_of(data, file)):
        field = f"tools[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InputError("each MCP tool needs a string 'name'", file=file, field=field)
        name = item["name"]
        tool_id = f"{prefix}.{name}" if prefix else name
        if len(name) > 128 or not _NAME.match(tool_id):
            raise InputError(
                f"{name[:80]!r} is not a tool name (A-Z a-z 0-9 _ - ., at most 128)",
                file=file,
                field=f"{field}.name",
            )
        if tool_id in seen:
            raise InputError(f"MCP tool {tool_id!r} listed twice", file=file, field=field)
        seen.add(tool_id)
        schema = mcpcalls.input_schema(item)
        if not isinstance(schema, dict):
            raise InputError("inputSchema must be a JSON object", file=file, field=field)
        description = item.get("description")
        effect, decided_by = effect_of(item.get("annotations"))
        found.append(
            {
                "id": tool_id,
                "effect": effect,
                "decided_by": f"MCP annotations: {decided_by}",
                "description": description if isinstance(description, str) else "",
                "schema": schema,
            }
        )
    return found


def server_files(folder: Path, command: Sequence[str], where: dict[str, Any]) -> list[str]:
    """The parts of an MCP server's command that name a file below ``folder`` (relative).

    A part that is not a relative path to a regular file there (``python3``, ``--flag``) is
    not a file of the server's. A part naming a file through a link leading out of ``folder``
    is an `InputError` (`runner.domain.ids.path_under`).
    """
    found = []
    for part in command:
        if part.startswith("-") or ("/" not in part and "." not in part):
            continue
        candidate = folder / part
        if not os.path.isabs(part) and candidate.is_file():
            path_under(folder, part, kind="MCP server file", **where)
            found.append(Path(part).as_posix())
    return found
