"""Runtime mode ``manifest``: import the tool modules here, in the sandbox, and describe them.

Standard library only, Python 3.9+. The host must not import tool code it got from a reviewer
packet or a trace (`runner.admission`): it asks a sandbox instead. ``run.json``
has ``mode: "manifest"``, ``tool_paths`` (put first on ``sys.path``) and ``modules`` (in the
order of the workflow's ``tools`` entries; a name may repeat). After ``start`` the runtime
imports each module (inside ``runner.sdk.replay_context`` with no tool allowed: importing runs
no tool), collects its tools with `runner.sdk.collect_tools` and answers with one message:

    manifest  {"modules": [{"module", "file", "tools": [entry, ...]}, ...]}
              or {"modules": [...the ones before...], "error": {"module", "index", "kind",
              "message", "missing"?, "file"?, "line"?}}
              plus "mcp": [{"tools": [...]} or {"error": "..."}, ...] when ``run.json`` has
              ``mcp_servers`` ([{"command", "cwd"}]): their tools/list (`runner.runtime.mcplist`)

An entry is ``{id, effect, declared_effect, description, schema, schema_hash, module,
qualname, file, line}`` (``declared_effect`` is None when the effect defaulted to unsafe), plus
``framework`` and ``name`` for a tool an agent SDK defined (`runner.sdk.sdktools`).
``error.kind`` is one of `ERROR_KINDS`; the first module that fails ends the list (as the host
import did). The host treats every byte of the answer as untrusted data.
"""

import importlib
import sys
from typing import Any, Dict, List, Sequence

from runner import sdk
from runner.errors import InputError
from runner.runtime import mcplist

ERROR_KINDS = ("not_found", "missing_dependency", "definition", "syntax", "exception")


def _error(name: str, index: int, exc: BaseException) -> Dict[str, Any]:
    error: Dict[str, Any] = {"module": name, "index": index}
    if isinstance(exc, ModuleNotFoundError):
        missing = exc.name or ""
        own = bool(missing) and (name == missing or name.startswith(missing + "."))
        error.update(kind="not_found" if own else "missing_dependency", missing=missing)
        error["message"] = str(exc)
    elif isinstance(exc, InputError):  # runner.sdk.ToolDefinitionError and friends
        error.update(kind="definition", message=str(exc))
    elif isinstance(exc, SyntaxError):
        error.update(kind="syntax", message=str(exc.msg), file=exc.filename, line=exc.lineno)
    else:
        error.update(kind="exception", message="{}: {}".format(type(exc).__name__, exc))
    return error


def _entry(definition: sdk.ToolDef) -> Dict[str, Any]:
    return {
        "id": definition.id,
        "effect": definition.effect.value,
        "declared_effect": definition.effect.value if definition.effect_declared else None,
        "description": definition.description,
        "schema": definition.schema,
        "schema_hash": definition.schema_hash,
        "module": definition.module,
        "qualname": definition.qualname,
        "file": definition.file,
        "line": definition.line,
        **(
            {"framework": definition.framework, "name": definition.name}
            if definition.framework
            else {}
        ),
    }


def tool_manifest(tool_paths: Sequence[str], modules: Sequence[str]) -> Dict[str, Any]:
    """Import ``modules`` with ``tool_paths`` first on ``sys.path``; describe their tools.

    Args:
        tool_paths: folders (read-only mounts of the host folders the modules live in).
        modules: dotted module names, in workflow order.

    Returns:
        The ``manifest`` message's fields (see the module docstring); never raises for a
        module that fails to import: that is the ``error`` field.
    """
    for path in reversed([str(p) for p in tool_paths]):
        if path not in sys.path:
            sys.path.insert(0, path)
    importlib.invalidate_caches()
    found: List[Dict[str, Any]] = []
    for index, name in enumerate(modules):
        try:
            with sdk.replay_context(frozenset()):  # importing runs no tool
                module = importlib.import_module(str(name))
                tools = [_entry(d) for d in sdk.collect_tools(module)]
        except BaseException as exc:  # SystemExit at import is the module's failure too
            if isinstance(exc, KeyboardInterrupt):
                raise
            return {"modules": found, "error": _error(str(name), index, exc)}
        found.append({"module": name, "file": getattr(module, "__file__", None), "tools": tools})
    return {"modules": found}


def answer(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The ``manifest`` message's fields for a ``run.json`` in mode ``manifest``.

    Raises:
        InputError: ``tool_paths`` or ``modules`` is not a list of strings.
    """
    paths, modules = spec.get("tool_paths") or [], spec.get("modules") or []
    for key, value in (("tool_paths", paths), ("modules", modules)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError("expected a list of strings", file="run.json", field=key)
    found = tool_manifest(paths, modules)
    if spec.get("mcp_servers"):
        found["mcp"] = mcplist.answer(spec["mcp_servers"])
    return found
