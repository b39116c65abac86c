"""The agent step of a workflow: its toolset, prompts, fixed messages and simulated user.

Frozen pydantic models that forbid unknown keys (re-exported by `runner.domain.workflow`).
Invariant: the tools of one step are distinct tool ids whose model-facing function names
(`runner.sdk.function_name`: dots as ``__``) are distinct and at most 64 characters, so a
model's tool call maps back to exactly one tool.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.sdk import FUNCTION_NAME_MAX, function_name

__all__ = ["TOOL_ID", "AgentSpec", "FixedMessage", "Frozen", "UserSpec"]

TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")


class Frozen(BaseModel):
    """Base of the workflow models: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class FixedMessage(Frozen):
    """A message of the conversation that is not a model turn (e.g. an imported greeting).

    Attributes:
        role: ``assistant`` or ``user``.
        content: the text, sent as is (not templated).
    """

    role: Literal["assistant", "user"]
    content: str


class UserSpec(Frozen):
    """A simulated user (role ``user``), the object form of ``agent.user``.

    Attributes:
        system: its instructions (the system message of its requests); ``${...}`` allowed.
            None: the task input as canonical JSON.
        stop: a reply containing this text (or any of these texts) ends the conversation,
            as τ²'s ``###STOP###`` / ``###TRANSFER###``; None: ``###STOP###``.
        max_turns: user turns at most after the first (>= 0; the first, asked when the step
            has no ``input``, is not counted); None: the step's ``max_turns``.
        model: the model name asked for its turns (None: the workflow's).
        settings: request settings of its turns (None: the workflow model's).
    """

    system: str | None = None
    stop: str | list[str] | None = None
    max_turns: int | None = Field(default=None, ge=0)
    model: str | None = None
    settings: dict[str, Any] | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        texts = [stop] if isinstance(stop, str) else list(stop or [])
        if any(not text for text in texts) or (isinstance(stop, list) and not stop):
            raise ValueError("stop texts must be non-empty")
        return stop


class AgentSpec(Frozen):
    """A tool-calling loop driven by the model.

    Attributes:
        tools: the tool ids the model may call in this step (each resolved at load time).
        max_turns: model turns at most (>= 1).
        system: the system prompt; ``${...}`` references allowed.
        input: the first user message; ``${...}`` references allowed. None: the runtime
            sends the task's input.
        user: a simulated user (role ``user``, served through the host like model turns):
            its instructions as a string, or a `UserSpec` (instructions, stop texts, turn
            limit); None means no simulated user.
        fixed_messages: messages that are part of the conversation without being model turns
            (τ²'s opening greeting), placed after the system prompt and before the first user
            message; never sent to or served as a model call.
        unlisted_tools: tools of ``tools`` the model may call but that are not listed in its
            requests' ``tools``: an import whose source recorded a tool's calls but not its
            definition (or did not offer it in that run). ``lint`` reports their calls (the
            schema in force is unknown).
        tool_errors: what a tool call that raises does to the loop: ``return`` (default) hands
            the error back to the model as the tool message, as most agent frameworks do;
            ``raise`` ends the step with it (the episode fails at that call), as a framework
            without an error handler does (Google ADK's default; an import whose source
            aborted on a tool error writes it, so that the failure reproduces).
    """

    tools: list[str] = Field(default_factory=list)
    max_turns: int = Field(ge=1)
    system: str | None = None
    input: str | None = None
    user: str | UserSpec | None = None
    fixed_messages: list[FixedMessage] = Field(default_factory=list)
    unlisted_tools: list[str] = Field(default_factory=list)
    tool_errors: Literal["return", "raise"] = "return"

    @model_validator(mode="after")
    def _unlisted_are_tools(self) -> AgentSpec:
        unknown = [t for t in self.unlisted_tools if t not in self.tools]
        if unknown:
            raise ValueError(f"unlisted_tools {unknown} are not in the step's tools")
        return self

    @field_validator("tools")
    @classmethod
    def _tool_ids(cls, tools: list[str]) -> list[str]:
        seen: set[str] = set()
        for tool_id in tools:
            if not TOOL_ID.match(tool_id):
                raise ValueError(f"{tool_id!r} is not a tool id (dotted names like ticket.get)")
            if tool_id in seen:
                raise ValueError(f"tool {tool_id!r} is listed twice")
            seen.add(tool_id)
        offered: dict[str, str] = {}
        for tool_id in tools:
            name = function_name(tool_id)
            if len(name) > FUNCTION_NAME_MAX:
                raise ValueError(
                    f"tool {tool_id!r} is offered to the model as {name!r}, longer than "
                    f"{FUNCTION_NAME_MAX} characters (the OpenAI limit for function names)"
                )
            if name in offered:
                raise ValueError(
                    f"tools {offered[name]!r} and {tool_id!r} would both be offered to the model "
                    f"as {name!r} (dots become '__'): rename one"
                )
            offered[name] = tool_id
        return tools
