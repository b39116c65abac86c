"""The steps of a workflow and the model block: tool, agent and program steps, `ModelSpec`.

Frozen pydantic models that forbid unknown keys (re-exported by `runner.domain.workflow`, which
validates what spans several steps: unique ids, backward ``${...}`` references). Invariant: a
validated `Step` is exactly one of a tool call, an agent loop or a program.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from runner.domain.agentspec import TOOL_ID, AgentSpec, Frozen
from runner.trace.modelapi import ApiName

__all__ = ["FUNCTION_REF", "STEP_ID", "ModelSpec", "Step"]

STEP_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}\Z")


class ModelSpec(Frozen):
    """Which model provider drives agent steps, and its settings.

    Attributes:
        provider: ``scripted`` (a function ``request -> response`` run on the host),
            ``replay`` (served from a trace), ``openai`` (an OpenAI-compatible endpoint) or
            ``anthropic`` (the Messages API). For a program step the API a request arrives
            on picks the family (OpenAI endpoints: ``openai``, Messages: ``anthropic``); a
            ``scripted`` function answers every API (`runner.providers.gateway`).
        function: ``module:function`` of a scripted provider (required for ``scripted``).
        name: the model name asked of an ``openai`` provider (required for ``openai``); for a
            program step, when set, it replaces the ``model`` of the requests routed to this
            provider's family (both are recorded).
        settings: request settings passed through (temperature, max_tokens, ...).
        apis: the model APIs a program step using this block may call (``chat_completions``,
            ``responses``, ``messages``, ``embeddings``, ``moderations``, ``count_tokens``,
            ``responses_retrieve``: `runner.providers.apis`); None: those of ``provider``
            (``openai``: Chat Completions, Responses, embeddings, moderations, retrieval;
            ``anthropic``: Messages and token counting; ``scripted``: all, it holds no key).
            A request on another API is refused on the host (a program step uses only the
            provider keys its workflow declares). Naming an API of
            the other family lets the step use that provider's key from the host settings too.
    """

    provider: Literal["scripted", "replay", "openai", "anthropic"]
    function: str | None = None
    name: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    apis: list[ApiName] | None = None

    @field_validator("apis")
    @classmethod
    def _apis(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or len(set(value)) != len(value)):
            raise ValueError("apis must name each API once, at least one")
        return value

    @model_validator(mode="after")
    def _provider_fields(self) -> ModelSpec:
        if self.provider == "scripted":
            if self.function is None:
                raise ValueError("a scripted provider needs 'function: module:function'")
            if not FUNCTION_REF.match(self.function):
                raise ValueError(f"function {self.function!r} is not of the form module:function")
        elif self.function is not None:
            raise ValueError(f"'function' belongs to the scripted provider, not {self.provider}")
        return self


class Step(Frozen):
    """One step: exactly one of a tool call (``tool`` + ``args``), an agent loop or a program.

    Attributes:
        id: ASCII letters, digits, ``_`` and ``-`` (1-64 characters), unique in the workflow.
        tool: the tool id a tool step calls.
        args: the tool step's arguments; values may hold ``${task.x}`` and
            ``${steps.ID.output[.path]}`` references.
        agent: the agent loop of an agent step.
        program: ``module:function`` of a program step: imported inside the sandbox only
            (never on the host), called with the task input (a dict), its return value
            (JSON-serialisable) is the step's output.
        tools: a program step's declared toolset (the capability set, resolved at load time
            like any step's tools); only these tools are resolvable while it runs.
        model: a program step's own model provider (None: the workflow's ``model``).
        models: the model ids a program step's requests name, declared for the plan: each
            is priced before anything runs under a USD ceiling (`runner.policy.pricing`).
            Not needed when the step's model has a ``name`` (the gateway puts it on every
            request). Host-side only: not part of the step the sandbox is sent.
    """

    id: str
    tool: str | None = None
    args: dict[str, Any] | None = None
    agent: AgentSpec | None = None
    program: str | None = None
    tools: list[str] | None = None
    model: ModelSpec | None = None
    models: list[str] | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("id")
    @classmethod
    def _step_id(cls, value: str) -> str:
        if not STEP_ID.match(value):
            raise ValueError(f"step id {value!r} must be 1-64 ASCII letters, digits, '_' or '-'")
        return value

    @field_validator("tool")
    @classmethod
    def _tool_id(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_ID.match(value):
            raise ValueError(f"{value!r} is not a tool id (dotted names like ticket.get)")
        return value

    @field_validator("program")
    @classmethod
    def _program(cls, value: str | None) -> str | None:
        if value is not None and not FUNCTION_REF.match(value):
            raise ValueError(f"program {value!r} is not of the form module:function")
        return value

    @field_validator("tools")
    @classmethod
    def _declared_tools(cls, tools: list[str] | None) -> list[str] | None:
        if tools is None:
            return None
        seen: set[str] = set()
        for tool_id in tools:
            if not TOOL_ID.match(tool_id):
                raise ValueError(f"{tool_id!r} is not a tool id (dotted names like ticket.get)")
            if tool_id in seen:
                raise ValueError(f"tool {tool_id!r} is listed twice")
            seen.add(tool_id)
        return tools

    @field_validator("models")
    @classmethod
    def _model_ids(cls, models: list[str] | None) -> list[str] | None:
        if models is None:
            return None
        for model in models:
            if not MODEL_ID.match(model):
                raise ValueError(
                    f"{model!r} is not a model id (1-256 letters, digits and . _ - : / @ +)"
                )
        if len(set(models)) != len(models):
            raise ValueError("a model is listed twice")
        return models

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        kinds = [k for k in ("tool", "agent", "program") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"step {self.id!r} needs exactly one of 'tool', 'agent' or 'program'"
                + (f" (has {', '.join(kinds)})" if kinds else "")
            )
        if self.tool is None and self.args is not None:
            raise ValueError(f"step {self.id!r}: 'args' belongs to tool steps")
        if self.program is None:
            for key in ("tools", "model", "models"):
                if getattr(self, key) is not None:
                    raise ValueError(
                        f"step {self.id!r}: '{key}' belongs to program steps (an agent step "
                        "declares its tools under 'agent')"
                    )
        return self

    def tool_ids(self) -> list[str]:
        """The tool ids this step may call: its tool, its agent's or its program's toolset."""
        if self.tool is not None:
            return [self.tool]
        if self.program is not None:
            return list(self.tools or [])
        return list(self.agent.tools) if self.agent is not None else []

    def normalised(self) -> dict[str, Any]:
        """The step in the normalised JSON shape of docs/internals.md."""
        if self.agent is not None:
            agent = self.agent.model_dump(mode="json")
            if not agent["unlisted_tools"]:  # optional: absent unless used
                del agent["unlisted_tools"]
            if agent["tool_errors"] == "return":  # optional: absent unless raise
                del agent["tool_errors"]
            return {"id": self.id, "agent": agent}
        if self.program is not None:
            model = self.model.model_dump(mode="json", exclude_none=True) if self.model else None
            return {
                "id": self.id,
                "program": self.program,
                "tools": list(self.tools or []),
                "model": model,
            }
        return {"id": self.id, "tool": self.tool, "args": dict(self.args or {})}
