"""The rules of ``lint``: one function per seed field, each returning a `FieldCheck`.

Pure functions over parsed records (`runner.tracetools.reader`); docs/trace-format.md states the
same rules in prose ("The five fields", "Model id: pinned or alias", "Failure signature").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Literal

from runner.sdk import function_name
from runner.trace.format import episode_exit_code, failure_signature
from runner.tracetools.reader import CallRecord, EndRecord, RunRecord

__all__ = [
    "CallsSeen",
    "FieldCheck",
    "check_body",
    "check_clock",
    "check_failure_signature",
    "check_model_id",
    "check_schema_hash",
    "model_id_problem",
]

Status = Literal["ok", "missing", "malformed", "not_applicable"]
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
# A model id is *pinned* when it carries a date (2025-04-14, 20250414), a 4-digit MMDD/YYMM
# group (-0613, -2407), a 3-digit revision (-001) or an explicit version tag (-v2, @001, :0).
_PINNED = re.compile(
    r"(?<!\d)(?:19|20)\d{2}-?(?:0[1-9]|1[0-2])-?(?:0[1-9]|[12]\d|3[01])(?!\d)"
    r"|[-_@]\d{3,4}(?=$|[-_:@])"
    r"|(?:[-_@.]v\d+|[@:]\d+)(?:\.\d+)*(?=$|[-_:@])",
    re.IGNORECASE,
)
_LATEST = re.compile(r"(?:^|[-_.:@/])latest(?:$|[-_.:@/])", re.IGNORECASE)


@dataclass(frozen=True)
class FieldCheck:
    """The verdict on one field: ``status`` and a human ``detail`` (why, or a note)."""

    status: Status
    detail: str = ""

    @property
    def ok(self) -> bool:
        """True unless the field is missing or malformed."""
        return self.status in ("ok", "not_applicable")

    def to_json(self) -> dict[str, str]:
        """``{"status", "detail"}``."""
        return {"status": self.status, "detail": self.detail}


@dataclass
class CallsSeen:
    """What the failure check needs of a trace's calls, without their bodies or arguments.

    Attributes:
        tools: call index -> (tool id, error class or None), in file order.
    """

    tools: dict[int, tuple[str, str | None]] = field(default_factory=dict)

    def add(self, call: CallRecord) -> None:
        """Remember ``call``'s index, tool and error class."""
        self.tools[call.index] = (call.tool, call.error.class_ if call.error else None)

    @property
    def last(self) -> int:
        """The last call's index (-1 with no call; indices increase in a readable trace)."""
        return next(reversed(self.tools), -1)

    def missing(self) -> tuple[int, ...]:
        """Indices absent between 0 and the last one (removed call lines)."""
        return tuple(i for i in range(self.last + 1) if i not in self.tools)


_OK = FieldCheck("ok")
_NA = FieldCheck("not_applicable")


def check_body(call: CallRecord, raw_io: bool) -> FieldCheck:
    """Seed field 1: the raw response body, its encoding and truncation bookkeeping."""
    if call.body is None:
        if call.error is not None:
            return FieldCheck("ok", "no body: the recorded error is the response")
        return FieldCheck("missing", "no response body recorded")
    if call.body_encoding is None:
        return FieldCheck("malformed", "body_encoding missing (text or base64)")
    stored = len(call.body.encode("utf-8", "surrogatepass"))
    if call.body_encoding == "base64":
        try:
            stored = len(base64.b64decode(call.body, validate=True))
        except (binascii.Error, ValueError):
            return FieldCheck("malformed", "body is not valid base64")
    if call.truncated:
        if call.original_length is None or call.sha256 is None:
            return FieldCheck(
                "malformed", "truncated without original_length and sha256 of the original"
            )
        if not _SHA256.match(call.sha256):
            return FieldCheck("malformed", "sha256 of the original is not 64 hex digits")
        if call.original_length <= stored:
            return FieldCheck(
                "malformed",
                f"original_length {call.original_length} is not "
                f"longer than the {stored} bytes kept",
            )
    elif call.original_length is not None or call.sha256 is not None:
        return FieldCheck("malformed", "original_length/sha256 without truncated: true")
    if call.is_provider_call and not raw_io:
        return FieldCheck(
            "missing", "raw_io: false: a re-serialised response, not the provider's HTTP body"
        )
    if call.encoding == "repr":
        return FieldCheck(
            "missing",
            "encoding: repr: the tool's value had no JSON form; its repr text was recorded "
            "and replay serves that text, not the value",
        )
    notes = [f"truncated: {stored} of {call.original_length} bytes kept"] if call.truncated else []
    if call.encoding == "json_form":
        notes.append("encoding: json_form (the value's model_dump / dataclass fields)")
    return FieldCheck("ok", "; ".join(notes))


def _names(tools: object) -> set[str]:
    """Function names of a ``tools`` list (request) or ``tool_calls`` list (a model message)."""
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _called(call: CallRecord) -> set[str]:
    """Names of the tool calls a model turn's body asked for (chat completion or its choice)."""
    if call.body is None or call.body_encoding != "text":
        return set()
    try:
        body = json.loads(call.body)
    except ValueError:
        return set()
    if isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]:
        body = body["choices"][0]
    message = body.get("message") if isinstance(body, dict) else None
    return _names(message.get("tool_calls")) if isinstance(message, dict) else set()


class UnlistedCalls:
    """Finds tool calls the model asked for without its request listing that tool (streaming).

    A tool call answers the latest model turn of its step; when that turn's body asked for the
    tool (by `runner.sdk.function_name` or the id) and its request's ``tools`` did not list it,
    the model was never shown the tool's definition: it is known by name only (an import whose
    source recorded calls, not definitions: the workflow's ``unlisted_tools``). Tool calls
    that no model turn asked for (tool steps, code in record mode) are not judged. Keeps only
    the latest model turn of each step.
    """

    def __init__(self) -> None:
        self._turns: dict[str | None, tuple[set[str], set[str]]] = {}

    def see(self, call: CallRecord) -> bool:
        """Feed the calls in order; True for a tool call of an unlisted tool."""
        if call.tool == "model":
            request = call.request if isinstance(call.request, dict) else {}
            self._turns[call.step_id] = (_names(request.get("tools")), _called(call))
            return False
        if call.is_provider_call or call.step_id not in self._turns:
            return False
        listed, asked = self._turns[call.step_id]
        names = {function_name(call.tool), call.tool}
        return bool(names & asked) and not names & listed


def check_schema_hash(run: RunRecord, call: CallRecord, unlisted: bool = False) -> FieldCheck:
    """Seed field 2: the tool's schema hash at call time (tool calls only).

    ``unlisted``: the model called the tool without being shown its definition
    (`UnlistedCalls`): no schema was in force worth the name, ``missing``.
    """
    if call.is_mcp_protocol_call:
        return FieldCheck("not_applicable", "an MCP protocol request, not a tool")
    if call.is_provider_call:
        return _NA
    if call.schema_hash is None:
        return FieldCheck("missing", "no schema hash recorded for the tool")
    if not _SHA256.match(call.schema_hash):
        return FieldCheck("malformed", "schema_hash is not a sha256 hex digest")
    header = run.environment.tools.get(call.tool)
    if header is not None and header != call.schema_hash:
        return FieldCheck("malformed", "differs from the run line's environment.tools entry")
    if unlisted:
        return FieldCheck(
            "missing",
            f"tool {call.tool!r} is known by name only: the model request before this call "
            "did not list its definition (an import without it: pass --tools)",
        )
    return _OK


def model_id_problem(model_id: str, model_source: str | None = None) -> str | None:
    """Why ``model_id`` does not record which model answered, or None when it does.

    The rule (docs/trace-format.md): ``model_source: "config"`` always counts as an alias; an
    id counts as pinned when it carries a date, a 4-digit MMDD/YYMM group, a 3-digit revision
    or a version tag (``-v2``, ``@001``, ``:0``) and does not say ``latest``.
    """
    if model_source == "config":
        return f"{model_id!r} came from the configuration, not the response (model_source)"
    if not model_id.strip():
        return "empty model id"
    if _LATEST.search(model_id):
        return f"{model_id!r} is a moving alias ('latest')"
    if not _PINNED.search(model_id):
        return (
            f"{model_id!r} looks like a configured alias: no date or version suffix "
            "(e.g. gpt-4.1-2025-04-14)"
        )
    return None


def check_model_id(call: CallRecord) -> FieldCheck:
    """Seed field 3: the model id read from the response (model and user calls only)."""
    if not call.is_provider_call:
        return _NA
    if call.api == "count_tokens" and call.model is None:
        return FieldCheck("not_applicable", "a token count's answer names no model")
    if call.model is None:
        if call.error is not None and call.body is None:
            return FieldCheck("not_applicable", "the call failed with no response")
        return FieldCheck("missing", "no model id from the response")
    problem = model_id_problem(call.model, call.model_source)
    return FieldCheck("missing", problem) if problem else _OK


def check_clock(run: RunRecord, call: CallRecord) -> FieldCheck:
    """Seed field 4: the injected clock's reading at the call."""
    if call.clock is None:
        return FieldCheck("missing", "no clock reading")
    if call.clock < run.clock.start:
        return FieldCheck(
            "malformed",
            f"reading {call.clock} is before the run's clock start {run.clock.start}",
        )
    return _OK


def check_failure_signature(end: EndRecord | None, calls: CallsSeen) -> FieldCheck:
    """Seed field 5 (per trace): the failure signature of an episode that did not succeed.

    It must be present, and equal `runner.trace.format.failure_signature` of the end line's
    ``failure``, whose fields must agree with the status and with the call they name.
    """
    if end is None:
        return FieldCheck("missing", "no end line")
    if end.status == "succeeded":
        if end.failure is not None or end.failure_signature is not None:
            return FieldCheck("malformed", "a succeeded episode has no failure or signature")
        return FieldCheck("not_applicable", "succeeded")
    if end.failure_signature is None:
        return FieldCheck("missing", f"{end.status} episode without failure_signature")
    if end.failure is None:
        return FieldCheck("malformed", "failure_signature without the failure fields it hashes")
    if not _SHA256.match(end.failure_signature):
        return FieldCheck("malformed", "failure_signature is not a sha256 hex digest")
    problem = _failure_problem(calls, end)
    if problem:
        return FieldCheck("malformed", problem)
    f = end.failure
    expected = failure_signature(f.call_index, f.tool, f.error_class, f.exit_code)
    if end.failure_signature != expected:
        return FieldCheck(
            "malformed",
            "does not match sha256 of [call_index, tool, "
            f"error_class, exit_code] = {expected[:12]}…",
        )
    return _OK


def _failure_problem(calls: CallsSeen, end: EndRecord) -> str | None:
    failure = end.failure
    assert failure is not None
    want = episode_exit_code(end.status)
    if failure.exit_code != want:
        return f"failure.exit_code {failure.exit_code} is not {want}, the code of {end.status!r}"
    last = calls.last
    if failure.tool == "workflow":
        if failure.call_index != last:
            return f"failure.call_index {failure.call_index} is not the last call index {last}"
        return None
    index = failure.call_index
    seen = calls.tools.get(index)
    if seen is None:
        return f"failure.call_index {index} names no call of the trace"
    tool, error_class = seen
    if tool != failure.tool:
        return f"failure.tool {failure.tool!r} is not call {index}'s tool {tool!r}"
    if error_class is not None and error_class != failure.error_class:
        return (
            f"failure.error_class {failure.error_class!r} is not call {index}'s "
            f"error class {error_class!r}"
        )
    return None
