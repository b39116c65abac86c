"""``lint``: which of the first seed's five fields a trace holds, per call and per trace.

The five fields (SPEC.md, docs/trace-format.md): the raw response ``body``, the ``schema_hash``
in force at call time (tool calls), the ``model`` id from the response metadata (model and user
calls), the ``clock`` reading, and the episode's ``failure_signature``. Each is judged ``ok``,
``missing``, ``malformed`` or ``not_applicable``; the rules are in docs/trace-format.md
("What lint checks") and in the functions below, one per field.

Invariants:
- lint never raises on a bad trace: an unreadable one becomes a `TraceLint` with ``errors``
  (file, line, field) and exit code 2; a cut-off last line or a missing end line is reported
  as an error while every call before it is still linted;
- a trace's exit code is 2 (unreadable), 1 (a field missing or malformed, or call lines
  missing) or 0 (complete); several traces combine with `runner.errors.worst_exit_code`.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runner.domain.trace import CallRecord, EndRecord, Trace, TraceVersionError, read_trace
from runner.errors import EXIT_INPUT, EXIT_NEGATIVE, EXIT_OK, InputError, worst_exit_code
from runner.traceformat import episode_exit_code, failure_signature

__all__ = [
    "CALL_FIELDS",
    "CallLint",
    "FieldCheck",
    "LintError",
    "TraceLint",
    "expand_trace_paths",
    "lint_trace",
    "lint_traces",
    "model_id_problem",
]

Status = Literal["ok", "missing", "malformed", "not_applicable"]
CALL_FIELDS = ("body", "schema_hash", "model_id", "clock")
"""The per-call seed fields, in report order; ``failure_signature`` is per trace."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
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


_OK = FieldCheck("ok")
_NA = FieldCheck("not_applicable")


@dataclass(frozen=True)
class LintError:
    """Something that made (part of) a trace unreadable: where, and what."""

    file: str
    line: int | None
    field: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        """``{"file", "line", "field", "message"}``."""
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class CallLint:
    """The per-call verdicts.

    Attributes:
        index, line, tool: the call and the trace line it is on.
        kind: ``tool``, ``model`` or ``user``.
        raw_io: True when the body is raw I/O (an HTTP body), False for a tool-level value.
        truncated: the stored body is a recorded truncation of the original.
        fields: field name (`CALL_FIELDS`) -> `FieldCheck`.
    """

    index: int
    line: int
    tool: str
    kind: Literal["tool", "model", "user"]
    raw_io: bool
    truncated: bool
    fields: dict[str, FieldCheck]

    @property
    def complete(self) -> bool:
        """True when no field is missing or malformed."""
        return all(check.ok for check in self.fields.values())

    def to_json(self) -> dict[str, Any]:
        """The call's verdicts as a JSON object."""
        return {
            "index": self.index,
            "line": self.line,
            "tool": self.tool,
            "kind": self.kind,
            "raw_io": self.raw_io,
            "truncated": self.truncated,
            "complete": self.complete,
            "fields": {name: check.to_json() for name, check in self.fields.items()},
        }


@dataclass(frozen=True)
class TraceLint:
    """The lint of one trace file.

    Attributes:
        file: the path as given.
        errors: why (part of) the trace could not be read; non-empty means exit code 2.
        calls: per-call verdicts of every call that could be read.
        failure_signature: the per-trace verdict (missing when the end line is).
        missing_indices: call indices with no call line (a removed call).
        run_id, status: from the run and end lines, when read.
    """

    file: str
    errors: tuple[LintError, ...] = ()
    calls: tuple[CallLint, ...] = ()
    failure_signature: FieldCheck = field(
        default_factory=lambda: FieldCheck("missing", "trace unreadable")
    )
    missing_indices: tuple[int, ...] = ()
    run_id: str | None = None
    status: str | None = None

    @property
    def complete(self) -> bool:
        """True when readable, every field present and well-formed, and no call line missing."""
        return (
            not self.errors
            and self.failure_signature.ok
            and not self.missing_indices
            and all(call.complete for call in self.calls)
        )

    @property
    def exit_code(self) -> int:
        """2 unreadable, 1 incomplete, 0 complete."""
        if self.errors:
            return EXIT_INPUT
        return EXIT_OK if self.complete else EXIT_NEGATIVE

    def summary(self) -> dict[str, Any]:
        """Counts of calls, raw-I/O and tool-level bodies, incomplete calls, per-field problems.

        Returns:
            ``{"calls", "raw_io", "tool_level", "incomplete_calls",
            "fields": {field: {"missing": n, "malformed": n}}}``.
        """
        per_field = {
            name: {
                status: sum(1 for c in self.calls if c.fields[name].status == status)
                for status in ("missing", "malformed")
            }
            for name in CALL_FIELDS
        }
        return {
            "calls": len(self.calls),
            "raw_io": sum(c.raw_io for c in self.calls),
            "tool_level": sum(not c.raw_io for c in self.calls),
            "incomplete_calls": sum(not c.complete for c in self.calls),
            "fields": per_field,
        }

    def to_json(self) -> dict[str, Any]:
        """The trace's lint as a JSON object (the ``--json`` shape, docs/trace-format.md)."""
        return {
            "file": self.file,
            "exit_code": self.exit_code,
            "complete": self.complete,
            "run_id": self.run_id,
            "status": self.status,
            "errors": [e.to_json() for e in self.errors],
            "failure_signature": self.failure_signature.to_json(),
            "missing_call_indices": list(self.missing_indices),
            "summary": self.summary(),
            "calls": [c.to_json() for c in self.calls],
        }


def expand_trace_paths(paths: list[Path]) -> list[Path]:
    """Files as given; a folder becomes its ``*.jsonl`` files, sorted by name."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.glob("*.jsonl") if p.is_file()))
        else:
            out.append(path)
    return out


def lint_traces(paths: list[Path]) -> tuple[list[TraceLint], int]:
    """Lint several traces (folders expand to their ``*.jsonl``).

    Returns:
        The per-trace results in order and the worst exit code (SPEC.md order).
    """
    results = []
    for path in paths:
        if path.is_dir() and not expand_trace_paths([path]):
            results.append(
                TraceLint(
                    str(path),
                    errors=(LintError(str(path), None, None, "folder holds no *.jsonl trace"),),
                )
            )
        else:
            results.extend(lint_trace(p) for p in expand_trace_paths([path]))
    return results, worst_exit_code(*(r.exit_code for r in results))


def lint_trace(path: Path | str) -> TraceLint:
    """Lint one trace file; never raises for a bad trace (see `TraceLint.errors`)."""
    name = str(path)
    try:
        trace = read_trace(path)
    except (InputError, TraceVersionError) as exc:
        line = exc.fields.get("line")
        return TraceLint(
            name,
            errors=(
                LintError(
                    exc.fields.get("file", name),
                    line if isinstance(line, int) else None,
                    exc.fields.get("field"),
                    _bare_message(exc),
                ),
            ),
        )
    errors = tuple(LintError(p.file, p.line, p.field, p.message) for p in trace.problems)
    calls = tuple(
        _lint_call(trace, call, line)
        for call, line in zip(trace.calls, trace.call_lines, strict=True)
    )
    return TraceLint(
        name,
        errors=errors,
        calls=calls,
        failure_signature=check_failure_signature(trace),
        missing_indices=trace.missing_indices,
        run_id=trace.run.run_id,
        status=trace.end.status if trace.end else None,
    )


def _bare_message(exc: InputError | TraceVersionError) -> str:
    """The message without the ``file:line: field:`` prefix (the fields carry those)."""
    message = exc.message
    for part in (exc.fields.get("file"), exc.fields.get("line"), exc.fields.get("field")):
        if part is not None:
            prefix = f"{part}:"
            message = message[len(prefix) :].lstrip() if message.startswith(prefix) else message
    return message


def _lint_call(trace: Trace, call: CallRecord, line: int) -> CallLint:
    provider = call.is_provider_call
    # SPEC.md: a model or user call's body is the provider's HTTP body unless the writer says
    # otherwise; a tool's body is its return value unless it used the SDK's HTTP helper.
    raw_io = call.raw_io if call.raw_io is not None else provider
    kind: Literal["tool", "model", "user"] = "tool"
    if provider:
        kind = "model" if call.tool == "model" else "user"
    return CallLint(
        index=call.index,
        line=line,
        tool=call.tool,
        kind=kind,
        raw_io=raw_io,
        truncated=bool(call.truncated),
        fields={
            "body": check_body(call, raw_io),
            "schema_hash": check_schema_hash(trace, call),
            "model_id": check_model_id(call),
            "clock": check_clock(trace, call),
        },
    )


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
    note = f"truncated: {stored} of {call.original_length} bytes kept" if call.truncated else ""
    return FieldCheck("ok", note)


def check_schema_hash(trace: Trace, call: CallRecord) -> FieldCheck:
    """Seed field 2: the tool's schema hash at call time (tool calls only)."""
    if call.is_provider_call:
        return _NA
    if call.schema_hash is None:
        return FieldCheck("missing", "no schema hash recorded for the tool")
    if not _SHA256.match(call.schema_hash):
        return FieldCheck("malformed", "schema_hash is not a sha256 hex digest")
    header = trace.run.environment.tools.get(call.tool)
    if header is not None and header != call.schema_hash:
        return FieldCheck("malformed", "differs from the run line's environment.tools entry")
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
    if call.model is None:
        if call.error is not None and call.body is None:
            return FieldCheck("not_applicable", "the call failed with no response")
        return FieldCheck("missing", "no model id from the response")
    problem = model_id_problem(call.model, call.model_source)
    return FieldCheck("missing", problem) if problem else _OK


def check_clock(trace: Trace, call: CallRecord) -> FieldCheck:
    """Seed field 4: the injected clock's reading at the call."""
    if call.clock is None:
        return FieldCheck("missing", "no clock reading")
    if call.clock < trace.run.clock.start:
        return FieldCheck(
            "malformed",
            f"reading {call.clock} is before the run's clock start {trace.run.clock.start}",
        )
    return _OK


def check_failure_signature(trace: Trace) -> FieldCheck:
    """Seed field 5 (per trace): the failure signature of an episode that did not succeed.

    It must be present, and equal `runner.traceformat.failure_signature` of the end line's
    ``failure``, whose fields must agree with the status and with the call they name.
    """
    end = trace.end
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
    problem = _failure_problem(trace, end)
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


def _failure_problem(trace: Trace, end: EndRecord) -> str | None:
    failure = end.failure
    assert failure is not None
    want = episode_exit_code(end.status)
    if failure.exit_code != want:
        return f"failure.exit_code {failure.exit_code} is not {want}, the code of {end.status!r}"
    last = trace.calls[-1].index if trace.calls else -1
    if failure.tool == "workflow":
        if failure.call_index != last:
            return f"failure.call_index {failure.call_index} is not the last call index {last}"
        return None
    call = trace.call(failure.call_index)
    if call is None:
        return f"failure.call_index {failure.call_index} names no call of the trace"
    if call.tool != failure.tool:
        return f"failure.tool {failure.tool!r} is not call {call.index}'s tool {call.tool!r}"
    if call.error is not None and call.error.class_ != failure.error_class:
        return (
            f"failure.error_class {failure.error_class!r} is not call {call.index}'s "
            f"error class {call.error.class_!r}"
        )
    return None
