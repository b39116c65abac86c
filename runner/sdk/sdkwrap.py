"""How each agent SDK's tool is wrapped (`runner.sdk.sdktools` adopts; this module wraps).

Standard library only, Python 3.9+; no SDK is imported here (an object of the SDK is handed
in, and the one SDK module used, ``agents.tool_context``, is already loaded when its tool
exists). Each wrapper (`WRAPPERS`: framework -> wrapper) replaces the SDK's invocation of one
tool object by a function that calls the SDK's original code while ``watched()`` is false and
``routed(**arguments)`` otherwise, and returns the runner of the original code with keyword
arguments (what the runtime executes). Where each SDK is wrapped, and why there, is in
`runner.sdk.sdktools`'s docstring.
"""

import contextlib
import contextvars
import functools
import importlib
import json
import threading
from typing import Any, Callable, Dict

__all__ = ["WRAPPERS", "named", "run_coroutine", "schema_of", "user_function"]

Watched = Callable[[], bool]

_CONTEXT: "contextvars.ContextVar[Any]" = contextvars.ContextVar(
    "sandbox_replay_sdk_tool_context", default=None
)


def schema_of(obj: Any, framework: str) -> Dict[str, Any]:
    """The JSON schema the SDK offers its model for ``obj`` (plain JSON values)."""
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


def user_function(obj: Any, framework: str) -> Any:
    """The user's function the SDK wrapped (where the tool is defined), or None."""
    if framework == "openai-agents":
        try:
            return obj.__wrapped__  # agents >= 0.24: the callable given to function_tool
        except AttributeError:
            return None
    found = getattr(obj, "func", None) or getattr(obj, "coroutine", None)
    return found if callable(found) else None


def made_by_the_sdk(obj: Any, framework: str) -> bool:
    """True for an Agents SDK tool the SDK made itself, not from a function of the user's.

    An MCP server's tool (``agents.mcp.util.MCPUtil.to_function_tool``: its invoker a
    ``functools.partial`` of ``invoke_mcp_tool``, no user function) is served by the MCP
    stand-in (`runner.runtime.mcphub`) as the MCP tool the workflow declares (``PREFIX.NAME``):
    routed as an SDK tool too it was an undeclared ``search_notes``, denied. A function tool
    whose function is the SDK's own is the SDK's too. (``Agent.as_tool`` keeps being routed:
    its tool has neither; its sub-agent's model turns cross the gateway either way.)
    """
    if framework != "openai-agents":
        return False
    user = user_function(obj, framework)
    if user is not None:
        return _in_agents_package(user)
    impl = getattr(getattr(obj, "on_invoke_tool", None), "_invoke_tool_impl", None)
    return isinstance(impl, functools.partial) and _in_agents_package(impl.func)


def _in_agents_package(func: Any) -> bool:
    module = str(getattr(func, "__module__", "") or "")
    return module == "agents" or module.startswith("agents.")


def run_coroutine(coroutine: Any) -> Any:
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


def _keywords(value: Any) -> Dict[str, Any]:
    if isinstance(value, dict):
        return dict(value)
    return {"input": value}


def _agents(obj: Any, routed: Callable[..., Any], watched: Watched) -> Callable[..., Any]:
    """Wrap an Agents SDK FunctionTool; return the runner of its original code."""
    invoker = obj.on_invoke_tool
    holder, attr = (invoker, "_invoke_tool_impl")
    if not callable(getattr(invoker, attr, None)):
        holder, attr = obj, "on_invoke_tool"
    original = getattr(holder, attr)

    async def invoke(ctx: Any, input: str) -> Any:
        if not watched():
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
    name = str(getattr(obj, "name", "") or "")

    def run(**kwargs: Any) -> Any:
        ctx = _CONTEXT.get()
        text = json.dumps(kwargs)
        if ctx is None:  # in the worker: a context of the SDK's own making
            # the agent imported the SDK already: its module is loaded, nothing new is imported
            contexts = importlib.import_module("agents.tool_context")
            ctx = contexts.ToolContext(
                context=None, tool_name=name, tool_call_id="sandbox-replay", tool_arguments=text
            )
        return run_coroutine(original(ctx, text))

    return run


def _anthropic(obj: Any, routed: Callable[..., Any], watched: Watched) -> Callable[..., Any]:
    """Wrap a beta_tool's ``call``; return the runner of its original code."""
    import inspect  # only when an SDK tool is adopted

    method = getattr(type(obj), "call")  # noqa: B009 - the class's, never the instance's
    if getattr(method, "_sandbox_replay", False):  # install's adopting method: the SDK's
        method = method.__wrapped__
    original = method.__get__(obj, type(obj))
    if inspect.iscoroutinefunction(original):

        async def acall(input: Any) -> Any:
            if not watched():
                return await original(input)
            return routed(**_keywords(input))

        obj.call = acall
        return lambda **kwargs: run_coroutine(original(kwargs))

    def call(input: Any) -> Any:
        if not watched():
            return original(input)
        return routed(**_keywords(input))

    obj.call = call
    return lambda **kwargs: original(kwargs)


def _langchain(obj: Any, routed: Callable[..., Any], watched: Watched) -> Callable[..., Any]:
    """Wrap a LangChain tool's function (or ``_run``); return the runner of its original code."""
    func, coroutine = getattr(obj, "func", None), getattr(obj, "coroutine", None)
    if callable(func) or callable(coroutine):  # a StructuredTool: the user's functions
        if callable(func):

            @functools.wraps(func)
            def sync(*args: Any, **kwargs: Any) -> Any:
                if not watched() or args:
                    return func(*args, **kwargs)
                return routed(**kwargs)

            object.__setattr__(obj, "func", sync)
        if callable(coroutine):

            @functools.wraps(coroutine)
            async def asynchronous(*args: Any, **kwargs: Any) -> Any:
                if not watched() or args:
                    return await coroutine(*args, **kwargs)
                return routed(**kwargs)

            object.__setattr__(obj, "coroutine", asynchronous)
        if callable(func):
            return lambda **kwargs: func(**kwargs)
        run_async: Any = coroutine
        return lambda **kwargs: run_coroutine(run_async(**kwargs))
    original = obj._run

    def run_(*args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        if not watched() or args:
            return original(*args, run_manager=run_manager, **kwargs)
        return routed(**kwargs)

    object.__setattr__(obj, "_run", run_)
    return lambda **kwargs: original(**kwargs)


WRAPPERS: Dict[str, Callable[..., Callable[..., Any]]] = {
    "openai-agents": _agents,
    "anthropic": _anthropic,
    "langchain": _langchain,
}


def named(
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
