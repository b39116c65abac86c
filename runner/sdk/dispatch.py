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
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

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
