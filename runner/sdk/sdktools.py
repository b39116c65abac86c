"""Tools defined with an agent SDK, made first-class calls: recognised, routed, described.

Standard library only, Python 3.9+. No SDK is imported here: an object is recognised by the
module and name of a class in its MRO (`framework_of`), so an SDK's module is touched only
when the agent already made one of its tools. The tools recognised (`FRAMEWORKS`):

- ``openai-agents``: ``agents.FunctionTool`` (``@function_tool``); its invoker's inner
  implementation (``on_invoke_tool._invoke_tool_impl``, 0.24; the invoker itself when it is
  a plain coroutine function) is wrapped, so the SDK's own failure handling still turns a
  tool error into the message its model sees;
- ``anthropic``: ``BetaFunctionTool`` / ``BetaAsyncFunctionTool`` (``@beta_tool``,
  ``@beta_async_tool``; the beta tool runner calls ``tool.call(input)``): ``call`` is wrapped;
- ``langchain``: ``langchain_core.tools.BaseTool``: a ``StructuredTool`` (``@tool``) has its
  ``func`` / ``coroutine`` wrapped, any other tool its ``_run`` / ``_arun`` (what
  ``invoke`` / ``ainvoke`` end in, after the SDK parsed the input).

`adopt` makes a `runner.sdk.ToolDef` of such a tool (id: the declared one, else the SDK's
name; effect: the declared one, else ``unsafe`` until the policy's ``map:`` says otherwise;
schema: the JSON schema the SDK offers its model) and installs the wrapper. While nothing
watches (no program step's dispatcher, no recorder, no replay context), the wrapper calls
the SDK's original code unchanged. Otherwise the call goes where a ``@tool`` call goes
(`runner.sdk._guarded`): in a sandbox's program step to the runtime (recorded with its
arguments and raw result, decided by the policy, served from the trace in replay: the tool
body does not run), in ``runner.sdk.record`` to the recorder. The function the runtime
executes (`ToolDef.func`) runs the SDK's original code with the call's arguments as keywords.

Anthropic tool dicts (``{"name", "input_schema"}`` given to ``messages.create``) have no
invocation path an adapter could take: the agent runs them itself. They are named when
offered (the gateway's check of offered tools) and read by ``check``, not routed.
"""

import contextlib
import contextvars
import functools
import importlib
import json
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["FRAMEWORKS", "adopt", "adopted", "connect", "framework_of", "install", "sdk_name"]

FRAMEWORKS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "openai-agents": (("agents.tool", "FunctionTool"),),
    "anthropic": (("anthropic.lib.tools._beta_functions", "BaseFunctionTool"),),
    "langchain": (("langchain_core.tools.base", "BaseTool"),),
}
"""framework -> the (module, class) pairs whose instances are its tools."""

_SDK: Dict[str, Any] = {}
"""What `adopt` uses of `runner.sdk` (``ToolDef``, ``Effect``, ``tool_def``, ``guarded``,
``active_allowed``), handed over by the package when it loads (`connect`): this module is
imported by the package, so it does not import the package back."""

_ADOPTED: Dict[int, Tuple[Any, Any]] = {}  # id(tool object) -> (the object, its ToolDef)
_LOCK = threading.Lock()
_CONTEXT: "contextvars.ContextVar[Any]" = contextvars.ContextVar(
    "sandbox_replay_sdk_tool_context", default=None
)


def connect(**parts: Any) -> None:
    """Called once by `runner.sdk` when it loads: the parts of it `adopt` uses."""
    _SDK.update(parts)


def framework_of(obj: Any) -> Optional[str]:
    """The framework whose tool ``obj`` is (a key of `FRAMEWORKS`), or None."""
    if isinstance(obj, type):
        return None
    for klass in getattr(type(obj), "__mro__", ()):
        key = (getattr(klass, "__module__", ""), getattr(klass, "__qualname__", ""))
        for framework, marks in FRAMEWORKS.items():
            if key in marks:
                return framework
    return None


def sdk_name(obj: Any) -> str:
    """The name the SDK offers the tool to its model under."""
    return str(getattr(obj, "name", "") or "")


def adopted(obj: Any) -> Any:
    """The `runner.sdk.ToolDef` of an adopted SDK tool object, or None."""
    with _LOCK:
        found = _ADOPTED.get(id(obj))
    return found[1] if found is not None and found[0] is obj else None


def _schema(obj: Any, framework: str) -> Dict[str, Any]:
    if framework == "openai-agents":
        schema = getattr(obj, "params_json_schema", None)
    elif framework == "anthropic":
        schema = getattr(obj, "input_schema", None)
    else:
        try:
            schema = obj.tool_call_schema.model_json_schema()
        except Exception:  # a tool without a pydantic schema: its args as properties
            args = getattr(obj, "args", None)
            schema = {"type": "object", "properties": dict(args) if isinstance(args, dict) else {}}
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    plain: Dict[str, Any] = json.loads(json.dumps(schema, sort_keys=True, default=str))
    return plain  # plain JSON values


def _user_function(obj: Any, framework: str) -> Any:
    """The user's function the SDK wrapped (where the tool is defined), or None."""
    if framework == "openai-agents":
        try:
            return obj.__wrapped__  # agents >= 0.24: the callable given to function_tool
        except AttributeError:
            return None
    found = getattr(obj, "func", None) or getattr(obj, "coroutine", None)
    return found if callable(found) else None


def _run_coroutine(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end from synchronous code, inside an event loop or not."""
    import asyncio  # only for an SDK tool that is run here

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: Dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            result["value"] = context.run(asyncio.run, coroutine)
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=run, name="sandbox-replay-sdk-tool", daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _watched() -> bool:
    """Whether a call now goes anywhere but the SDK's own code (see the module docstring)."""
    from runner.sdk import current, dispatch

    return (
        dispatch.current() is not None
        or current.RECORDER.get() is not None
        or _SDK["active_allowed"]() is not None
    )


def _keywords(value: Any) -> Dict[str, Any]:
    if isinstance(value, dict):
        return dict(value)
    return {"input": value}


def _agents(obj: Any, routed: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an Agents SDK FunctionTool; return the runner of its original code."""
    invoker = obj.on_invoke_tool
    holder, attr = (invoker, "_invoke_tool_impl")
    if not callable(getattr(invoker, attr, None)):
        holder, attr = obj, "on_invoke_tool"
    original = getattr(holder, attr)

    async def invoke(ctx: Any, input: str) -> Any:
        if not _watched():
            return await original(ctx, input)
        try:
            arguments = json.loads(input) if input else {}
        except ValueError:
            return await original(ctx, input)  # the SDK says what is wrong with it
        if hasattr(ctx, "_function_tool_arguments"):
            ctx._function_tool_arguments = None  # prepared for the SDK's own invocation
        token = _CONTEXT.set(ctx)
        try:
            return routed(**_keywords(arguments))
        finally:
            _CONTEXT.reset(token)

    for marker in dir(original):  # the SDK's own markers (prepared arguments, the callable)
        if marker.startswith("__agents_") or marker.startswith("_agents_"):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(invoke, marker, getattr(original, marker))
    setattr(holder, attr, invoke)
    name = sdk_name(obj)

    def run(**kwargs: Any) -> Any:
        ctx = _CONTEXT.get()
        text = json.dumps(kwargs)
        if ctx is None:  # in the worker: a context of the SDK's own making
            # the agent imported the SDK already: its module is loaded, nothing new is imported
            contexts = importlib.import_module("agents.tool_context")
            ctx = contexts.ToolContext(
                context=None, tool_name=name, tool_call_id="sandbox-replay", tool_arguments=text
            )
        return _run_coroutine(original(ctx, text))

    return run


def _anthropic(obj: Any, routed: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a beta_tool's ``call``; return the runner of its original code."""
    import inspect  # only when an SDK tool is adopted

    method = getattr(type(obj), "call")  # noqa: B009 - the class's, never the instance's
    if getattr(method, "_sandbox_replay", False):  # install's adopting method: the SDK's
        method = method.__wrapped__
    original = method.__get__(obj, type(obj))
    if inspect.iscoroutinefunction(original):

        async def acall(input: Any) -> Any:
            if not _watched():
                return await original(input)
            return routed(**_keywords(input))

        obj.call = acall
        return lambda **kwargs: _run_coroutine(original(kwargs))

    def call(input: Any) -> Any:
        if not _watched():
            return original(input)
        return routed(**_keywords(input))

    obj.call = call
    return lambda **kwargs: original(kwargs)


def _langchain(obj: Any, routed: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a LangChain tool's function (or ``_run``); return the runner of its original code."""
    func, coroutine = getattr(obj, "func", None), getattr(obj, "coroutine", None)
    if callable(func) or callable(coroutine):  # a StructuredTool: the user's functions
        if callable(func):

            @functools.wraps(func)
            def sync(*args: Any, **kwargs: Any) -> Any:
                if not _watched() or args:
                    return func(*args, **kwargs)
                return routed(**kwargs)

            object.__setattr__(obj, "func", sync)
        if callable(coroutine):

            @functools.wraps(coroutine)
            async def asynchronous(*args: Any, **kwargs: Any) -> Any:
                if not _watched() or args:
                    return await coroutine(*args, **kwargs)
                return routed(**kwargs)

            object.__setattr__(obj, "coroutine", asynchronous)
        if callable(func):
            return lambda **kwargs: func(**kwargs)
        run_async: Any = coroutine
        return lambda **kwargs: _run_coroutine(run_async(**kwargs))
    original = obj._run

    def run_(*args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        if not _watched() or args:
            return original(*args, run_manager=run_manager, **kwargs)
        return routed(**kwargs)

    object.__setattr__(obj, "_run", run_)
    return lambda **kwargs: original(**kwargs)


_WRAPPERS = {"openai-agents": _agents, "anthropic": _anthropic, "langchain": _langchain}


def adopt(
    obj: Any, tool_id: Optional[str] = None, effect: Any = None, description: str = ""
) -> Any:
    """Make the SDK tool ``obj`` a first-class tool; return its `runner.sdk.ToolDef`.

    Adopting twice returns the first definition (a declaration adopts before collection).

    Args:
        obj: an SDK tool object (`framework_of` names its framework).
        tool_id: the declared id; None: the SDK's name.
        effect: the declared effect class (`runner.sdk.Effect`); None: ``unsafe``,
            undeclared (the policy's ``map:`` may give it one on the host).
        description: the declared description; empty: the SDK's.

    Raises:
        ToolDefinitionError: ``obj`` is no SDK tool, or its name is not a valid tool id.
    """
    from runner.sdk import dispatch, toolschema

    sdk = types.SimpleNamespace(**_SDK)
    framework = framework_of(obj)
    if framework is None:
        raise toolschema.ToolDefinitionError(
            "{!r} is not a tool of a known agent SDK".format(type(obj).__name__)
        )
    with _LOCK:
        found = _ADOPTED.get(id(obj))
    if found is not None and found[0] is obj:
        definition = found[1]
        if tool_id is not None and not definition.effect_declared and definition.guarded:
            # adopted when made (install), declared now (@tool over the SDK's decorator)
            toolschema.check_tool_id(tool_id)
            definition.id = tool_id
            definition.effect = effect or sdk.Effect.UNSAFE
            definition.effect_declared = effect is not None
            definition.description = description or definition.description
            dispatch.withhold(definition, definition.guarded)
        return definition
    name = sdk_name(obj)
    user = _user_function(obj, framework)
    inner = sdk.tool_def(user) if user is not None else None
    if inner is not None and tool_id is None:  # @function_tool over @tool(...): the SDK
        inner.framework, inner.name = framework, name  # calls the guarded function, which
        inner.guarded = user  # routes: nothing to wrap, the declaration names the tool
        with _LOCK:
            _ADOPTED[id(obj)] = (obj, inner)
        return inner
    tool_id = tool_id or name
    toolschema.check_tool_id(tool_id)
    cell: Dict[str, Callable[..., Any]] = {}

    def routed(**kwargs: Any) -> Any:
        return cell["guarded"](**kwargs)

    schema = _schema(obj, framework)
    runner = _WRAPPERS[framework](obj, routed)
    definition = sdk.ToolDef(
        tool_id,
        effect or sdk.Effect.UNSAFE,
        effect is not None,
        description or str(getattr(obj, "description", "") or "").split("\n")[0],
        schema,
        _named(runner, user, obj, name, schema),
    )
    definition.framework, definition.name = framework, name
    code = getattr(user, "__code__", None)
    if code is not None:
        definition.file, definition.line = code.co_filename, code.co_firstlineno
    guarded = sdk.guarded(definition)
    dispatch.withhold(definition, guarded)
    cell["guarded"] = guarded
    definition.guarded = guarded
    with _LOCK:
        _ADOPTED[id(obj)] = (obj, definition)
    return definition


def _named(
    runner: Callable[..., Any], user: Any, obj: Any, name: str, schema: Dict[str, Any]
) -> Callable[..., Any]:
    """``runner`` as a function with the user's module, a name and a keyword signature.

    The signature has one keyword-only parameter per property of the SDK's schema (what a
    call's arguments are bound by name with, `runner.runtime.steps.program.arguments_of`).
    """
    import inspect  # only when an SDK tool is adopted

    def run(**kwargs: Any) -> Any:
        return runner(**kwargs)

    run.__name__ = run.__qualname__ = name if name.isidentifier() else "sdk_tool"
    run.__module__ = getattr(user, "__module__", None) or type(obj).__module__
    run.__doc__ = getattr(user, "__doc__", None)
    properties = schema.get("properties")
    names = list(properties) if isinstance(properties, dict) else []
    returns: Any = inspect.Signature.empty
    # the class a served value is revived as (runner.runtime.steps.program.return_class)
    with contextlib.suppress(TypeError, ValueError):
        returns = inspect.signature(user).return_annotation if user is not None else returns
    if all(isinstance(n, str) and n.isidentifier() for n in names):
        P = inspect.Parameter
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [P(n, P.KEYWORD_ONLY, default=None) for n in names], return_annotation=returns
        )
    return run


# --- install: tools made before and after, in the SDKs the process already imported ---------

_PATCHED: List[Tuple[Any, str, Any]] = []


def _classes() -> List[Tuple[str, Any]]:
    """(framework, class) of every SDK tool class whose module is already imported."""
    found = []
    for framework, marks in FRAMEWORKS.items():
        for module_name, qualname in marks:
            module = sys.modules.get(module_name)
            klass = getattr(module, qualname, None) if module is not None else None
            if isinstance(klass, type):
                found.append((framework, klass))
    return found


def _patch(klass: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = klass.__dict__.get(attr)
    if original is None or getattr(original, "_sandbox_replay", False):
        return
    patched = make(original)
    patched._sandbox_replay = True
    setattr(klass, attr, patched)
    _PATCHED.append((klass, attr, original))


def _adopt_quietly(obj: Any) -> None:
    if adopted(obj) is None:
        # a name that is no tool id: left to the SDK (the gateway names it when offered)
        with contextlib.suppress(Exception):
            adopt(obj)


def install(scan: bool = True) -> int:
    """Adopt the SDK tools of this process, and every one made from now on.

    Only SDKs already imported are touched (their modules are looked up in ``sys.modules``):
    Agents SDK tools are adopted when made (``FunctionTool.__post_init__``), Anthropic and
    LangChain tools on their first invocation (``BaseFunctionTool`` subclasses' ``call``,
    ``BaseTool.run`` / ``arun``). Called by the runtime's worker before a program step runs
    and by ``runner.sdk.record`` when recording starts. Idempotent.

    Args:
        scan: adopt the SDK tools that exist already (a walk over the garbage collector's
            objects, once per call).

    Returns:
        How many existing tools were adopted.
    """
    classes = _classes()
    for framework, klass in classes:
        if framework == "openai-agents":

            def post_init(original: Any) -> Any:
                @functools.wraps(original)
                def __post_init__(self: Any, *args: Any, **kwargs: Any) -> Any:
                    result = original(self, *args, **kwargs)
                    _adopt_quietly(self)
                    return result

                return __post_init__

            _patch(klass, "__post_init__", post_init)
        elif framework == "anthropic":
            for sub in list(klass.__subclasses__()):
                _patch(sub, "call", _adopting_call)
        else:
            _patch(klass, "run", _adopting_call)
            _patch(klass, "arun", _adopting_call)
    if not scan or not classes:
        return 0
    import gc  # only when an SDK is imported

    wanted = tuple(klass for _, klass in classes)
    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, wanted) and adopted(obj) is None:
            _adopt_quietly(obj)
            count += adopted(obj) is not None
    return count


def _adopting_call(original: Any) -> Any:
    """A method that adopts its tool, then calls through the instance (now routed)."""
    import inspect  # only when an SDK is installed

    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def acall(self: Any, *args: Any, **kwargs: Any) -> Any:
            _adopt_quietly(self)
            own = vars(self).get(original.__name__)  # adopt set the routed one on the tool
            if own is not None:
                return await own(*args, **kwargs)
            return await original(self, *args, **kwargs)

        return acall

    @functools.wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _adopt_quietly(self)
        own = vars(self).get(original.__name__)  # adopt set the routed one on the tool
        if own is not None:
            return own(*args, **kwargs)
        return original(self, *args, **kwargs)

    return call
