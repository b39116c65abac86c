"""The user SDK: declare tools with an effect class; inspect them; the replay-context guard.

Standard library only and importable on Python 3.9: this module is imported inside sandboxes,
by the in-sandbox runtime and by the user's tool code.

    from runner.sdk import Effect, tool

    @tool("ticket.get", effect=Effect.READ, description="Fetch a ticket by id.")
    def get_ticket(ticket_id: str) -> dict: ...

Effect classes (SPEC.md vocabulary): ``pure`` (no I/O), ``read`` (observes outside state),
``local`` (changes only the run's scratch state), ``unsafe`` (changes the outside world). A tool
declared without an effect counts as ``unsafe`` (fail closed) and is reported as such.

The JSON Schema of a tool's arguments is derived from its type hints: str, int, float, bool,
None, list[...], dict[str, ...], Optional and Union of these, Literal and TypedDict. Anything else
is a `ToolDefinitionError` at decoration time naming the function and the parameter.

Schema hash: sha256 (hex) over the canonical JSON (sorted keys, no whitespace, UTF-8) of the
argument schema only, never the description (issue 3).
"""

import contextlib
import contextvars
import enum
import functools
import hashlib
import inspect
import json
import sys
import time
import typing
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple

from runner.errors import CapabilityDenied, SandboxReplayError

__all__ = [
    "Effect",
    "ToolDef",
    "ToolDefinitionError",
    "canonical_json",
    "collect_tools",
    "now",
    "replay_context",
    "schema_hash",
    "tool",
    "tool_def",
]

TOOL_ATTR = "__sandbox_replay_tool__"


class Effect(str, enum.Enum):
    """What a tool may do to the world (SPEC.md "effect class")."""

    PURE = "pure"
    READ = "read"
    LOCAL = "local"
    UNSAFE = "unsafe"


class ToolDefinitionError(SandboxReplayError):
    """A tool declaration is invalid (bad id, unsupported parameter type). Exit 2."""

    exit_code = 2


def canonical_json(value: Any) -> str:
    """Serialise ``value`` as canonical JSON: sorted keys, no whitespace, non-ASCII kept.

    Raises:
        TypeError: ``value`` holds something JSON cannot represent.
        ValueError: ``value`` holds NaN or an infinity.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def schema_hash(schema: Dict[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON (UTF-8) of an argument schema."""
    encoded = canonical_json(schema).encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()


class ToolDef:
    """A declared tool: id, effect class, argument schema and where it was defined.

    Attributes:
        id: the `ToolId`, e.g. ``ticket.get``.
        effect: the effect class; `Effect.UNSAFE` when none was declared.
        effect_declared: False when the effect defaulted to unsafe.
        description: free text for models and humans (not hashed).
        schema: JSON Schema (draft 2020-12 subset) of the keyword arguments.
        schema_hash: `schema_hash` of ``schema``.
        func: the undecorated function.
        module, qualname: where to import it from.
        file, line: the definition's source location (for duplicate-id errors).
    """

    __slots__ = ("description", "effect", "effect_declared", "file", "func", "id", "line",
                 "module", "qualname", "schema", "schema_hash")

    def __init__(self, id: str, effect: Effect, effect_declared: bool, description: str,
                 schema: Dict[str, Any], func: Callable[..., Any]) -> None:
        self.id = id
        self.effect = effect
        self.effect_declared = effect_declared
        self.description = description
        self.schema = schema
        self.schema_hash = schema_hash(schema)
        self.func = func
        self.module = func.__module__
        self.qualname = func.__qualname__
        code = getattr(func, "__code__", None)
        self.file = code.co_filename if code else "?"
        self.line = code.co_firstlineno if code else 0

    @property
    def location(self) -> str:
        """``file:line`` of the definition."""
        return "{}:{}".format(self.file, self.line)

    def manifest_entry(self) -> Dict[str, Any]:
        """The tool's manifest record: id, effect, description, schema, schema_hash, module,
        qualname (the registry manifest format of issue 3)."""
        return {
            "id": self.id,
            "effect": self.effect.value,
            "description": self.description,
            "schema": self.schema,
            "schema_hash": self.schema_hash,
            "module": self.module,
            "qualname": self.qualname,
        }

    def __repr__(self) -> str:
        return "ToolDef({!r}, effect={})".format(self.id, self.effect.value)


# --- replay context: the call-time guard ---------------------------------------------------

_ALLOWED: "contextvars.ContextVar[Optional[FrozenSet[str]]]" = contextvars.ContextVar(
    "sandbox_replay_allowed_tools", default=None)


@contextlib.contextmanager
def replay_context(allowed_tool_ids: FrozenSet[str]) -> Iterator[None]:
    """Activate a replay context in which only ``allowed_tool_ids`` may execute.

    While active, calling any other tool's function directly raises `CapabilityDenied` before
    a line of the tool runs. The in-sandbox runtime activates it with the ids its
    capability-filtered registry may execute.
    """
    token = _ALLOWED.set(frozenset(allowed_tool_ids))
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def _guarded(definition: ToolDef) -> Callable[..., Any]:
    func = definition.func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        allowed = _ALLOWED.get()
        if allowed is not None and definition.id not in allowed:
            raise CapabilityDenied(
                "tool {!r} ({}) is denied in this replay context: nothing executed".format(
                    definition.id, definition.effect.value),
                tool_id=definition.id, effect=definition.effect.value)
        return func(*args, **kwargs)

    setattr(wrapper, TOOL_ATTR, definition)
    return wrapper


# --- the injected clock --------------------------------------------------------------------

_clock_source: Optional[Callable[[], float]] = None


def now() -> float:
    """Seconds since the epoch from the run's injected clock (SPEC.md: a stable time source).

    Inside a sandboxed or replayed run this is the recorded or fixed clock; elsewhere it is
    `time.time()`. Tool code should read time through this function.
    """
    source = _clock_source
    return source() if source is not None else time.time()


def set_clock(source: Optional[Callable[[], float]]) -> None:
    """Install (or with None remove) the run's clock. Used by the runtime and record mode."""
    global _clock_source
    _clock_source = source


# --- schema derivation ---------------------------------------------------------------------

_PRIMITIVES: Dict[Any, Dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__") \
        and hasattr(hint, "__annotations__")


def _schema_of(hint: Any, where: str) -> Dict[str, Any]:
    if hint in _PRIMITIVES:
        return dict(_PRIMITIVES[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    union_type = getattr(__import__("types"), "UnionType", None)
    if origin is typing.Union or (union_type is not None and origin is union_type):
        return {"anyOf": [_schema_of(arg, where) for arg in args]}
    if origin is typing.Literal:
        for value in args:
            if not isinstance(value, (str, int, bool, type(None))):
                raise ToolDefinitionError(
                    "{}: Literal values must be str, int, bool or None, not {!r}".format(
                        where, value))
        return {"enum": list(args)}
    if origin in (list, List):
        if len(args) != 1:
            raise ToolDefinitionError("{}: list needs its item type, e.g. list[str]".format(where))
        return {"type": "array", "items": _schema_of(args[0], where)}
    if origin in (dict, Dict):
        if len(args) != 2 or args[0] is not str:
            raise ToolDefinitionError(
                "{}: dict must be dict[str, T] (JSON object keys are strings)".format(where))
        return {"type": "object", "additionalProperties": _schema_of(args[1], where)}
    if _is_typeddict(hint):
        hints = typing.get_type_hints(hint)
        required = sorted(getattr(hint, "__required_keys__", hints.keys()))
        return {
            "type": "object",
            "properties": {k: _schema_of(v, "{}.{}".format(where, k)) for k, v in hints.items()},
            "required": required,
            "additionalProperties": False,
        }
    raise ToolDefinitionError(
        "{}: type {!r} is not supported; use str, int, float, bool, None, list[...], "
        "dict[str, ...], Optional/Union, Literal or TypedDict".format(where, hint))


def derive_schema(func: Callable[..., Any]) -> Dict[str, Any]:
    """JSON Schema of ``func``'s keyword arguments, derived from its type hints.

    Returns:
        ``{"type": "object", "properties": {...}, "required": [...],
        "additionalProperties": false}``; parameters with a default are not required.

    Raises:
        ToolDefinitionError: a parameter without a type hint, a ``*args``/``**kwargs``
            parameter, or an unsupported type; the message names the function and parameter.
    """
    name = getattr(func, "__qualname__", repr(func))
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:  # unresolvable forward references and the like
        raise ToolDefinitionError("{}: cannot read type hints: {}".format(name, exc)) from exc
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for param in inspect.signature(func).parameters.values():
        where = "tool function {} parameter {!r}".format(name, param.name)
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError("{}: *args and **kwargs are not supported".format(where))
        if param.name not in hints:
            raise ToolDefinitionError("{}: needs a type hint".format(where))
        properties[param.name] = _schema_of(hints[param.name], where)
        if param.default is param.empty:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def _check_tool_id(tool_id: Any) -> None:
    ok = isinstance(tool_id, str) and 0 < len(tool_id) <= 128 and all(
        part and all(c.isalnum() or c in "_-" for c in part) and part.isascii()
        for part in tool_id.split("."))
    if not ok:
        raise ToolDefinitionError(
            "invalid tool id {!r}: use dotted ASCII names like 'ticket.get'".format(tool_id))


def tool(tool_id: str, effect: Optional[Effect] = None, description: str = ""
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a function as a tool.

    Args:
        tool_id: dotted id, e.g. ``ticket.get``.
        effect: the effect class; omitted means `Effect.UNSAFE` (fail closed), reported as
            undeclared.
        description: shown to models and in diagnostics; not part of the schema hash.

    Returns:
        A decorator returning a guarded wrapper of the function (see `replay_context`); the
        `ToolDef` is on the wrapper (`tool_def`).

    Raises:
        ToolDefinitionError: invalid id, effect or parameter types.
    """
    _check_tool_id(tool_id)
    if effect is not None and not isinstance(effect, Effect):
        try:
            effect = Effect(effect)
        except ValueError:
            raise ToolDefinitionError("tool {!r}: unknown effect class {!r}".format(
                tool_id, effect)) from None

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        definition = ToolDef(tool_id, effect or Effect.UNSAFE, effect is not None,
                             description or (inspect.getdoc(func) or "").split("\n")[0],
                             derive_schema(func), func)
        return _guarded(definition)

    return decorate


def tool_def(obj: Any) -> Optional[ToolDef]:
    """The `ToolDef` of a decorated tool function, or None for anything else."""
    definition = getattr(obj, TOOL_ATTR, None)
    return definition if isinstance(definition, ToolDef) else None


def collect_tools(module: Any) -> List[ToolDef]:
    """Every tool defined in ``module`` (a module object), in definition order.

    Tools imported into the module from elsewhere are skipped: each tool belongs to the module
    that defines it.
    """
    found: List[Tuple[int, ToolDef]] = []
    for value in vars(module).values():
        definition = tool_def(value)
        if definition is not None and definition.module == module.__name__:
            found.append((definition.line, definition))
    return [d for _, d in sorted(found, key=lambda pair: pair[0])]


if sys.version_info < (3, 9):  # pragma: no cover - documented floor
    raise ImportError("runner.sdk needs Python 3.9 or newer")
