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
  ``func`` / ``coroutine`` wrapped, any other tool its ``_run`` (what ``invoke`` /
  ``ainvoke`` end in, after the SDK parsed the input; a custom tool's own ``_arun`` is not
  wrapped).

How each is wrapped is `runner.sdk.sdkwrap`'s; this module recognises, adopts and installs. A
plain function the agent hands to an SDK's tool-making call (``create_react_agent(model,
tools=[f])``) is made that SDK's tool and adopted by `runner.sdk.handed`.

`adopt` makes a `runner.sdk.ToolDef` of such a tool (id: the declared one, else the SDK's
name; effect: the declared one, else ``unsafe`` until the policy's ``map:`` says otherwise;
schema: the JSON schema the SDK offers its model) and installs the wrapper. While nothing
watches (no program step's dispatcher, no recorder, no replay context), the wrapper calls
the SDK's original code unchanged. Otherwise the call goes where a ``@tool`` call goes
(`runner.sdk._guarded`): in a sandbox's program step to the runtime (recorded with its
arguments and raw result, decided by the policy, served from the trace in replay: the tool
body does not run), in ``runner.sdk.record`` to the recorder. The function the runtime
executes (`ToolDef.func`) runs the SDK's original code with the call's arguments as keywords.

A ``@tool`` function an SDK tool calls inside runs within that call: the SDK tool is the
call recorded (it is what the model asked for), served in replay with its body not run.

Anthropic tool dicts (``{"name", "input_schema"}`` given to ``messages.create``) have no
invocation path an adapter could take: the agent runs them itself. The gateway's check of
offered tools refuses a request offering one whose name is no declared tool; they are not
routed.
"""

import contextlib
import functools
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from runner.sdk import sdkwrap

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


def _watched() -> bool:
    """Whether a call now goes anywhere but the SDK's own code (see the module docstring)."""
    from runner.sdk import current, dispatch

    return (
        dispatch.current() is not None
        or current.RECORDER.get() is not None
        or _SDK["active_allowed"]() is not None
    )


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
    user = sdkwrap.user_function(obj, framework)
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

    schema = sdkwrap.schema_of(obj, framework)
    runner = sdkwrap.WRAPPERS[framework](obj, routed, _watched)
    definition = sdk.ToolDef(
        tool_id,
        effect or sdk.Effect.UNSAFE,
        effect is not None,
        description or str(getattr(obj, "description", "") or "").split("\n")[0],
        schema,
        sdkwrap.named(runner, user, obj, name, schema),
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


def _patch(klass: Any, attr: str, make: Callable[[Any], Any]) -> bool:
    """Patch ``klass.attr`` once; True when it was patched now."""
    original = klass.__dict__.get(attr)
    if original is None or getattr(original, "_sandbox_replay", False):
        return False
    patched = make(original)
    patched._sandbox_replay = True
    setattr(klass, attr, patched)
    _PATCHED.append((klass, attr, original))
    return True


class _PatchOnImport:
    """A ``sys.meta_path`` finder: when an SDK's tool module is imported, patch it at once.

    Nothing is imported by it: it only wraps the loader the path finder found for a module of
    `FRAMEWORKS`, so that `install` runs right after that module ran. Its tools are then all
    made after the patch (adopted when made or when called): no walk over objects is needed.
    """

    modules = frozenset(module for marks in FRAMEWORKS.values() for module, _ in marks)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.modules:
            return None
        import importlib.machinery  # only when an SDK's tool module is being imported

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if spec is None or run is None:
            return spec

        def exec_module(module: Any) -> None:
            run(module)
            install(scan=False)

        loader.exec_module = exec_module  # type: ignore[union-attr]
        return spec


_FINDER = _PatchOnImport()


def _adopt_quietly(obj: Any) -> None:
    framework = framework_of(obj)
    if framework is not None and sdkwrap.made_by_the_sdk(obj, framework):
        return  # an MCP server's tool, an agent as a tool: not the user's (sdkwrap says why)
    if adopted(obj) is None:
        # a name that is no tool id: left to the SDK (the gateway names it when offered)
        with contextlib.suppress(Exception):
            adopt(obj)


def install(scan: bool = True) -> int:
    """Adopt the SDK tools of this process, and every one made from now on.

    Only SDKs already imported are touched (their modules are looked up in ``sys.modules``);
    an SDK imported later is patched as it is imported (`_PatchOnImport`, added to
    ``sys.meta_path`` here). Agents SDK tools are adopted when made
    (``FunctionTool.__post_init__``), Anthropic and LangChain tools on their first invocation
    (``BaseFunctionTool`` subclasses' ``call``, ``BaseTool.run`` / ``arun``). Called by the
    runtime's worker before and after a program step's module is imported, and by
    ``runner.sdk.record`` when recording starts. Idempotent.

    Args:
        scan: when this call patched an SDK already imported, adopt the tools it made before
            (a walk over the garbage collector's objects: 60-450 ms in a process of 290,000
            objects with the three SDKs loaded, at load 2-12 on this machine; once per
            process, since later tools are adopted when made).

    Returns:
        How many existing tools were adopted.
    """
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    classes = _classes()
    newly = False
    for framework, klass in classes:
        if framework == "openai-agents":

            def post_init(original: Any) -> Any:
                @functools.wraps(original)
                def __post_init__(self: Any, *args: Any, **kwargs: Any) -> Any:
                    result = original(self, *args, **kwargs)
                    _adopt_quietly(self)
                    return result

                return __post_init__

            newly = _patch(klass, "__post_init__", post_init) or newly
        elif framework == "anthropic":
            for sub in list(klass.__subclasses__()):
                newly = _patch(sub, "call", _adopting_call) or newly
        else:
            newly = _patch(klass, "run", _adopting_call) or newly
            newly = _patch(klass, "arun", _adopting_call) or newly
    if not scan or not newly:
        return 0
    import gc  # only when an SDK is imported

    # exact types only: ``isinstance`` would read ``__class__`` of every object (a proxy's may
    # run code, and the walk took seconds); the subclasses are listed once instead
    wanted: Set[Any] = set()
    todo = [klass for _, klass in classes]
    while todo:
        klass = todo.pop()
        if klass not in wanted:
            wanted.add(klass)
            todo.extend(type.__subclasses__(klass))
    count = 0
    for obj in gc.get_objects():
        if type(obj) in wanted and adopted(obj) is None:
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
