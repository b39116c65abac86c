"""Execute the normalised workflow's steps against the task input; decide the episode status.

Standard library only, Python 3.9+. Steps run in order; each sends ``step`` progress
(``started`` then ``finished`` or ``failed``; steps never reached are sent as ``not_run``).
A ``tool`` step templates its ``args`` and makes one call; an ``agent`` step runs
`runner.runtime.steps.agent.AgentStep`; a ``program`` step runs the user's own agent code
(`runner.runtime.steps.program.ProgramStep`). Execution continues past divergences from the
recording
(they are noted in the call record's ``meta.divergence`` and, for a served call that has no
recording, as that call's error); only an error escaping a step ends the episode:

- `ToolNotResolvable` (a step names a tool absent from the manifest) or `CapabilityDenied`
  anywhere in the error's chain -> ``denied``, naming the tool;
- anything else -> ``failed``;
- an anchored fork whose prefix diverged (`runner.runtime.replay.calls.ForkStopped`) ends
  ``failed`` even when the workflow caught every error: it never ends ``succeeded``.

``failure`` is ``{call_index, tool, error_class}`` of the call whose error ended the episode;
when no call failed, the last call index (-1 before any call) with the denied tool id, or
``workflow``. The episode ``output`` is the output of the last step that finished.
"""

from typing import Any, Callable, Dict, List, Optional

from runner.errors import CapabilityDenied, ToolNotResolvable
from runner.runtime.registry import RuntimeRegistry
from runner.runtime.replay.calls import Caller, ForkStopped
from runner.runtime.steps.agent import AgentStep, caused_by
from runner.runtime.steps.program import ProgramStep
from runner.runtime.template import render
from runner.wire.errors import WorkflowError, error_class_name, error_record

Send = Callable[..., None]


class Episode:
    """One workflow run.

    Args:
        workflow: the normalised workflow (``steps``, ``model``).
        task_input: the task's ``input`` object.
        registry: the runtime registry.
        caller: makes and reports the calls.
        send: ``send(type, **fields)`` of the channel (step progress).
        gateway: the model gateway of program steps (`runner.runtime.steps.gateway`), or None.
        worker: the worker process (`runner.runtime.worker.client.Worker`) program steps run
            in; after every step its ``check`` raises when it broke the pipe's rules (a forged
            or malformed line), so that the episode names it.
    """

    def __init__(
        self,
        workflow: Dict[str, Any],
        task_input: Dict[str, Any],
        registry: RuntimeRegistry,
        caller: Caller,
        send: Send,
        gateway: Any = None,
        worker: Any = None,
    ) -> None:
        self.gateway = gateway
        self.worker = worker
        self.workflow = workflow
        self.task_input = task_input
        self.registry = registry
        self.caller = caller
        self.send = send
        self.outputs: Dict[str, Any] = {}

    def run(self) -> Dict[str, Any]:
        """Run every step; return the ``episode`` message fields.

        Returns:
            ``{status, output, error, not_run, failure}``.
        """
        steps = self.workflow.get("steps")
        if not isinstance(steps, list):
            steps = []
        output: Any = None
        for position, step in enumerate(steps):
            step_id = str(step.get("id") if isinstance(step, dict) else position)
            self.send("step", step_id=step_id, state="started")
            try:
                if not isinstance(step, dict):
                    raise WorkflowError("step #{} is not an object".format(position))
                result = self._run_step(step_id, step)
                if self.worker is not None:
                    self.worker.check()
            except (Exception, SystemExit) as exc:  # a tool may sys.exit()
                self.send("step", step_id=step_id, state="failed", error=error_record(exc))
                not_run = [
                    str(s.get("id") if isinstance(s, dict) else i)
                    for i, s in enumerate(steps)
                    if i > position
                ]
                for other in not_run:
                    self.send("step", step_id=other, state="not_run")
                return self._ended(exc, output, not_run)
            self.outputs[step_id] = result
            output = result
            self.send("step", step_id=step_id, state="finished")
        if self.caller.prefix_broken:  # an anchored fork's diverged prefix never succeeds
            return self._ended(
                ForkStopped("the anchored fork's prefix diverged from the recording"), output, []
            )
        return {
            "status": "succeeded",
            "output": output,
            "error": None,
            "not_run": [],
            "failure": None,
        }

    def _run_step(self, step_id: str, step: Dict[str, Any]) -> Any:
        if "tool" in step:
            tool = self.registry.resolve(str(step["tool"]))
            args = render(step.get("args") or {}, self.task_input, self.outputs)
            return self.caller.call_tool(step_id, tool, args)
        if "agent" in step:
            return AgentStep(
                step, self.workflow, self.registry, self.caller, self.task_input, self.outputs
            ).run()
        if "program" in step:
            return ProgramStep(
                step, self.registry, self.caller, self.task_input, self.gateway, self.worker
            ).run()
        raise WorkflowError(
            "step {!r} has neither 'tool', 'agent' nor 'program'".format(step_id), step=step_id
        )

    def _ended(self, exc: BaseException, output: Any, not_run: List[str]) -> Dict[str, Any]:
        status = "failed"
        if caused_by(exc, ToolNotResolvable) or caused_by(exc, CapabilityDenied):
            status = "denied"
        failed_call = self._failed_call(exc)
        if failed_call is not None:
            call_index, tool = failed_call
        else:
            call_index = self.caller.index - 1
            denied = _denied_tool(exc) if status == "denied" else None
            tool = denied or "workflow"
        return {
            "status": status,
            "output": output,
            "error": error_record(exc),
            "not_run": not_run,
            "failure": {
                "call_index": call_index,
                "tool": tool,
                "error_class": error_class_name(exc),
            },
        }

    def _failed_call(self, exc: BaseException) -> Optional[tuple]:  # type: ignore[type-arg]
        for error, index, tool in reversed(self.caller.failed):
            if error is exc:
                return index, tool
        return None


def _denied_tool(exc: BaseException) -> Optional[str]:
    current: Optional[BaseException] = exc
    while current is not None:
        fields = getattr(current, "fields", None)
        if isinstance(fields, dict) and fields.get("tool_id"):
            return str(fields["tool_id"])
        current = current.__cause__ or current.__context__
    return None
