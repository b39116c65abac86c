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
import threading
import time
import types
import typing
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Tuple

from runner.errors import CapabilityDenied, InputError

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


class ToolDefinitionError(InputError):
    """A tool declaration is invalid (bad id, unsupported parameter type). Exit 2.

    An `InputError`: the user fixes the tool's source file.
    """


def canonical_json(value: Any) -> str:
    """Serialise ``value`` as canonical JSON: sorted keys, no whitespace, non-ASCII kept.

    Raises:
        TypeError: ``value`` holds something JSON cannot represent.
        ValueError: ``value`` holds NaN or an infinity.

    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


FUNCTION_NAME_MAX = 64


def function_name(tool_id: str) -> str:
    """The name a tool is offered to a model under (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).

    Deterministic: every ``.`` of the tool id becomes ``__`` (``kb.search`` -> ``kb__search``);
    an id without dots is its own name, so tools imported from a provider keep their names.
    Workflows reject two tools of one step with the same name, or a name over 64 characters,
    at load time.
    """
    return tool_id.replace(".", "__")


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

    __slots__ = (
        "description",
        "effect",
        "effect_declared",
        "file",
        "func",
        "id",
        "line",
        "module",
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

    @property
    def location(self) -> str:
        """``file:line`` of the definition."""
        return "{}:{}".format(self.file, self.line)

    def manifest_entry(self) -> Dict[str, Any]:
        """Return the tool's manifest record.

        Returns:
            ``{id, effect, description, schema, schema_hash, module, qualname}`` (the registry
            manifest format of issue 3; the registry adds ``disposition``).

        """
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
        allowed = _active_allowed()
        if allowed is not None and definition.id not in allowed:
            raise CapabilityDenied(
                "tool {!r} ({}) is denied in this replay context: nothing executed".format(
                    definition.id, definition.effect.value
                ),
                tool_id=definition.id,
                effect=definition.effect.value,
            )
        recorder = _RECORDER.get()
        if recorder is not None:  # `record` mode in the user's own process (runner.recording)
            return recorder.call_tool(definition, func, args, kwargs)
        return func(*args, **kwargs)

    # `functools.wraps` leaves the bare function reachable as ``__wrapped__``: an unguarded
    # path around the replay context. Keep the signature for introspection, drop the path.
    setattr(wrapper, "__signature__", inspect.signature(func))  # noqa: B010
    delattr(wrapper, "__wrapped__")
    setattr(wrapper, TOOL_ATTR, definition)
    return wrapper


# --- record mode (runner.recording) --------------------------------------------------------

# The active recorder of `record` (None: calls are not recorded by the SDK). The in-sandbox
# runtime records calls itself and never sets it.
_RECORDER: "contextvars.ContextVar[Optional[Any]]" = contextvars.ContextVar(
    "sandbox_replay_recorder", default=None
)


def record(path: Any, **options: Any) -> Any:
    """Record the tool and model calls made in this process to the trace file ``path``.

    A context manager (standard library only; see `runner.recording.Recorder` for
    ``options``: ``task_id``, ``task_input``, ``workflow``, ``workflow_name``,
    ``workflow_version``, ``seed``)::

        with runner.sdk.record("traces/run.jsonl", task_input={"ticket_id": "T-1"}) as rec:
            ticket = get_ticket(ticket_id="T-1")       # a @tool call: recorded
            reply = rec.model(request, raw_http_body)  # a model call: recorded

    Every call line carries the five fields of SPEC.md: the raw body (the SDK HTTP helper's
    body when the tool used `http_request`), the schema hash in force, the model id read from
    the response body, the clock reading, and the end line the failure signature.
    """
    from runner.recording import Recorder

    return Recorder(path, **options)


# --- the recording HTTP helper ---------------------------------------------------------------

# ``_HTTP_SINK``: a list that receives one exchange dict per request (set while a call is
# recorded); ``_HTTP_SOURCE``: a callable serving requests from a recording (reproduce) instead
# of doing I/O. Both are set by the runtime (runner.runtime.rawio) and by runner.recording.
_HTTP_SINK: "contextvars.ContextVar[Optional[List[Dict[str, Any]]]]" = contextvars.ContextVar(
    "sandbox_replay_http_sink", default=None
)
_HTTP_SOURCE: "contextvars.ContextVar[Optional[Callable[..., Dict[str, Any]]]]" = (
    contextvars.ContextVar("sandbox_replay_http_source", default=None)
)


class HttpResponse:
    """The response of `http_request`: status, headers and the raw (decoded) body bytes.

    Attributes:
        status: HTTP status code (an error status is a response, not an exception).
        headers: response headers, lower-case names.
        body: the body bytes, gzip/deflate content encoding already removed.
        url: the requested URL.
        content_encoding: the original ``Content-Encoding`` (``gzip``), or None.
    """

    __slots__ = ("body", "content_encoding", "headers", "status", "url")

    def __init__(
        self,
        status: int,
        headers: Dict[str, str],
        body: bytes,
        url: str,
        content_encoding: Optional[str] = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
        self.content_encoding = content_encoding

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded as text (undecodable bytes replaced)."""
        return self.body.decode(encoding, "replace")

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ValueError: the body is not JSON.
        """
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self) -> str:
        return "HttpResponse({} {}, {} bytes)".format(self.status, self.url, len(self.body))


def _decode_content(body: bytes, encoding: Optional[str]) -> bytes:
    import gzip
    import zlib

    name = (encoding or "").strip().lower()
    if not body or name in ("", "identity"):
        return body
    if name in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if name == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body  # an encoding this helper does not know: kept as received


def http_request(
    method: str,
    url: str,
    headers: Optional[Dict[str, str]] = None,
    data: Optional[bytes] = None,
    timeout_s: float = 30.0,
) -> HttpResponse:
    """Make one HTTP request whose raw body is recorded (and served again on replay).

    Tools that do their I/O through this helper get their raw HTTP body into the trace
    (``raw_io: true``): on reproduce the helper serves the recorded body instead of doing any
    I/O, so the tool's own parsing runs again. A gzip or deflate body is stored decoded, with
    the original encoding noted; an empty body records and replays as empty.

    Args:
        method: ``GET``, ``POST``, ...
        url: an ``http`` or ``https`` URL.
        headers: request headers.
        data: request body bytes.
        timeout_s: socket timeout in seconds.

    Returns:
        The response; HTTP error statuses are returned, not raised.

    Raises:
        OSError: the connection failed (``urllib.error.URLError`` and the like).
        ValueError: a URL that is not http(s).
        runner.errors.ReplayDivergence: in reproduce, a request the recording does not hold.
    """
    import urllib.error
    import urllib.request

    if not url.lower().startswith(("http://", "https://")):
        raise ValueError("http_request needs an http(s) URL, not {!r}".format(url))
    method = method.upper()
    source = _HTTP_SOURCE.get()
    if source is not None:
        served = source(method, url)
        response = HttpResponse(
            int(served.get("status", 200)),
            dict(served.get("headers", {})),
            served.get("body", b""),
            url,
            served.get("content_encoding"),
        )
    else:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            url, data=data, headers=dict(headers or {}), method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as handle:  # noqa: S310
                status, raw_headers, raw = handle.status, handle.headers, handle.read()
        except urllib.error.HTTPError as exc:
            status, raw_headers, raw = exc.code, exc.headers, exc.read()
        encoding = raw_headers.get("Content-Encoding") if raw_headers is not None else None
        names = {k.lower(): v for k, v in (raw_headers.items() if raw_headers else [])}
        response = HttpResponse(
            status,
            names,
            _decode_content(raw, encoding),
            url,
            encoding.strip().lower() if encoding else None,
        )
    sink = _HTTP_SINK.get()
    if sink is not None:
        sink.append(
            {
                "method": method,
                "url": url,
                "status": response.status,
                "content_type": response.headers.get("content-type"),
                "content_encoding": response.content_encoding,
                "body": response.body,
            }
        )
    return response


def http_get(
    url: str, headers: Optional[Dict[str, str]] = None, timeout_s: float = 30.0
) -> HttpResponse:
    """``http_request("GET", url, ...)``; see `http_request`."""
    return http_request("GET", url, headers=headers, timeout_s=timeout_s)


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
                    "{}: Literal values must be str, int, bool or None, not {!r}".format(
                        where, value
                    )
                )
        return {"enum": list(args)}
    if origin is list or hint is list:
        if len(args) != 1:
            raise ToolDefinitionError("{}: list needs its item type, e.g. list[str]".format(where))
        return {"type": "array", "items": _schema_of(args[0], where, seen)}
    if origin is dict or hint is dict:
        if len(args) != 2 or args[0] is not str:
            raise ToolDefinitionError(
                "{}: dict must be dict[str, T] (JSON object keys are strings)".format(where)
            )
        return {"type": "object", "additionalProperties": _schema_of(args[1], where, seen)}
    if _is_typeddict(hint):
        if hint in seen:
            raise ToolDefinitionError(
                "{}: TypedDict {} refers to itself; recursive types are not supported".format(
                    where, hint.__name__
                )
            )
        try:
            hints = typing.get_type_hints(hint)
        except Exception as exc:
            raise ToolDefinitionError(
                "{}: cannot read the type hints of {}: {}".format(where, hint.__name__, exc)
            ) from exc
        required = sorted(getattr(hint, "__required_keys__", hints.keys()))
        return {
            "type": "object",
            "properties": {
                k: _schema_of(v, "{}.{}".format(where, k), (*seen, hint)) for k, v in hints.items()
            },
            "required": required,
            "additionalProperties": False,
        }
    raise ToolDefinitionError(
        "{}: type {!r} is not supported; use str, int, float, bool, None, list[...], "
        "dict[str, ...], Optional/Union, Literal or TypedDict".format(where, hint)
    )


def _unreadable_hint(func: Callable[..., Any], name: str) -> str:
    """``tool function NAME parameter 'p'`` for the first annotation that does not evaluate."""
    namespace = dict(getattr(func, "__globals__", {}))
    for param in inspect.signature(func).parameters.values():
        annotation = param.annotation
        for _ in range(2):  # a quoted annotation under `from __future__ import annotations`
            if not isinstance(annotation, str):
                break
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - as get_type_hints does
            except Exception:
                return "tool function {} parameter {!r}".format(name, param.name)
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
            "{}: cannot read type hints: {}".format(_unreadable_hint(func, name), exc)
        ) from exc
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for param in inspect.signature(func).parameters.values():
        where = "tool function {} parameter {!r}".format(name, param.name)
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError("{}: *args and **kwargs are not supported".format(where))
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                "{}: positional-only parameters are not supported (tools are called with "
                "keyword arguments)".format(where)
            )
        if param.name not in hints:
            raise ToolDefinitionError("{}: needs a type hint".format(where))
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


def _check_tool_id(tool_id: Any) -> None:
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
    _check_tool_id(tool_id)
    if effect is not None and not isinstance(effect, Effect):
        try:
            effect = Effect(effect)
        except ValueError:
            raise ToolDefinitionError(
                "tool {!r}: unknown effect class {!r}".format(tool_id, effect)
            ) from None

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        definition = ToolDef(
            tool_id,
            effect or Effect.UNSAFE,
            effect is not None,
            description or (inspect.getdoc(func) or "").split("\n")[0],
            derive_schema(func),
            func,
        )
        return _guarded(definition)

    return decorate


def tool_def(obj: Any) -> Optional[ToolDef]:
    """Return the `ToolDef` of a decorated tool function, or None for anything else."""
    definition = getattr(obj, TOOL_ATTR, None)
    return definition if isinstance(definition, ToolDef) else None


def collect_tools(module: Any) -> List[ToolDef]:
    """Every tool defined in ``module`` (a module object), in definition order.

    Tools imported into the module from elsewhere are skipped: each tool belongs to the module
    that defines it. A tool bound under another name than its function's (``close =
    tool(...)(_close)``) gets that name as its ``qualname``, so that importing ``module`` +
    ``qualname`` yields the guarded wrapper, never the bare function. A tool bound under two
    names is collected once.
    """
    names: Dict[int, List[str]] = {}
    definitions: Dict[int, ToolDef] = {}
    for name, value in vars(module).items():
        definition = tool_def(value)
        if definition is not None and definition.module == module.__name__:
            definitions[id(definition)] = definition
            names.setdefault(id(definition), []).append(name)
    for key, definition in definitions.items():
        if definition.qualname not in names[key]:
            definition.qualname = sorted(names[key])[0]
    return sorted(definitions.values(), key=lambda d: (d.line, d.qualname))


if sys.version_info < (3, 9):  # pragma: no cover - documented floor
    raise ImportError("runner.sdk needs Python 3.9 or newer")
