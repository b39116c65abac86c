"""The tool record both sides read: one resolvable tool of a manifest (`RuntimeTool`).

Standard library only, Python 3.9+. The runtime builds one per manifest entry
(`runner.runtime.registry.RuntimeRegistry`); the host's importers build one per tool they write,
so that the ``tools`` of an imported model request are exactly what the runtime offers the model
in reproduce (`RuntimeTool.function_spec`).
"""

from typing import Any, Callable, Dict, Optional

from runner.sdk import function_name
from runner.wire.argrules import RuleSet

__all__ = ["DISPOSITIONS", "RuntimeTool"]

DISPOSITIONS = ("execute", "recorded")


class RuntimeTool:
    """One resolvable tool.

    Attributes:
        id, effect, description, schema, schema_hash: from the manifest.
        disposition: ``execute`` (``func`` runs) or ``recorded`` (served, ``func`` is None).
        func: the guarded tool function (`runner.sdk.tool` wrapper), or None.
        rules: the policy's argument rules that target this tool (call-time decisions).
    """

    __slots__ = (
        "description",
        "disposition",
        "effect",
        "func",
        "id",
        "rules",
        "schema",
        "schema_hash",
    )

    def __init__(
        self,
        entry: Dict[str, Any],
        disposition: str,
        func: Optional[Callable[..., Any]],
        rules: Optional[RuleSet] = None,
    ) -> None:
        self.id: str = entry["id"]
        self.effect: str = str(entry.get("effect") or "unsafe")
        self.description: str = str(entry.get("description") or "")
        schema = entry.get("schema")
        self.schema: Dict[str, Any] = (
            schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
        )
        self.schema_hash: Optional[str] = entry.get("schema_hash")
        self.disposition = disposition
        self.func = func
        self.rules = rules if rules is not None else RuleSet()

    def function_spec(self) -> Dict[str, Any]:
        """The tool in the OpenAI Chat Completions function format.

        Its ``name`` is `runner.sdk.function_name` of the id (dots become ``__``).
        """
        return {
            "type": "function",
            "function": {
                "name": function_name(self.id),
                "description": self.description,
                "parameters": self.schema,
            },
        }
