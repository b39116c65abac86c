"""Program steps: the user's own agent code, run inside the sandbox with a declared toolset.

Standard library only, Python 3.9+. Step shape (normalised workflow, docs/internals.md):

    {"id": "agent", "program": "support_agent:run", "tools": ["kb.search"], "model": {...}}

- The declared tools are resolved first (a tool absent from the capability-filtered registry:
  `ToolNotResolvable`, the episode ends ``denied``); the module is imported here, inside the
  sandbox (never on the host), from the run's tool paths; a module or function that does not
  load fails the step.
- The function is called with a copy of the task input (a dict); a coroutine it returns is run
  to completion (`asyncio.run`). Its return value, which must be JSON-serialisable, is the
  step's output.
- While it runs, its model calls go to the gateway (`runner.runtime.steps.gateway`) and every
  call of
  a ``@tool`` function is dispatched here (`runner.sdk.dispatch`): a declared tool is called
  through the episode's caller and obeys its effect class as in any step (``read``: served
  from the recordings; ``pure``/``local``: executed; absent tools cannot be declared); an
  undeclared tool is denied: the call is recorded with a `CapabilityDenied` error naming it,
  raised in the program, and the episode ends ``denied`` at that call even if the program
  caught the error.
"""

import importlib
from typing import Any, Dict, List

from runner.errors import CapabilityDenied
from runner.runtime.errors import WorkflowError
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.callrecords import to_json_text
from runner.runtime.replay.calls import Caller
from runner.sdk import dispatch


class ProgramStep:
    """One run of a program step.

    Args:
        step: the step (``program``, ``tools``, ``model``).
        registry: the runtime registry.
        caller: the episode's caller.
        task_input: the task's ``input``.
        gateway: the running gateway (`runner.runtime.steps.gateway.Gateway`), or None.
    """

    def __init__(
        self,
        step: Dict[str, Any],
        registry: RuntimeRegistry,
        caller: Caller,
        task_input: Dict[str, Any],
        gateway: Any = None,
    ) -> None:
        self.step_id = str(step["id"])
        self.ref = str(step.get("program") or "")
        self.declared: List[str] = [str(t) for t in step.get("tools") or []]
        self.registry = registry
        self.caller = caller
        self.task_input = task_input
        self.gateway = gateway
        self.tools: Dict[str, RuntimeTool] = {}
        self.denied: List[CapabilityDenied] = []

    def run(self) -> Any:
        """Run the program; return its output.

        Raises:
            ToolNotResolvable: a declared tool is not in the registry.
            CapabilityDenied: the program called an undeclared tool (first such call).
            WorkflowError: the module or function does not load, or the output is not JSON.
            Exception: whatever the program raised.
        """
        self.tools = {tool_id: self.registry.resolve(tool_id) for tool_id in self.declared}
        if self.gateway is not None:
            self.gateway.activate(self.step_id)
        try:
            with dispatch.dispatching(self._dispatch):
                try:
                    result = self._load()(dict(self.task_input))
                    if hasattr(result, "__await__"):
                        import asyncio  # only for a program that is a coroutine function

                        result = asyncio.run(_awaited(result))
                except BaseException as exc:
                    if self.denied and self.denied[0] is not exc:
                        raise self.denied[0] from exc
                    raise
        finally:
            if self.gateway is not None:
                self.gateway.deactivate(self.step_id)
        if self.denied:
            raise self.denied[0]
        try:
            to_json_text(result)
        except (TypeError, ValueError) as exc:
            raise WorkflowError(
                "program {} of step {!r} returned a value that is not JSON-serialisable: {}".format(
                    self.ref, self.step_id, exc
                ),
                step=self.step_id,
            ) from exc
        return result

    def _load(self) -> Any:
        module_name, _, attr = self.ref.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
        except Exception as exc:
            raise WorkflowError(
                "cannot import program module {!r} of step {!r} inside the sandbox: {}: {}".format(
                    module_name, self.step_id, type(exc).__name__, exc
                ),
                step=self.step_id,
            ) from exc
        for part in attr.split("."):
            target = getattr(target, part, None)
        if not callable(target):
            raise WorkflowError(
                "program {!r} of step {!r} is not a function".format(self.ref, self.step_id),
                step=self.step_id,
            )
        return target

    def _dispatch(self, definition: Any, args: tuple, kwargs: dict) -> Any:  # type: ignore[type-arg]
        """A direct ``@tool`` call of the program: declared ones go through the caller."""
        tool_id = str(definition.id)
        arguments = _arguments(definition, args, kwargs)
        tool = self.tools.get(tool_id)
        if tool is None:
            error = CapabilityDenied(
                "tool {!r} ({}) is not in the declared toolset of program step {!r} (declared: "
                "{}): nothing executed".format(
                    tool_id,
                    getattr(definition.effect, "value", definition.effect),
                    self.step_id,
                    ", ".join(self.declared) or "none",
                ),
                tool_id=tool_id,
                step=self.step_id,
            )
            self.denied.append(error)
            self.caller.record_failed(self.step_id, tool_id, arguments, error)
            raise error
        with dispatch.direct():
            try:
                return self.caller.call_tool(self.step_id, tool, arguments)
            except CapabilityDenied as exc:  # an argument rule: denied even if caught
                self.denied.append(exc)
                raise


def _arguments(definition: Any, args: tuple, kwargs: dict) -> Any:  # type: ignore[type-arg]
    """The call's arguments by name (what the record and the recordings match on)."""
    import inspect  # only when a program calls a tool

    try:
        bound = inspect.signature(definition.func).bind(*args, **kwargs)
    except TypeError:
        return dict(kwargs) if not args else {"args": list(args), **kwargs}
    return dict(bound.arguments)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def program_steps(workflow: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The program steps of a normalised workflow."""
    steps = workflow.get("steps")
    return (
        [s for s in steps if isinstance(s, dict) and "program" in s]
        if isinstance(steps, list)
        else []
    )
