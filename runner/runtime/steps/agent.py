"""Agent steps: a tool-calling loop driven by a model reached through the host.

Standard library only, Python 3.9+. Step shape (normalised workflow, docs/internals.md and
`runner.domain.workflow.AgentSpec`):

    {"id": "answer", "agent": {"tools": ["kb.search"], "max_turns": 6, "system": "...",
                               "input": "...", "user": null, "fixed_messages": []}}

- ``system`` (optional, templated): the system message.
- ``fixed_messages`` (optional, not templated): ``[{"role", "content"}]`` placed right after
  the system message; conversation messages that are not model turns (τ²'s greeting).
- ``input`` (optional, templated; ``prompt`` is accepted as an alias): the first user message.
  Without it: the task input as canonical JSON, or, with a simulated user, the simulated user's
  first turn.
- ``user`` (optional): a simulated user. A string is its instructions (templated; the system
  message of its requests); an object ``{"system"?, "max_turns"?, "stop"?, "model"?,
  "settings"?}`` says more. When the model answers without tool calls, a ``user`` turn is
  requested from the host (the conversation seen from the user's side: roles swapped, tool
  traffic left out); a reply that is empty or contains ``stop`` (a string or a list of
  strings; default ``###STOP###``) ends the conversation, as does reaching ``max_turns`` user
  turns. Without instructions, the task input (canonical JSON) is its system message.
- the model request is the OpenAI Chat Completions shape: ``model`` (``model.model`` or
  ``model.name`` of the workflow, else its provider name), ``messages``, ``tools`` (function
  format; ``name`` is `runner.sdk.function_name` of the tool id, dots as ``__``; a call of
  that name, or of the id itself, is mapped back to the tool; the step's ``unlisted_tools``
  are callable but not listed), then the workflow's ``model.settings`` as top-level keys.
- each model turn: ``choices[0].message`` is appended; its ``tool_calls`` (any number) are
  dispatched in order through the registry, each result appended as a ``tool`` message: a
  served recording's text body verbatim (value or error text, as the model saw it when it
  was recorded), else the JSON text of the return value; an error without a recorded body as
  ``{"error": {"class", "message"}}``, an observation the model can recover from. The loop
  stops on a message without tool calls (and no simulated user to answer) or after
  ``max_turns`` model turns. The step's output is the last assistant ``content``.
- fatal, not observations: a toolset entry that does not resolve (`ToolNotResolvable`, before
  the first turn) and `CapabilityDenied` raised by a tool; both end the episode ``denied``.
"""

import json
from typing import Any, Dict, List, Optional

from runner.errors import CapabilityDenied, ToolNotResolvable
from runner.runtime.registry import RuntimeRegistry, RuntimeTool
from runner.runtime.replay.callrecords import to_json_text
from runner.runtime.replay.calls import Caller
from runner.runtime.template import render
from runner.sdk import canonical_json, function_name
from runner.trace.jsonform import json_form
from runner.wire.errors import WorkflowError, error_record

DEFAULT_MAX_TURNS = 10
DEFAULT_STOP = "###STOP###"


def caused_by(exc: BaseException, cls: type) -> bool:
    """True when ``exc`` or an exception in its cause/context chain is a ``cls``."""
    seen = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, cls):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


class AgentStep:
    """One run of an agent step.

    Args:
        step: the step (with its ``agent`` object).
        workflow: the normalised workflow (for ``model``).
        registry: the runtime registry.
        caller: the episode's caller.
        task_input: the task's ``input``.
        outputs: outputs of the steps that ran, by id.
    """

    def __init__(
        self,
        step: Dict[str, Any],
        workflow: Dict[str, Any],
        registry: RuntimeRegistry,
        caller: Caller,
        task_input: Dict[str, Any],
        outputs: Dict[str, Any],
    ) -> None:
        self.step_id = str(step["id"])
        self.cfg = step["agent"] if isinstance(step.get("agent"), dict) else {}
        self.model_cfg = workflow.get("model")
        self.registry = registry
        self.caller = caller
        self.task_input = task_input
        self.outputs = outputs

    def _render(self, value: Any) -> Any:
        return render(value, self.task_input, self.outputs)

    def run(self) -> Any:
        """Run the loop; return the last assistant content.

        Raises:
            ToolNotResolvable: a toolset entry is not in the registry.
            CapabilityDenied: a tool called a denied tool's function.
            WorkflowError: no model configured, or a bad template.
            ModelCallError: a model or user turn failed.
        """
        tools = [self.registry.resolve(str(t)) for t in self.cfg.get("tools") or []]
        if not isinstance(self.model_cfg, dict):
            raise WorkflowError(
                "step {!r} is an agent step but the workflow has no model".format(self.step_id),
                step=self.step_id,
            )
        self.tools = {t.id: t for t in tools}
        unlisted = set(self.cfg.get("unlisted_tools") or [])
        listed = [t for t in tools if t.id not in unlisted]
        max_turns = int(self.cfg.get("max_turns") or DEFAULT_MAX_TURNS)
        user = self.cfg.get("user")
        user_cfg: Dict[str, Any] = {}
        if isinstance(user, str):
            user_cfg = {"system": user}
        elif isinstance(user, dict):
            user_cfg = user
        simulated = user is not None and bool(user_cfg.get("simulated", True))
        messages: List[Dict[str, Any]] = []
        if self.cfg.get("system") is not None:
            messages.append({"role": "system", "content": _text(self._render(self.cfg["system"]))})
        for fixed in self.cfg.get("fixed_messages") or []:
            if isinstance(fixed, dict):
                messages.append({"role": str(fixed.get("role")), "content": fixed.get("content")})
        first = self.cfg.get("input")
        if first is None:
            first = self.cfg.get("prompt")
        if first is not None:
            messages.append({"role": "user", "content": _text(self._render(first))})
        elif not simulated:
            messages.append({"role": "user", "content": canonical_json(self.task_input)})
        elif not self._user_turn(messages, user_cfg):
            return None
        limit = user_cfg.get("max_turns")
        user_turns_left = int(limit) if isinstance(limit, int) else max_turns
        content: Any = None
        for _turn in range(max_turns):
            message = self.caller.call_model(
                self.step_id, "model", self._request(self.model_cfg, messages, listed)
            )
            message.setdefault("role", "assistant")
            messages.append(message)
            content = message.get("content")
            calls = message.get("tool_calls") or []
            if calls:
                for call in calls:
                    messages.append(self._dispatch(call))
                continue
            if simulated and user_turns_left > 0:
                user_turns_left -= 1
                if self._user_turn(messages, user_cfg):
                    continue
            break
        return content

    def _request(
        self, model_cfg: Dict[str, Any], messages: List[Dict[str, Any]], tools: List[RuntimeTool]
    ) -> Dict[str, Any]:
        request: Dict[str, Any] = {
            "model": model_cfg.get("model")
            or model_cfg.get("name")
            or model_cfg.get("provider")
            or "model",
            "messages": [dict(m) for m in messages],
        }
        if tools:
            request["tools"] = [t.function_spec() for t in tools]
        settings = model_cfg.get("settings") or {}
        if isinstance(settings, dict):
            for key, value in settings.items():
                request.setdefault(key, value)
        return request

    def _user_turn(self, messages: List[Dict[str, Any]], user_cfg: Dict[str, Any]) -> bool:
        """Ask the simulated user; append its reply. False when it ends the conversation."""
        seen: List[Dict[str, Any]] = []
        if user_cfg.get("system") is not None:
            seen.append({"role": "system", "content": _text(self._render(user_cfg["system"]))})
        else:
            seen.append({"role": "system", "content": canonical_json(self.task_input)})
        for m in messages:
            if m.get("role") in ("assistant", "user") and m.get("content"):
                seen.append(
                    {
                        "role": "user" if m["role"] == "assistant" else "assistant",
                        "content": m["content"],
                    }
                )
        model_cfg = self.model_cfg if isinstance(self.model_cfg, dict) else {}
        request = self._request(
            dict(
                model_cfg,
                **{k: user_cfg[k] for k in ("model", "settings") if user_cfg.get(k) is not None},
            ),
            seen,
            [],
        )
        reply = self.caller.call_model(self.step_id, "user", request).get("content")
        stop = user_cfg.get("stop") or DEFAULT_STOP
        stops = [str(s) for s in stop] if isinstance(stop, list) else [str(stop)]
        if not reply or any(s in str(reply) for s in stops):
            return False
        messages.append({"role": "user", "content": _text(reply)})
        return True

    def _dispatch(self, call: Any) -> Dict[str, Any]:
        call = call if isinstance(call, dict) else {}
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = str(function.get("name") or "")
        raw_args = function.get("arguments")
        reply = {"role": "tool", "tool_call_id": call.get("id")}
        try:
            # blank arguments are no arguments (as the OpenAI SDKs and the importers read them)
            if isinstance(raw_args, str):
                args = json.loads(raw_args) if raw_args.strip() else {}
            else:
                args = raw_args or {}
        except ValueError as exc:
            self.caller.record_failed(self.step_id, name, raw_args, exc)
            reply["content"] = to_json_text({"error": error_record(exc)})
            return reply
        tool = self._lookup(name)
        if tool is None:
            error = ToolNotResolvable(
                "tool {!r} is not offered in step {!r} (offered: {})".format(
                    name, self.step_id, ", ".join(sorted(self.tools)) or "none"
                ),
                tool_id=name,
            )
            self.caller.record_failed(self.step_id, name, args, error)
            reply["content"] = to_json_text({"error": error_record(error)})
            return reply
        try:
            value = self.caller.call_tool(self.step_id, tool, args)
            reply["content"] = json_form(value)[0]  # the text the call recorded
        except (Exception, SystemExit) as exc:
            if caused_by(exc, CapabilityDenied) or self.cfg.get("tool_errors") == "raise":
                raise  # `tool_errors: raise`: the step ends with the tool's error
            reply["content"] = to_json_text({"error": error_record(exc)})
        if self.caller.served_text is not None:
            reply["content"] = self.caller.served_text
        return reply

    def _lookup(self, name: str) -> Optional[RuntimeTool]:
        # the name the tool was offered under (workflows reject collisions at load time)
        matches = [t for tid, t in self.tools.items() if function_name(tid) == name]
        if len(matches) == 1:
            return matches[0]
        return self.tools.get(name)
