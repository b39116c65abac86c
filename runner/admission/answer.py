"""The sandbox's description of the tool modules, checked on the host as untrusted data.

`runner.admission.sandbox_registry` asks a sandbox to import the modules
(`runner.admission.describe_run`); everything of its answer is checked here: types,
ids, qualnames, that each entry belongs to the module asked for; schema hashes are computed
again on the host; sandbox paths (``/sandbox/tools/i/...``) are mapped back to the host files
they copy (`PathMap`), anything else is shown as ``sandbox:...``; text is cut and stripped of
control characters (`clean_text`). An import error the sandbox reports keeps its shape: an
`InputError` naming the workflow file, the entry's line and ``tools[i]``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.domain.ids import path_under
from runner.domain.registry import ToolSpec
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.sdk import Effect, schema_hash
from runner.sdk.sdktools import FRAMEWORKS
from runner.tools.source import mcp_tool_specs

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile
    from runner.tools.locate import ToolLocations

__all__ = ["MAX_TEXT", "MAX_TOOLS", "PathMap", "clean_text", "mcp_tools", "module_tools"]

log = get_logger(__name__)

MAX_TOOLS = 10000
MAX_TEXT = 2000
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _where(workflow: WorkflowFile, index: int) -> dict[str, Any]:
    return {
        "file": str(workflow.path),
        "line": workflow.line_of(("tools", index)),
        "field": f"tools[{index}]",
    }


class PathMap:
    """Sandbox paths (``/sandbox/tools/i/...``) back to host paths; anything else is marked.

    An unsandboxed backend reports the paths of the snapshot's copies on the host instead
    (``<state>/snapshots/<digest>/k/...``): they map back to the source folder too.
    """

    def __init__(self, tool_paths: list[str], roots: list[Path], copies: list[Path]) -> None:
        self.pairs = [
            (prefix, root)
            for inside, root, copy in zip(tool_paths, roots, copies, strict=True)
            for prefix in (inside, str(copy))
        ]

    def file(self, value: Any) -> str:
        """The host file a sandbox path names, or ``sandbox:<path>`` for anything else."""
        if not isinstance(value, str) or not value:
            return "<unknown file>"
        path = os.path.normpath(value)
        for inside, root in self.pairs:
            relative = None
            if path == inside or path.startswith(inside + "/"):
                relative = os.path.relpath(path, inside)
            elif path.startswith(str(root) + os.sep):  # an unsandboxed backend: host paths
                relative = os.path.relpath(path, root)
            if relative is not None:
                try:  # the sandbox's text: a host path only through the id rules
                    return str(path_under(root, relative, kind="tool file"))
                except InputError:
                    return f"sandbox:{clean_text(path)}"
        return f"sandbox:{clean_text(path)}"  # a file of the image, not of this host

    def text(self, value: Any) -> str:
        """``value`` printed inert, sandbox tool paths replaced by their host folders."""
        shown = clean_text(value)
        for inside, root in self.pairs:
            shown = shown.replace(inside + "/", str(root) + os.sep)
        return shown


def clean_text(value: Any) -> str:
    """``value`` as text safe to print: control characters as ``?``, at most `MAX_TEXT` long."""
    shown = _CONTROL.sub("?", value if isinstance(value, str) else repr(value))
    return shown if len(shown) <= MAX_TEXT else shown[:MAX_TEXT] + "..."


def _error_message(error: Any, name: str, paths: PathMap, search: list[Path], image: str) -> str:
    if not isinstance(error, dict):
        return f"cannot import tool module {name!r} inside the sandbox (no reason given)"
    kind, message = error.get("kind"), paths.text(error.get("message", ""))
    if kind == "not_found":
        looked = ", ".join(str(p) for p in search)
        return (
            f"cannot import tool module {name!r}: no such module in the sandbox (looked in "
            f"{looked})"
        )
    if kind == "missing_dependency":
        return (
            f"cannot import tool module {name!r}: it imports {clean_text(error.get('missing'))!r}, "
            f"which is not installed in the sandbox image {image}"
        )
    if kind == "definition":
        return f"tool module {name!r}: {message}"
    if kind == "syntax":
        line = error.get("line")
        where = paths.file(error.get("file")) + (f":{line}" if isinstance(line, int) else "")
        return f"cannot import tool module {name!r}: syntax error in {where}: {message}"
    return f"cannot import tool module {name!r}: {message}"


def module_tools(
    workflow: WorkflowFile,
    located: ToolLocations,
    answer: dict[str, Any],
    paths: PathMap,
    image: str,
) -> dict[int, list[ToolSpec]]:
    """Check the sandbox's answer and turn it into tools by entry index.

    Raises:
        InputError: an import error it reports, or an answer that is not what was asked.
    """
    modules = answer.get("modules")
    if not isinstance(modules, list) or len(modules) > len(located.modules):
        raise _bad_answer(workflow, "'modules' is not the list asked for")
    error = answer.get("error")
    if error is not None:
        position = error.get("index") if isinstance(error, dict) else None
        if not isinstance(position, int) or not 0 <= position < len(located.modules):
            position = len(modules) if len(modules) < len(located.modules) else 0
        index, name, _ = located.modules[position]
        raise InputError(
            _error_message(error, name, paths, located.search, image), **_where(workflow, index)
        )
    if len(modules) != len(located.modules):
        raise _bad_answer(workflow, "modules are missing from the answer")
    result: dict[int, list[ToolSpec]] = {}
    count = 0
    for (index, name, _), item in zip(located.modules, modules, strict=True):
        entries = item.get("tools") if isinstance(item, dict) else None
        if (
            not isinstance(item, dict)
            or item.get("module") != name
            or not isinstance(entries, list)
        ):
            raise _bad_answer(workflow, f"no tool list for module {name!r}")
        count += len(entries)
        if count > MAX_TOOLS:
            raise _bad_answer(workflow, f"more than {MAX_TOOLS} tools")
        if not entries:
            log.warning("tool_module_without_tools", module=name, file=paths.file(item.get("file")))
        where = _where(workflow, index)
        result[index] = [_tool(entry, name, paths, where) for entry in entries]
    return result


def mcp_tools(
    workflow: WorkflowFile, located: ToolLocations, answer: dict[str, Any]
) -> dict[int, list[ToolSpec]]:
    """The tools of each MCP stdio server the sandbox asked, by entry index.

    The answer's ``mcp`` list (`runner.runtime.mcplist`) is untrusted: each server's tools go
    through `runner.tools.source.mcp_tool_specs` (names, schemas, annotations checked).

    Raises:
        InputError: a server that could not be asked (its error, made inert, at its entry) or
            an answer that is not what was asked.
    """
    if not located.mcp_servers:
        return {}
    answers = answer.get("mcp")
    if not isinstance(answers, list) or len(answers) != len(located.mcp_servers):
        raise _bad_answer(workflow, "'mcp' is not the list of servers asked for")
    result: dict[int, list[ToolSpec]] = {}
    for (index, source, _), item in zip(located.mcp_servers, answers, strict=True):
        where = _where(workflow, index)
        if not isinstance(item, dict) or "tools" not in item:
            problem = item.get("error") if isinstance(item, dict) else None
            raise InputError(
                f"{clean_text(source.label())}: could not list its tools in the sandbox:"
                f" {clean_text(problem)}",
                **where,
            )
        result[index] = mcp_tool_specs(
            {"tools": item["tools"]}, file=clean_text(source.label()), source=source
        )
    return result


def _bad_answer(workflow: WorkflowFile, problem: str) -> InputError:
    return InputError(
        f"the sandbox's description of the tool modules is unusable: {problem}",
        file=str(workflow.path),
        field="tools",
    )


def _tool(entry: Any, module: str, paths: PathMap, where: dict[str, Any]) -> ToolSpec:
    """One tool entry of the answer, each field checked (nothing in it is trusted)."""
    if not isinstance(entry, dict):
        raise InputError(f"tool module {module!r}: a tool entry is not an object", **where)
    tool_id = entry.get("id")
    if not isinstance(tool_id, str) or not _TOOL_ID.match(tool_id):
        raise InputError(
            f"tool module {module!r}: {clean_text(tool_id)!r} is not a tool id", **where
        )
    qualname = entry.get("qualname")
    if not isinstance(qualname, str) or not _MODULE.match(qualname):
        raise InputError(f"tool {tool_id!r}: bad qualname {clean_text(qualname)!r}", **where)
    if entry.get("module") != module:
        raise InputError(f"tool {tool_id!r}: not defined by module {module!r}", **where)
    schema = entry.get("schema")
    if not isinstance(schema, dict):
        raise InputError(f"tool {tool_id!r}: its schema is not a JSON object", **where)
    declared = entry.get("declared_effect")
    declared = declared if isinstance(declared, str) else None
    try:
        effect = Effect(declared) if declared is not None else Effect.UNSAFE
    except ValueError:
        effect = Effect.UNSAFE  # fail closed
    line, description = entry.get("line"), entry.get("description")
    framework, name = entry.get("framework"), entry.get("name")
    if framework is not None and framework not in FRAMEWORKS:
        raise InputError(f"tool {tool_id!r}: unknown framework {clean_text(framework)!r}", **where)
    if framework is not None and (not isinstance(name, str) or not _TOOL_ID.match(name)):
        raise InputError(f"tool {tool_id!r}: bad SDK name {clean_text(name)!r}", **where)
    return ToolSpec(
        id=tool_id,
        effect=effect,
        declared_effect=declared,
        description=description if isinstance(description, str) else "",  # as the model sees it
        schema=schema,
        schema_hash=schema_hash(schema),  # computed here, not taken from the sandbox
        module=module,
        qualname=qualname,
        file=paths.file(entry.get("file")),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        origin=module,
        framework=framework,
        sdk_name=name if framework is not None else None,
    )
