"""The runtime's registry, built only from the capability-filtered manifest.

Standard library only, Python 3.9+. Invariants:
- a tool absent from the manifest does not exist here: `RuntimeRegistry.resolve` raises
  `ToolNotResolvable` (denied tools are absent, not flagged);
- only ``execute`` tools have code: their module is imported from the run's ``tool_paths`` and
  the function found there must carry the manifest's id and schema hash, else the run cannot
  start (`InputError` naming the tool and both hashes);
- ``recorded`` tools never import or run code: they are served from recordings;
- in ``reproduce`` mode only ``pure`` tools execute, whatever the manifest says (SPEC.md "What
  runs during reproduce"): any other ``execute`` entry is served from the trace instead;
- every tool carries the policy's argument rules that target it (``policy.rules`` of the
  manifest, `runner.wire.argrules`): the caller's guard decides each call with them.
"""

import importlib
import sys
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional

from runner.errors import InputError, ToolNotResolvable
from runner.sdk import collect_tools, sdktools, tool_def
from runner.wire.argrules import RuleSet
from runner.wire.toolrecord import DISPOSITIONS, RuntimeTool

__all__ = ["DISPOSITIONS", "IN_WORKER", "RuntimeRegistry", "RuntimeTool"]  # the tool is wire's


def IN_WORKER(**_: Any) -> Any:
    """The ``func`` of a tool whose code is in the worker: never called in the runtime."""
    raise RuntimeError("this tool's code runs in the worker process, not in the runtime")


class RuntimeRegistry:
    """Tools resolvable in this sandbox, by id."""

    def __init__(
        self, tools: Iterable[RuntimeTool], policy: Optional[Dict[str, Any]] = None
    ) -> None:
        self._tools: Dict[str, RuntimeTool] = {t.id: t for t in tools}
        self.policy = policy or {}

    def resolve(self, tool_id: str) -> RuntimeTool:
        """The tool ``tool_id``.

        Raises:
            ToolNotResolvable: the id is not in the manifest (unknown, or denied by the policy).
        """
        found = self._tools.get(tool_id)
        if found is None:
            raise ToolNotResolvable(
                "tool {!r} is not resolvable in this sandbox: it is absent from the "
                "capability-filtered registry of policy {!r} (denied or unknown)".format(
                    tool_id, self.policy.get("name", "?")
                ),
                tool_id=tool_id,
            )
        return found

    @property
    def execute_ids(self) -> FrozenSet[str]:
        """Ids whose code may run (the replay context's allowed set)."""
        return frozenset(t.id for t in self._tools.values() if t.disposition == "execute")

    @property
    def ids(self) -> List[str]:
        """Every resolvable id, sorted."""
        return sorted(self._tools)

    @classmethod
    def from_manifest(
        cls,
        manifest: Any,
        mode: str,
        tool_paths: Iterable[str] = (),
        modules: Iterable[str] = (),
        source: str = "manifest.json",
        code: Optional[FrozenSet[str]] = None,
    ) -> "RuntimeRegistry":
        """Build the registry; import the code of ``execute`` tools (or take the worker's word).

        Args:
            manifest: the parsed ``manifest.json``.
            mode: ``shadow`` or ``reproduce``.
            tool_paths: folders put first on ``sys.path`` (read-only mounts of tool code).
            modules: module names imported before the tools are looked up.
            source: file name used in error messages.
            code: the runtime's side: the ids the worker loaded code for
                (`runner.runtime.worker.client.Worker.load`); nothing is imported here and
                those tools' ``func`` is `IN_WORKER`. None: import here (the worker's side).

        Raises:
            InputError: a malformed manifest (argument rules included), a module that does
                not import, or code whose tool id or schema hash differs from the manifest.
        """
        if not isinstance(manifest, dict) or not isinstance(manifest.get("tools"), list):
            raise InputError("expected an object with a list 'tools'", file=source, field="tools")
        policy = manifest.get("policy")
        policy = policy if isinstance(policy, dict) else None
        rules = RuleSet.from_json((policy or {}).get("rules"), source, "policy.rules")
        if code is None:
            for path in reversed(list(tool_paths)):
                if path not in sys.path:
                    sys.path.insert(0, path)
            for name in modules:
                _import(name, source)
        tools = []
        for i, entry in enumerate(manifest["tools"]):
            field = "tools[{}]".format(i)
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise InputError("each tool needs a string 'id'", file=source, field=field)
            disposition = entry.get("disposition")
            if disposition not in DISPOSITIONS:
                raise InputError(
                    "disposition must be one of {}, not {!r}".format(DISPOSITIONS, disposition),
                    file=source,
                    field=field + ".disposition",
                )
            if mode == "reproduce" and entry.get("effect") != "pure":
                disposition = "recorded"
            func: Optional[Callable[..., Any]] = None
            if code is not None:
                func = IN_WORKER if entry["id"] in code else None
                if func is None and disposition == "execute":
                    raise InputError(
                        "tool {!r} is 'execute' but the worker has no code for it".format(
                            entry["id"]
                        ),
                        file=source,
                        field=field,
                    )
            elif disposition == "execute":
                func = _load_function(entry, source, field)
            elif mode == "reproduce" and entry.get("effect") == "read":
                # a read tool's code may run again over its recorded raw HTTP bodies
                # (runner.sdk.rawio); without importable code it is served as a value
                func = _try_load_function(entry, source, field)
            tools.append(RuntimeTool(entry, disposition, func, rules.for_tool(entry["id"])))
        return cls(tools, policy)


def _import(name: str, source: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:
        raise InputError(
            "cannot import tool module {!r} inside the sandbox: {}: {}".format(
                name, type(exc).__name__, exc
            ),
            file=source,
            field="modules",
        ) from exc


def _try_load_function(
    entry: Dict[str, Any], source: str, field: str
) -> Optional[Callable[..., Any]]:
    if not isinstance(entry.get("module"), str) or not isinstance(entry.get("qualname"), str):
        return None
    try:
        return _load_function(entry, source, field)
    except InputError:
        return None


def _load_function(entry: Dict[str, Any], source: str, field: str) -> Callable[..., Any]:
    module_name, qualname = entry.get("module"), entry.get("qualname")
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        raise InputError(
            "tool {!r} is 'execute' but has no module/qualname".format(entry["id"]),
            file=source,
            field=field,
        )
    module = _import(module_name, source)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if sdktools.framework_of(obj) is not None and sdktools.adopted(obj) is None:
        sdktools.adopt(obj)  # an SDK's tool no @tool declared: routed like one
    definition = tool_def(obj)
    if definition is None and obj is not None:  # a plain function handed to an SDK: made
        from runner.sdk import handed  # when its module's tools are collected (lazy: ast)

        collect_tools(module)
        definition = handed.definition_of(obj)
    if definition is None:
        raise InputError(
            "{}.{} is not a @tool function".format(module_name, qualname),
            file=source,
            field=field + ".qualname",
        )
    if definition.id != entry["id"] or definition.schema_hash != entry.get("schema_hash"):
        raise InputError(
            "tool {!r}: the code in the sandbox ({}.{}) declares id {!r} with schema hash {} "
            "but the manifest says {}".format(
                entry["id"],
                module_name,
                qualname,
                definition.id,
                definition.schema_hash,
                entry.get("schema_hash"),
            ),
            file=source,
            field=field + ".schema_hash",
        )
    if definition.guarded is not None:  # an SDK's tool: its guarded runner is the function
        return definition.guarded
    if not callable(obj):  # pragma: no cover - tool_def only marks callables
        raise InputError("{} is not callable".format(qualname), file=source, field=field)
    return obj  # type: ignore[no-any-return]
