"""Program steps: a direct call of a ``@tool`` function, handed to the runtime.

Standard library only, Python 3.9+. While the in-sandbox runtime runs a program step (the
user's own agent code, `runner.runtime.steps.program`), every call of a guarded tool function goes
to the runtime's dispatcher instead of running on its own: the dispatcher resolves the tool in
the step's declared toolset (an undeclared tool is denied and recorded) and makes the call
through the episode's caller, so that it obeys its effect class (``read``: served from the
recordings; ``pure``/``local``: executed; a denied tool is absent) and is recorded like any
other call.

The dispatcher is process-wide (threads and event loops of the program reach it too); the
dispatcher marks its own execution of a tool as `direct`, so the tool function it calls runs
under the replay context's guard instead of being dispatched again. Outside a program step
nothing is dispatched.
"""

import contextlib
import contextvars
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from runner.errors import CapabilityDenied

# (ToolDef, args, kwargs) -> result
Dispatcher = Callable[[Any, Tuple[Any, ...], Dict[str, Any]], Any]

_ACTIVE: List[Dispatcher] = []
_LOCK = threading.Lock()
_DIRECT: "contextvars.ContextVar[bool]" = contextvars.ContextVar(
    "sandbox_replay_direct_call", default=False
)


def current() -> Optional[Dispatcher]:
    """The dispatcher a tool call goes to now, or None (outside a program step, or direct)."""
    if _DIRECT.get() or not _ACTIVE:
        return None
    with _LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def dispatching(dispatcher: Dispatcher) -> Iterator[None]:
    """Hand every guarded tool call of this process to ``dispatcher`` while active."""
    with _LOCK:
        _ACTIVE.append(dispatcher)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE.remove(dispatcher)


@contextlib.contextmanager
def direct() -> Iterator[None]:
    """Calls made inside (in this context) run the tool itself, under the guard."""
    token = _DIRECT.set(True)
    try:
        yield
    finally:
        _DIRECT.reset(token)


# --- the worker: code that may not run is never bound ----------------------------------------

ENV_WITHHOLD = "SANDBOX_REPLAY_WITHHOLD_TOOLS"
"""Set by the worker for its children: in any process started from it, no tool code is bound
(tools run in the worker, through the runtime; a child calling one gets `CapabilityDenied`)."""

_WITHHOLD: List[Callable[[str], bool]] = []
if os.environ.get(ENV_WITHHOLD):
    _WITHHOLD.append(lambda _tool_id: True)


def deny_code(rule: Callable[[str], bool]) -> None:
    """From now on, a ``@tool`` whose id ``rule`` names gets a stub instead of its code.

    Called by the runtime's worker (`runner.runtime.worker.process`) before it imports tool
    modules: the stub raises `runner.errors.CapabilityDenied`, and the bare function is dropped
    (`withhold`), so no path to it is left in the process.
    """
    _WITHHOLD[:] = [rule]


def withhold(definition: Any, wrapper: Any) -> None:
    """Replace ``definition.func`` (and the wrapper's closure cell) by a stub when denied."""
    if not _WITHHOLD or not _WITHHOLD[0](definition.id):
        return
    bare = definition.func
    tool_id, effect = definition.id, getattr(definition.effect, "value", definition.effect)

    def withheld(*args: Any, **kwargs: Any) -> Any:
        raise CapabilityDenied(
            "tool {!r} ({}) is denied in this episode: its code is not loaded".format(
                tool_id, effect
            ),
            tool_id=tool_id,
            effect=effect,
        )

    withheld.__name__, withheld.__qualname__ = bare.__name__, bare.__qualname__
    withheld.__module__ = bare.__module__
    import inspect  # lazy: kept for start-up speed (the runtime imports the SDK, decorates no tool)

    # a program's call of it still binds its arguments by name (what recordings match on)
    withheld.__signature__ = inspect.signature(bare)  # type: ignore[attr-defined]
    definition.func = withheld
    for cell in getattr(wrapper, "__closure__", None) or ():
        if cell.cell_contents is bare:
            cell.cell_contents = withheld


def inherit_context_in_threads() -> None:
    """Run every thread started from now on in a copy of its starter's context (the guard)."""
    original = threading.Thread.start
    if getattr(original, "_sandbox_replay", False):
        return

    def start(self: threading.Thread) -> None:
        context = contextvars.copy_context()
        run = self.run
        self.run = lambda: context.run(run)  # type: ignore[method-assign]
        original(self)

    start._sandbox_replay = True  # type: ignore[attr-defined]
    threading.Thread.start = start  # type: ignore[method-assign]
