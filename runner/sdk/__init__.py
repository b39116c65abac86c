"""The user SDK: declare tools with an effect class; inspect them; the replay-context guard.

Standard library only and importable on Python 3.9: this package is mounted into sandboxes and
imported by the in-sandbox runtime and by the user's tool code. Its modules: ``toolschema``
(argument schemas, the schema hash; canonical JSON is `runner.trace.strictjson`'s), ``httpio``
(the recording HTTP helper), ``current`` (the active recorder and the run's clock), ``rawio``
(raw I/O capture of a tool's HTTP), ``wallclock`` (the run's clock as every wall-clock read's),
``recorder`` (`record`: record mode in a user's own process), ``exchange`` (one model HTTP call
being recorded) and ``httpxrecord`` (record mode's httpx transports for the official SDKs: the
one module that uses a third-party package, httpx2 or httpx, imported by name only when a
recording asks for it, never in a sandbox). May import: the standard library, `runner.trace`
and `runner.errors`.

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
argument schema only, never the description.

This module is the public surface: schema derivation lives in `runner.sdk.toolschema`, the
recording HTTP helper (`http_request`) in `runner.sdk.httpio`, record mode in `runner.sdk.recorder`.
"""

import contextlib
import contextvars
import enum
import functools
import sys
import threading
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional

from runner.errors import CapabilityDenied
from runner.sdk import current, dispatch, sdktools
from runner.sdk.current import now, set_clock
from runner.sdk.httpio import HttpResponse, http_get, http_request
from runner.sdk.toolschema import (
    ToolDefinitionError,
    canonical_json,
    check_tool_id,
    derive_schema,
    schema_hash,
)

__all__ = [
    "Effect",
    "HttpResponse",
    "ToolDef",
    "ToolDefinitionError",
    "canonical_json",
    "collect_tools",
    "function_name",
    "http_get",
    "http_request",
    "now",
    "record",
    "replay_context",
    "schema_hash",
    "set_clock",
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


FUNCTION_NAME_MAX = 64


def function_name(tool_id: str) -> str:
    """The name a tool is offered to a model under (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).

    Deterministic: every ``.`` of the tool id becomes ``__`` (``kb.search`` -> ``kb__search``);
    an id without dots is its own name, so tools imported from a provider keep their names.
    Workflows reject two tools of one step with the same name, or a name over 64 characters,
    at load time.
    """
    return tool_id.replace(".", "__")


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
        framework: the agent SDK that defined the tool (``openai-agents``, ``anthropic``,
            ``langchain``: `runner.sdk.sdktools`), or None for a ``@tool`` function.
        name: the name the tool is offered to a model under (the SDK's name of an SDK tool;
            `function_name` of the id otherwise).
        guarded: the guarded callable of an SDK tool (what the runtime executes), or None.

    """

    __slots__ = (
        "description",
        "effect",
        "effect_declared",
        "file",
        "framework",
        "func",
        "guarded",
        "id",
        "line",
        "module",
        "name",
        "qualname",
        "schema",
        "schema_hash",
    )

    def __init__(
        self,
        id: str,
        effect: Effect,
        effect_declared: bool,
        description: str,
        schema: Dict[str, Any],
        func: Callable[..., Any],
    ) -> None:
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
        self.framework: Optional[str] = None
        self.name = function_name(id)
        self.guarded: Optional[Callable[..., Any]] = None

    @property
    def location(self) -> str:
        """``file:line`` of the definition."""
        return "{}:{}".format(self.file, self.line)

    def manifest_entry(self) -> Dict[str, Any]:
        """Return the tool's manifest record.

        Returns:
            ``{id, effect, description, schema, schema_hash, module, qualname}`` (the registry
            manifest format; the registry adds ``disposition``), plus ``framework`` and
            ``name`` for a tool an agent SDK defined.

        """
        entry = {
            "id": self.id,
            "effect": self.effect.value,
            "description": self.description,
            "schema": self.schema,
            "schema_hash": self.schema_hash,
            "module": self.module,
            "qualname": self.qualname,
        }
        if self.framework is not None:
            entry.update(framework=self.framework, name=self.name)
        return entry

    def __repr__(self) -> str:
        return "ToolDef({!r}, effect={})".format(self.id, self.effect.value)


# --- replay context: the call-time guard ---------------------------------------------------

_ALLOWED: "contextvars.ContextVar[Optional[FrozenSet[str]]]" = contextvars.ContextVar(
    "sandbox_replay_allowed_tools", default=None
)

# Threads start with an empty context (contextvars are not inherited by `threading.Thread`),
# so a tool that starts a thread would otherwise call denied tools unguarded. The innermost
# active context of the process is the fallback for any context that has none of its own.
_PROCESS_CONTEXTS: List[FrozenSet[str]] = []
_PROCESS_LOCK = threading.Lock()


@contextlib.contextmanager
def replay_context(allowed_tool_ids: "Iterable[str]") -> Iterator[None]:
    """Activate a replay context in which only ``allowed_tool_ids`` may execute.

    While active, calling any other tool's function directly raises `CapabilityDenied` before
    a line of the tool runs. The in-sandbox runtime activates it with the ids its
    capability-filtered registry may *execute* (a tool served from recordings is not among
    them: its code must not run either). The context also covers threads started while it is
    active (they see the innermost context of the process).

    Args:
        allowed_tool_ids: ids whose functions may run.

    """
    allowed = frozenset(allowed_tool_ids)
    token = _ALLOWED.set(allowed)
    with _PROCESS_LOCK:
        _PROCESS_CONTEXTS.append(allowed)
    try:
        yield
    finally:
        with _PROCESS_LOCK:
            _PROCESS_CONTEXTS.remove(allowed)
        _ALLOWED.reset(token)


def _active_allowed() -> Optional[FrozenSet[str]]:
    allowed = _ALLOWED.get()
    if allowed is None and _PROCESS_CONTEXTS:
        with _PROCESS_LOCK:
            allowed = _PROCESS_CONTEXTS[-1] if _PROCESS_CONTEXTS else None
    return allowed


def _guarded(definition: ToolDef) -> Callable[..., Any]:
    func = definition.func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        dispatcher = dispatch.current()
        if dispatcher is not None:  # a program step's direct call (runner.sdk.dispatch)
            return dispatcher(definition, args, kwargs)
        allowed = _active_allowed()
        if allowed is not None and definition.id not in allowed:
            raise CapabilityDenied(
                "tool {!r} ({}) is denied in this replay context: nothing executed".format(
                    definition.id, definition.effect.value
                ),
                tool_id=definition.id,
                effect=definition.effect.value,
            )
        recorder = current.RECORDER.get()
        if recorder is not None:  # `record` mode in the user's own process (runner.sdk.recorder)
            return recorder.call_tool(definition, func, args, kwargs)
        return func(*args, **kwargs)

    import inspect  # lazy: kept for start-up speed (the runtime imports the SDK, decorates no tool)

    # `functools.wraps` leaves the bare function reachable as ``__wrapped__``: an unguarded
    # path around the replay context. Keep the signature for introspection, drop the path.
    setattr(wrapper, "__signature__", inspect.signature(func))  # noqa: B010
    delattr(wrapper, "__wrapped__")
    setattr(wrapper, TOOL_ATTR, definition)
    return wrapper


# --- record mode (runner.sdk.recorder) --------------------------------------------------------

# The active recorder of `record`: `runner.sdk.current.RECORDER` (the recorder reads it there).


def record(path: Any, **options: Any) -> Any:
    """Record the tool and model calls made in this process to the trace file ``path``.

    A context manager (standard library only; see `runner.sdk.recorder.Recorder` for
    ``options``: ``task_id``, ``task_input``, ``workflow``, ``workflow_name``,
    ``workflow_version``, ``seed``)::

        with runner.sdk.record("traces/run.jsonl", task_input={"ticket_id": "T-1"}) as rec:
            ticket = get_ticket(ticket_id="T-1")       # a @tool call: recorded
            client = OpenAI(http_client=rec.http_client())
            reply = client.chat.completions.create(...)  # a model call over httpx: recorded
            reply = rec.model(request, raw_http_body)  # a model call made otherwise: recorded

    Model calls of the official SDKs (openai, anthropic, the OpenAI Agents SDK) are recorded
    with their request body, the raw response body (a stream's raw event stream) and the
    model id read from it, through ``rec.http_client()`` / ``rec.async_http_client()`` and,
    with ``capture_httpx=True`` (the default), through the clients the SDKs make themselves.
    While recording, ``OPENAI_AGENTS_DISABLE_TRACING=1`` is set, and a trace export to a
    tracing-ingest path is answered in the process, never sent.

    Every call line carries the five fields of SPEC.md: the raw body (the SDK HTTP helper's
    body when the tool used `http_request`), the schema hash in force, the model id read from
    the response body, the clock reading, and the end line the failure signature.
    """
    from runner.sdk.recorder import Recorder

    return Recorder(path, **options)


# --- the injected clock: `runner.sdk.current` (`now`, `set_clock`, imported above) ------------


def tool(
    tool_id: str, effect: Optional[Effect] = None, description: str = ""
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
    check_tool_id(tool_id)
    if effect is not None and not isinstance(effect, Effect):
        try:
            effect = Effect(effect)
        except ValueError:
            raise ToolDefinitionError(
                "tool {!r}: unknown effect class {!r}".format(tool_id, effect)
            ) from None

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if sdktools.framework_of(func) is not None:  # @tool over @function_tool (or beta_tool)
            sdktools.adopt(func, tool_id, effect, description)
            return func  # the SDK's object, its invocation routed (runner.sdk.sdktools)
        import inspect  # lazy: kept for start-up speed (the runtime decorates no tool)

        definition = ToolDef(
            tool_id,
            effect or Effect.UNSAFE,
            effect is not None,
            description or (inspect.getdoc(func) or "").split("\n")[0],
            derive_schema(func),
            func,
        )
        wrapper = _guarded(definition)
        dispatch.withhold(definition, wrapper)  # the worker: a tool whose code may not run
        return wrapper

    return decorate


def tool_def(obj: Any) -> Optional[ToolDef]:
    """Return the `ToolDef` of a decorated tool function or an adopted SDK tool, else None."""
    if sdktools.framework_of(obj) is not None:
        found = sdktools.adopted(obj)
        return found if isinstance(found, ToolDef) else None
    definition = getattr(obj, TOOL_ATTR, None)
    return definition if isinstance(definition, ToolDef) else None


def collect_tools(module: Any) -> List[ToolDef]:
    """Every tool defined in ``module`` (a module object), in definition order.

    Tools imported into the module from elsewhere are skipped: each tool belongs to the module
    that defines it. A tool an agent SDK made (``@function_tool``, ``@beta_tool``, a LangChain
    tool: `runner.sdk.sdktools`) bound to a module name is collected too, adopted (its
    invocation routed) when no ``@tool`` declared it: id its SDK name, effect ``unsafe``
    undeclared (fail closed; the policy's ``map:`` may give it a class). A tool bound under
    another name than its function's (``close = tool(...)(_close)``) gets that name as its
    ``qualname``, so that importing ``module`` + ``qualname`` yields the guarded wrapper, never
    the bare function. A tool bound under two names is collected once. A plain function the
    module's source hands to an SDK's tool-making call (``create_react_agent(model,
    tools=[f])``, ``ToolNode([f])``, ``tool(f)``, ...: `runner.sdk.handed`) is collected as
    the tool that SDK makes of it, under the function's name.
    """
    names: Dict[int, List[str]] = {}
    definitions: Dict[int, ToolDef] = {}
    for name, value in list(vars(module).items()):
        if sdktools.framework_of(value) is not None and sdktools.adopted(value) is None:
            sdktools.adopt(value)
        definition = tool_def(value)
        if definition is not None and definition.module == module.__name__:
            definitions[id(definition)] = definition
            names.setdefault(id(definition), []).append(name)
    from runner.sdk import handed  # lazy: it needs ast, which the runtime's start path avoids

    taken = {d.id for d in definitions.values()}
    for definition in handed.collect(module, taken):  # create_react_agent(m, tools=[f]), ...
        definitions[id(definition)] = definition
        names[id(definition)] = [definition.qualname]
    for key, definition in definitions.items():
        if definition.qualname not in names[key]:
            definition.qualname = sorted(names[key])[0]
    return sorted(definitions.values(), key=lambda d: (d.line, d.qualname))


sdktools.connect(
    ToolDef=ToolDef,
    Effect=Effect,
    tool_def=tool_def,
    guarded=_guarded,
    active_allowed=_active_allowed,
)

if sys.version_info < (3, 9):  # pragma: no cover - documented floor
    raise ImportError("runner.sdk needs Python 3.9 or newer")
