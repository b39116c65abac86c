"""One recorded conversation (OpenAI-style messages) → trace lines and task observations.

Source adapters (`runner.importers.tau2`, `runner.importers.openai_messages`) read their files
into `SourceRun` values; `build_run` turns each into the lines of one trace of this project
(docs/internals.md, docs/trace.schema.json) plus the task's observations (SPEC.md call
records). The shapes it writes are the contract with ``reproduce``:

- model turn (``tool: "model"``): ``request = {"model", "messages", "tools"?, **settings}``,
  built as `runner.runtime.steps.agent` builds it so that ``reproduce`` can match it: ``messages`` =
  ``system`` (the workflow's system prompt), the fixed messages, then the turns in order;
  ``tools`` = the run's offered tools exactly as the runtime offers them
  (`runner.wire.toolrecord.RuntimeTool.function_spec` of their manifest entries: the function
  name is `runner.sdk.function_name` of the id, dots as ``__``), never a tool the source did
  not define (it is the workflow's ``unlisted_tools``); ``meta.request_tools_rewritten`` says
  when that differs from the tools as the source wrote them;
  an assistant message is the provider body's own ``message`` verbatim (normalised to
  ``{"role", "content", "tool_calls"?}`` when the source has no body); a tool result is
  ``{"role": "tool", "tool_call_id": <the call's id>, "content": <the source's content,
  verbatim>}``. ``body`` is what the source has (τ²: the provider's *choice*
  object; chat datasets: ``{"message": ...}``), never the HTTP body: ``raw_io: false`` and
  ``meta.body_shape: "choice"``. ``model`` is the configured alias with ``model_source:
  "config"`` (absent when the source has none). The request is a reconstruction
  (``meta.request_reconstructed: true``): sources keep the messages, not the request sent.
- simulated-user turn (``tool: "user"``): ``request = {"model", "messages", **settings}`` with
  ``messages`` = the user's instructions as system message (``SourceRun.user_system``, else
  the task input as canonical JSON), then the non-empty assistant/user texts so far with
  roles swapped, tool traffic left out; the body is the simulator's own reply.
- tool call (``tool`` = the function name): ``args`` parsed from the JSON arguments text;
  ``body`` = the tool message's content (a tool-level value, ``raw_io: false``); a result the
  source marks as an error also carries ``error: {"class": "ToolError", "message"}``.
- assistant messages that were not model calls (no usage, no provider body) before the first
  call are the workflow's fixed messages, not calls.
- ``end``: ``succeeded`` (exit 0), or ``failed`` with the source's verdict: failure = (last
  call index, ``workflow``, ``task_failed``, 1) and its `failure_signature`. ``output`` is the
  content of the last model turn, as the runtime's agent step returns it (None after a turn
  of tool calls only). The outbound log and its coverage are absent: the source did not
  record destinations.

Tool results are matched to calls *by position*: a tool message answers the earliest
unanswered call of the latest assistant message with the same id, or, if none has that id, the
earliest unanswered one. Ids may be reused by later calls. Nothing is invented: a missing value
stays absent and is counted in `RunCounts.missing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runner.errors import InputError
from runner.importers.calllines import (
    STEP_ID,
    LineBuilder,
    Pending,
    RunCounts,
    ToolIndex,
    assistant_chat,
)
from runner.importers.source import SourceRun
from runner.trace.format import (
    TRACE_VERSION,
    episode_exit_code,
    failure_signature,
)

__all__ = [
    "STEP_ID",
    "BuiltRun",
    "RunCounts",
    "ToolIndex",
    "build_run",
]

FAILED_CLASS = "task_failed"


@dataclass
class BuiltRun:
    """The result of `build_run`: trace lines, observations, fixed messages and counts."""

    calls: list[dict[str, Any]]
    end: dict[str, Any]
    observations: list[dict[str, Any]]
    fixed_messages: list[dict[str, Any]]
    counts: RunCounts


def build_run(run: SourceRun, tools: ToolIndex, offered: Sequence[str]) -> BuiltRun:
    """Turn one source run into call lines, an end line and the task's observations.

    Args:
        run: the source run.
        tools: effects, schema hashes and function specs of the manifest's tools.
        offered: ids of the tools the run's model requests list, in order.

    Returns:
        The built run; its ``fixed_messages`` go into the run's workflow (before the first turn).

    Raises:
        InputError: a tool result with no call before it, or a call of a tool that is not in
            ``tools`` (file and field named).
    """
    b = LineBuilder(run, tools, run.system, offered)
    started = False
    input_taken = not run.first_user_is_input
    for msg in run.messages:
        if msg.role != "tool":
            b.flush_pending()
        if msg.role == "assistant":
            if msg.fixed and not started:
                fixed = {"role": "assistant", "content": msg.content}
                b.fixed.append(fixed)
                b.push(fixed)
                b.counts.fixed_messages += 1
                continue
            for call in msg.tool_calls:
                if call.name not in tools.hashes:
                    raise InputError(
                        f"call of tool {call.name!r}, which the toolset lacks",
                        file=run.file,
                        line=msg.line,
                        field=msg.where,
                    )
            b.provider_turn("model", msg)
            started = True
            b.push(assistant_chat(msg))
            b.pending = [Pending(call, msg) for call in msg.tool_calls]
            b.output = assistant_chat(msg).get("content")  # the agent step's output rule
        elif msg.role == "user":
            if not input_taken and not started:
                input_taken = True
                b.push({"role": "user", "content": msg.content})
                continue
            b.provider_turn("user", msg)
            started = True
            b.push({"role": "user", "content": msg.content})
        elif msg.role == "tool":
            b.tool_result(msg)
        else:
            raise InputError(
                f"unknown role {msg.role!r} (system, user, assistant, tool)",
                file=run.file,
                line=msg.line,
                field=f"{msg.where}.role",
            )
    b.flush_pending()
    return BuiltRun(
        calls=b.calls,
        end=_end_line(run, b),
        observations=b.observations,
        fixed_messages=b.fixed,
        counts=b.counts,
    )


def _end_line(run: SourceRun, b: LineBuilder) -> dict[str, Any]:
    failed = run.failed_reason is not None or run.failure is not None
    status = "failed" if failed else "succeeded"
    code = episode_exit_code(status)
    end: dict[str, Any] = {"v": TRACE_VERSION, "type": "end", "status": status, "exit_code": code}
    if run.failure is not None and run.failed_reason is None:
        cls, message = run.failure
        last = len(b.calls) - 1
        tool = "workflow"
        if b.calls and (b.calls[-1].get("error") or {}).get("class") == cls:
            tool = b.calls[-1]["tool"]
        end["failure"] = {"call_index": last, "tool": tool, "error_class": cls, "exit_code": code}
        end["failure_signature"] = failure_signature(last, tool, cls, code)
        end["error"] = {"class": cls, "message": message}
    elif run.failed_reason is not None:
        last = len(b.calls) - 1
        end["failure"] = {
            "call_index": last,
            "tool": "workflow",
            "error_class": FAILED_CLASS,
            "exit_code": code,
        }
        end["failure_signature"] = failure_signature(last, "workflow", FAILED_CLASS, code)
        end["error"] = {"class": FAILED_CLASS, "message": run.failed_reason}
    else:
        end["failure"] = None
        end["failure_signature"] = None
    end["output"] = b.output
    end["not_run"] = []
    meter: dict[str, Any] = {
        "tokens_in": b.tokens[0] + run.extra_tokens[0],
        "tokens_out": b.tokens[1] + run.extra_tokens[1],
    }
    if run.usd is not None:
        meter["usd"] = run.usd
    end["meter"] = meter
    b.counts.missing["end.outbound"] += 1
    if run.end_meta:
        end["meta"] = dict(run.end_meta)
    return end
