"""Program steps: the user's own agent code, run inside the sandbox with a declared toolset.

Standard library only, Python 3.9+. Step shape (normalised workflow, docs/internals.md):

    {"id": "agent", "program": "support_agent:run", "tools": ["kb.search"], "model": {...}}

- The declared tools are resolved first (a tool absent from the capability-filtered registry:
  `ToolNotResolvable`, the episode ends ``denied``); the module is imported here, inside the
  sandbox (never on the host), from the run's tool paths; a module or function that does not
  load fails the step.
- The function is called with a copy of the task input (a dict); a coroutine it returns is run
  to completion (`asyncio.run`). Its return value, JSON or something with a JSON form (a
  pydantic model, a dataclass: `runner.trace.jsonform`), is the step's output.
- A ``@tool`` call's value reaches the program as JSON; when the tool declares a return class
  with ``model_validate`` (pydantic) or a dataclass, the program gets an instance of it again
  (`return_class`, `runner.trace.jsonform.revive`), as it would have in its own process.
- It runs in the worker process (`runner.runtime.worker`), never in the runtime. While it runs,
  its model calls go to the gateway (`runner.runtime.steps.gateway`) and every call of a
  ``@tool`` function comes back over the worker pipe to `ProgramStep.call`, on the runtime's
  side (`runner.sdk.dispatch` in the worker hands it over): a declared tool is called
  through the episode's caller and obeys its effect class as in any step (``read``: served
  from the recordings; ``pure``/``local``: executed; absent tools cannot be declared); an
  undeclared tool is denied: the call is recorded with a `CapabilityDenied` error naming it,
  raised in the program, and the episode ends ``denied`` at that call even if the program
  caught the error.
"""

import importlib
from typing import Any, Dict, List

from runner.errors import CapabilityDenied
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.calls import Caller
from runner.sdk import dispatch, sdktools
from runner.trace.jsonform import json_form, revive
from runner.trace.strictjson import loads as strict_loads
from runner.wire.errors import WorkflowError


class ProgramStep:
    """One run of a program step.

    Args:
        step: the step (``program``, ``tools``, ``model``).
        registry: the runtime registry.
        caller: the episode's caller.
        task_input: the task's ``input``.
        gateway: the running gateway (`runner.runtime.steps.gateway.Gateway`), or None.
        worker: runs the program (`runner.runtime.worker.client.Worker.run_program`); its
            ``@tool`` calls come back to `call`.
    """

    def __init__(
        self,
        step: Dict[str, Any],
        registry: RuntimeRegistry,
        caller: Caller,
        task_input: Dict[str, Any],
        gateway: Any = None,
        worker: Any = None,
    ) -> None:
        self.worker = worker
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
        """Run the program in the worker; return its output.

        Raises:
            ToolNotResolvable: a declared tool is not in the registry.
            CapabilityDenied: the program called an undeclared tool (first such call).
            WorkflowError: the module or function does not load, or the output is not JSON.
            Exception: whatever the program raised (as the worker named it).
        """
        self.tools = {tool_id: self.registry.resolve(tool_id) for tool_id in self.declared}
        if self.gateway is not None:
            self.gateway.activate(self.step_id)
        try:
            try:
                if self.worker is not None:
                    result = self.worker.run_program(self)
                else:
                    result = run_here(self)
            except BaseException as exc:
                if self.denied and self.denied[0] is not exc:
                    raise self.denied[0] from exc
                raise
        finally:
            if self.gateway is not None:
                self.gateway.deactivate(self.step_id)
        if self.denied:
            raise self.denied[0]
        return result

    def call(self, tool_id: str, arguments: Any) -> Any:
        """A ``@tool`` call the program made (in the worker): the guard is here, on this side.

        A tool outside the step's declared toolset is denied and recorded (nothing runs);
        a declared one goes through the episode's caller (served, or executed in the worker).
        """
        tool = self.tools.get(tool_id)
        if tool is None:
            error = CapabilityDenied(
                "tool {!r} is not in the declared toolset of program step {!r} (declared: "
                "{}): nothing executed".format(
                    tool_id, self.step_id, ", ".join(self.declared) or "none"
                ),
                tool_id=tool_id,
                step=self.step_id,
            )
            self.denied.append(error)
            self.caller.record_failed(self.step_id, tool_id, arguments, error)
            raise error
        try:
            return self.caller.call_tool(self.step_id, tool, arguments)
        except CapabilityDenied as exc:  # an argument rule: denied even if caught
            self.denied.append(exc)
            raise


def load_program(ref: str, step_id: str) -> Any:
    """The program function ``module:function`` (imported in the worker).

    Raises:
        WorkflowError: the module does not import or the name is not a function.
    """
    module_name, _, attr = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise WorkflowError(
            "cannot import program module {!r} of step {!r} inside the sandbox: {}: {}".format(
                module_name, step_id, type(exc).__name__, exc
            ),
            step=step_id,
        ) from exc
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise WorkflowError(
            "program {!r} of step {!r} is not a function".format(ref, step_id), step=step_id
        )
    return target


def run_program(ref: str, step_id: str, task_input: Any, dispatcher: Any) -> str:
    """Call the program with ``task_input``; its ``@tool`` calls go to ``dispatcher``.

    Returns:
        The program's output as JSON text.

    Raises:
        WorkflowError: it does not load, or its output is not JSON-serialisable.
        Exception: what the program raised.
    """
    sdktools.install()  # the SDK tools it makes go through the dispatcher (before the import:
    target = load_program(ref, step_id)  # an SDK it imports is patched as it is imported)
    sdktools.install()
    with dispatch.dispatching(dispatcher):
        result = target(dict(task_input) if isinstance(task_input, dict) else {})
        if hasattr(result, "__await__"):
            import asyncio  # only for a program that is a coroutine function

            result = asyncio.run(_awaited(result))
    text, encoding = json_form(result)
    if encoding == "repr":
        raise WorkflowError(
            "program {} of step {!r} returned a value with no JSON form ({}): return JSON "
            "values, a pydantic model or a dataclass".format(ref, step_id, type(result).__name__),
            step=step_id,
        )
    return text


def run_here(step: ProgramStep) -> Any:
    """Run ``step``'s program in this process (unit tests; the runtime uses its worker)."""

    def local(definition: Any, args: tuple, kwargs: dict) -> Any:  # type: ignore[type-arg]
        with dispatch.direct():
            value = step.call(str(definition.id), arguments_of(definition, args, kwargs))
        return revive(value, return_class(definition))

    return strict_loads(run_program(step.ref, step.step_id, step.task_input, local))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def arguments_of(definition: Any, args: tuple, kwargs: dict) -> Any:  # type: ignore[type-arg]
    """The call's arguments by name (what the record and the recordings match on)."""
    import inspect  # only when a program calls a tool

    try:
        bound = inspect.signature(definition.func).bind(*args, **kwargs)
    except TypeError:
        return dict(kwargs) if not args else {"args": list(args), **kwargs}
    return dict(bound.arguments)


def return_class(definition: Any) -> Any:
    """The class a tool function declares it returns (``-> Hits``), or None.

    Read from its signature (a withheld tool's stub keeps it, `runner.sdk.dispatch.withhold`);
    a string annotation (``from __future__ import annotations``) is looked up by name in the
    tool's module, never evaluated.
    """
    import inspect  # only when a program calls a tool
    import sys

    try:
        annotation = inspect.signature(definition.func).return_annotation
    except (TypeError, ValueError):
        return None
    if isinstance(annotation, str):
        target: Any = sys.modules.get(getattr(definition.func, "__module__", "") or "")
        for part in annotation.strip().split("."):
            target = getattr(target, part, None) if part.isidentifier() else None
        annotation = target
    return annotation if isinstance(annotation, type) else None


def program_steps(workflow: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The program steps of a normalised workflow."""
    steps = workflow.get("steps")
    return (
        [s for s in steps if isinstance(s, dict) and "program" in s]
        if isinstance(steps, list)
        else []
    )
