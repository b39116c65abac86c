"""Argument schemas of tools: derivation from type hints, canonical JSON and the schema hash.

Standard library only, Python 3.9+ (imported inside sandboxes through `runner.sdk`, which
re-exports the public names).

The JSON Schema of a tool's arguments is derived from its type hints: str, int, float, bool,
None, List[...], Dict[str, ...], Optional and Union of these, Literal and TypedDict. Anything else
is a `ToolDefinitionError` at decoration time naming the function and the parameter.

Schema hash: sha256 (hex) over the canonical JSON (sorted keys, no whitespace, UTF-8) of the
argument schema only, never the description.
"""

import hashlib
import types
import typing
from typing import Any, Callable, Dict, List, Tuple

from runner.errors import InputError
from runner.trace.strictjson import canonical_json

__all__ = [
    "ToolDefinitionError",
    "canonical_json",
    "check_tool_id",
    "derive_schema",
    "schema_hash",
]


class ToolDefinitionError(InputError):
    """A tool declaration is invalid (bad id, unsupported parameter type). Exit 2.

    An `InputError`: the user fixes the tool's source file.
    """


def schema_hash(schema: Dict[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON (UTF-8) of an argument schema."""
    encoded = canonical_json(schema).encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()


_PRIMITIVES: Dict[Any, Dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


def _is_typeddict(hint: Any) -> bool:
    return (
        isinstance(hint, type)
        and issubclass(hint, dict)
        and hasattr(hint, "__total__")
        and hasattr(hint, "__annotations__")
    )


_UNION_TYPE = getattr(types, "UnionType", None)  # ``X | Y`` objects, Python 3.10+


def _any_of(schemas: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Build a union schema, flattened, de-duplicated and sorted by canonical JSON.

    ``Union[int, str]`` and ``Union[str, int]`` are the same type, so they must give the same
    schema and hash whatever order the hints were written (or cached by `typing`) in.
    """
    flat: Dict[str, Dict[str, Any]] = {}
    for schema in schemas:
        for member in schema["anyOf"] if list(schema) == ["anyOf"] else [schema]:
            flat[canonical_json(member)] = member
    members = [flat[key] for key in sorted(flat)]
    return members[0] if len(members) == 1 else {"anyOf": members}


def _schema_of(hint: Any, where: str, seen: Tuple[Any, ...] = ()) -> Dict[str, Any]:
    try:
        primitive = _PRIMITIVES.get(hint)
    except TypeError:  # an unhashable "hint", e.g. a list given as an annotation
        primitive = None
    if primitive is not None:
        return dict(primitive)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or (_UNION_TYPE is not None and origin is _UNION_TYPE):
        return _any_of([_schema_of(arg, where, seen) for arg in args])
    if origin is typing.Literal:
        for value in args:
            if not isinstance(value, (str, int, bool, type(None))):
                raise ToolDefinitionError(
                    f"{where}: Literal values must be str, int, bool or None, not {value!r}"
                )
        return {"enum": list(args)}
    if origin is list or hint is list:
        if len(args) != 1:
            raise ToolDefinitionError(f"{where}: list needs its item type, e.g. List[str]")
        return {"type": "array", "items": _schema_of(args[0], where, seen)}
    if origin is dict or hint is dict:
        if len(args) != 2 or args[0] is not str:
            raise ToolDefinitionError(
                f"{where}: dict must be dict[str, T] (JSON object keys are strings)"
            )
        return {"type": "object", "additionalProperties": _schema_of(args[1], where, seen)}
    if _is_typeddict(hint):
        if hint in seen:
            raise ToolDefinitionError(
                f"{where}: TypedDict {hint.__name__} refers to itself; "
                "recursive types are not supported"
            )
        try:
            hints = typing.get_type_hints(hint)
        except Exception as exc:
            raise ToolDefinitionError(
                f"{where}: cannot read the type hints of {hint.__name__}: {exc}"
            ) from exc
        required = sorted(getattr(hint, "__required_keys__", hints.keys()))
        return {
            "type": "object",
            "properties": {
                k: _schema_of(v, f"{where}.{k}", (*seen, hint)) for k, v in hints.items()
            },
            "required": required,
            "additionalProperties": False,
        }
    raise ToolDefinitionError(
        f"{where}: type {hint!r} is not supported; use str, int, float, bool, None, List[...], "
        "Dict[str, ...], Optional/Union, Literal or TypedDict"
    )


def _unreadable_hint(func: Callable[..., Any], name: str) -> str:
    """``tool function NAME parameter 'p'`` for the first annotation that does not evaluate."""
    import inspect  # lazy: kept for start-up speed (the runtime imports the SDK, decorates no tool)

    namespace = dict(getattr(func, "__globals__", {}))
    for param in inspect.signature(func).parameters.values():
        annotation = param.annotation
        for _ in range(2):  # a quoted annotation under `from __future__ import annotations`
            if not isinstance(annotation, str):
                break
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - as get_type_hints does
            except Exception:
                return f"tool function {name} parameter {param.name!r}"
    return name


def derive_schema(func: Callable[..., Any]) -> Dict[str, Any]:
    """JSON Schema of ``func``'s keyword arguments, derived from its type hints.

    Returns:
        ``{"type": "object", "properties": {...}, "required": [...],
        "additionalProperties": false}``; parameters with a default are not required;
        ``required`` is sorted (tools are called with keyword arguments, so the order of the
        parameters is not part of the interface). A parameter whose default is None also
        accepts null, on every Python version (before 3.11 `typing.get_type_hints` adds that
        ``Optional`` itself; doing it always keeps the hash the same across versions).

    Raises:
        ToolDefinitionError: a parameter without a type hint, a ``*args``/``**kwargs`` or
            positional-only parameter, or an unsupported type; the message names the function
            and the parameter.

    """
    name = getattr(func, "__qualname__", repr(func))
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:  # unresolvable forward references and the like
        raise ToolDefinitionError(
            f"{_unreadable_hint(func, name)}: cannot read type hints: {exc}"
        ) from exc
    import inspect  # lazy: kept for start-up speed (the runtime imports the SDK, decorates no tool)

    properties: Dict[str, Any] = {}
    required: List[str] = []
    for param in inspect.signature(func).parameters.values():
        where = f"tool function {name} parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args and **kwargs are not supported")
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{where}: positional-only parameters are not supported (tools are called with "
                "keyword arguments)"
            )
        if param.name not in hints:
            raise ToolDefinitionError(f"{where}: needs a type hint")
        schema = _schema_of(hints[param.name], where)
        if param.default is None:
            schema = _any_of([schema, {"type": "null"}])
        properties[param.name] = schema
        if param.default is param.empty:
            required.append(param.name)
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(required),
        "additionalProperties": False,
    }


def check_tool_id(tool_id: Any) -> None:
    """Refuse a bare ``@tool`` or an id that is not dotted ASCII (at most 128 characters).

    Raises:
        ToolDefinitionError: what is wrong with ``tool_id``.
    """
    if callable(tool_id):
        raise ToolDefinitionError(
            '@tool needs a tool id: write @tool("ticket.get", effect=Effect.READ), '
            "not a bare @tool (on {})".format(getattr(tool_id, "__qualname__", tool_id))
        )
    ok = (
        isinstance(tool_id, str)
        and 0 < len(tool_id) <= 128
        and all(
            part and all(c.isalnum() or c in "_-" for c in part) and part.isascii()
            for part in tool_id.split(".")
        )
    )
    if not ok:
        raise ToolDefinitionError(
            "invalid tool id {!r}: use dotted ASCII names like 'ticket.get'".format(tool_id)
        )
