"""The tools a program offers its model, compared with the tools its workflow declares.

A program step declares its toolset (``tools: [kb.search]``); the agent SDK inside it offers
the model whatever tools the program built (the ``tools`` of each request crossing the
sandbox's model gateway). `offered_tools` reads their names from a request of each API;
`undeclared` keeps those that name no declared tool. The host refuses such a request (it
is not forwarded: the program's SDK gets an HTTP 400 naming the tools), names them in the
run's trace (``end.undeclared_tools``) and its log, and the episode ends ``denied``
(`runner.episode.status`): fail closed (issue 27). An offered tool nobody declared is
``unsafe`` whatever it does: an agent SDK's tools are routed through the runtime's call path
(`runner.sdk.sdktools`), so a declared one is recorded, policy-decided and served like any
``@tool``, and one the step does not declare would run outside every effect class. ``check``
refuses what it can see before (`runner.admission.eligibility.offered_checked`).

A name declares a tool when it is a declared tool's id (``kb.search``), the name that id is
offered under (`runner.sdk.function_name`: ``kb__search``), or the name an agent SDK offers
a declared SDK tool under (the manifest entry's ``name``: ``@function_tool def search_kb``
stacked with ``@tool("kb.search", ...)``).

Request shapes (the APIs' own documentation): Chat Completions ``tools[].function.name``
(``type: function``) and the deprecated ``functions[].name``, Responses ``tools[].name``
(``type: function``), Messages ``tools[].name``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from runner.sdk import function_name

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_OFFERED",
    "offered_tools",
    "sdk_aliases",
    "undeclared",
    "undeclared_offered",
]

MAX_OFFERED = 256
"""Distinct names `offered_tools` and `undeclared` return (every entry is checked)."""

MAX_NAME_CHARS = 128
"""A tool name longer than this is cut (it comes from the sandbox: hostile input)."""


def _names(api: str, request: Mapping[str, Any]) -> Iterator[str]:
    """Every function tool name ``request`` offers, in order (cut, made inert), repeats kept.

    Every entry is read: a check that read the first N would pass an undeclared tool put
    after N declared ones. Chat Completions' deprecated ``functions`` list offers tools too
    (the gateway allow-list passes it).
    """
    tools = request.get("tools")
    entries: list[Any] = list(tools) if isinstance(tools, list) else []
    functions = request.get("functions") if api == "chat_completions" else None
    if isinstance(functions, list):
        entries += [{"type": "function", "function": f} for f in functions]
    for tool in entries:
        if not isinstance(tool, Mapping):
            continue
        name: Any = None
        if api == "chat_completions":
            function = tool.get("function")
            if tool.get("type", "function") == "function" and isinstance(function, Mapping):
                name = function.get("name")
        elif api == "responses":
            name = tool.get("name") if tool.get("type", "function") == "function" else None
        else:
            name = tool.get("name")
        if isinstance(name, str) and name:  # inert: no control character reaches a log line
            yield "".join(c if c.isprintable() else "?" for c in name[:MAX_NAME_CHARS])


def offered_tools(api: str, request: Mapping[str, Any]) -> list[str]:
    """The names of the function tools a gateway request offers its model, in order.

    Args:
        api: ``chat_completions``, ``responses`` or ``messages``.
        request: the program's request body (hostile: any shape).

    Returns:
        The first `MAX_OFFERED` distinct names, each at most `MAX_NAME_CHARS` characters;
        items that are not function tools, or have no string name, are skipped.
    """
    return list(islice(dict.fromkeys(_names(api, request)), MAX_OFFERED))


def undeclared(
    names: Iterable[str], declared: Iterable[str], aliases: Mapping[str, str] | None = None
) -> list[str]:
    """The offered ``names`` that name none of the ``declared`` tool ids.

    A name declares a tool when it is the tool's id (``kb.search``), the name it is offered
    to a model under (`runner.sdk.function_name`: ``kb__search``) or, for an agent SDK's
    tool, the SDK's name of it (``aliases``: tool id -> SDK name). Every name is checked;
    the first `MAX_OFFERED` distinct undeclared ones are returned.
    """
    known: set[str] = set()
    for tool_id in declared:
        known.update((tool_id, function_name(tool_id)))
        if aliases and tool_id in aliases:
            known.add(aliases[tool_id])
    found: dict[str, None] = {}
    for name in names:
        if name not in known and name not in found and len(found) < MAX_OFFERED:
            found[name] = None
    return list(found)


def sdk_aliases(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Tool id -> the name its agent SDK offers it under, from a manifest's entries."""
    tools = manifest.get("tools")
    found: dict[str, str] = {}
    for entry in tools if isinstance(tools, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            found[str(entry.get("id"))] = entry["name"]
    return found


def undeclared_offered(
    api: str,
    request: Mapping[str, Any],
    workflow: Mapping[str, Any],
    step_id: str,
    manifest: Mapping[str, Any] | None = None,
) -> list[str]:
    """The tools a program step's request offers that the step does not declare.

    Args:
        api: the request's API.
        request: the program's request body (hostile).
        workflow: the normalised workflow (its steps' ``tools``).
        step_id: the program step that sent the request.
        manifest: the run's manifest (its SDK tools' names, `sdk_aliases`), or None.
    """
    steps = workflow.get("steps") or []
    declared = [
        str(t)
        for t in next(
            (s.get("tools") or [] for s in steps if isinstance(s, dict) and s.get("id") == step_id),
            [],
        )
    ]
    # an MCP server's tool reaches the model under its own name (the Agents SDK, the `mcp`
    # package's tool list): `notes.search_notes` of an entry with prefix `notes` as `search_notes`
    prefixes = {f"{p}." for p in _mcp_prefixes(workflow)}
    declared += [t.split(".", 1)[1] for t in declared if f"{t.split('.', 1)[0]}." in prefixes]
    aliases = sdk_aliases(manifest) if manifest is not None else None
    return undeclared(_names(api, request), declared, aliases)


def _mcp_prefixes(workflow: Mapping[str, Any]) -> list[str]:
    """The non-empty ``prefix`` of each ``{mcp: {...}}`` entry of a normalised workflow."""
    tools = workflow.get("tools")
    found = []
    for entry in tools if isinstance(tools, list) else []:
        mcp = entry.get("mcp") if isinstance(entry, Mapping) else None
        prefix = mcp.get("prefix") if isinstance(mcp, Mapping) else None
        if isinstance(prefix, str) and prefix:
            found.append(prefix)
    return found
