"""``lint``: which of the first seed's five fields a trace holds, per call and per trace.

The five fields (SPEC.md, docs/trace-format.md): the raw response ``body``, the ``schema_hash``
in force at call time (tool calls), the ``model`` id from the response metadata (model and user
calls), the ``clock`` reading, and the episode's ``failure_signature``. Each is judged ``ok``,
``missing``, ``malformed`` or ``not_applicable`` by the rules of docs/trace-format.md, one
function per field in `runner.tracetools.lint_rules`.

Invariants:
- lint never raises on a bad trace: an unreadable one becomes a `TraceLint` with ``errors``
  (file, line, field) and exit code 2; a cut-off last line or a missing end line is reported
  as an error while every call before it is still linted;
- a trace's exit code is 2 (unreadable), 1 (a field missing or malformed, or call lines
  missing) or 0 (complete); several traces combine with `runner.errors.worst_exit_code`;
- a trace is read line by line (`runner.tracetools.reader.TraceLines`): each call is linted as it is
  read and only its verdicts are kept, never its body or arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runner.errors import EXIT_INPUT, EXIT_NEGATIVE, EXIT_OK, InputError, worst_exit_code
from runner.inputfile import open_input
from runner.tracetools.lint_rules import (
    CallsSeen,
    FieldCheck,
    UnlistedCalls,
    check_body,
    check_clock,
    check_failure_signature,
    check_model_id,
    check_schema_hash,
    model_id_problem,
)
from runner.tracetools.reader import (
    CallRecord,
    EndRecord,
    RunRecord,
    Trace,
    TraceLines,
    TraceVersionError,
    load_trace,
)

__all__ = [
    "CALL_FIELDS",
    "CallLint",
    "FieldCheck",
    "LintError",
    "TraceLint",
    "expand_trace_paths",
    "lint_trace",
    "lint_traces",
    "load_well_formed_trace",
    "model_id_problem",
]

CALL_FIELDS = ("body", "schema_hash", "model_id", "clock")
"""The per-call seed fields, in report order; ``failure_signature`` is per trace."""


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
        redactions: the values the writer redacted, in line order: ``{line,
            index, field, rule, length, placeholder}`` (``index`` None on the run and end
            lines); never a value.
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
    redactions: tuple[dict[str, Any], ...] = ()

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
            "redactions": len(self.redactions),
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
            "redactions": list(self.redactions),
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
    calls: list[CallLint] = []
    seen = CallsSeen()
    unlisted = UnlistedCalls()
    redactions: list[dict[str, Any]] = []
    try:
        with open_input(path, "trace") as stream:  # regular files only, size-limited
            lines = TraceLines(stream, file=name)
            for number, record in lines:
                index = record.index if isinstance(record, CallRecord) else None
                redactions += [
                    {"line": number, "index": index, **r.to_json()}
                    for r in (record.redactions if isinstance(record, _LINES) else None) or ()
                ]
                if isinstance(record, CallRecord):
                    assert lines.run is not None  # the run line comes first
                    calls.append(_lint_call(lines.run, record, number, unlisted.see(record)))
                    seen.add(record)
    except OSError as exc:  # while reading (the bounded reader names a missing file itself)
        message = f"cannot read the trace: {exc.strerror or exc}"
        return TraceLint(name, errors=(LintError(name, None, None, message),))
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
    assert lines.run is not None
    errors = tuple(LintError(p.file, p.line, p.field, p.message) for p in lines.problems)
    return TraceLint(
        name,
        errors=errors,
        calls=tuple(calls),
        failure_signature=check_failure_signature(lines.end, seen),
        missing_indices=seen.missing(),
        run_id=lines.run.run_id,
        status=lines.end.status if lines.end else None,
        redactions=tuple(redactions),
    )


_LINES = (RunRecord, CallRecord, EndRecord)  # each may carry ``redactions``

# lint's field names -> the trace keys they judge
_TRACE_KEY = {"body": "body", "schema_hash": "schema_hash", "model_id": "model", "clock": "clock"}


def load_well_formed_trace(path: Path | str) -> Trace:
    """Read a trace that a command hands on (``packet``, ``tasks extract``), as lint judges it.

    The same reader (`runner.tracetools.reader.load_trace`: whole, strictly decoded) and the same
    field rules as `lint_trace`: whatever lint reports as unreadable or *malformed* is invalid
    input here. Fields lint reports as merely *missing* are no error: a packet or a task of an
    incomplete trace is still useful, and ``reproduce`` says what it lacks. An unknown ``v``
    is invalid input too (exit 2): these commands replay nothing, so there is nothing to refuse.

    Raises:
        InputError: unreadable or incomplete, an unknown ``v``, or a malformed field (file,
            line and field named, with lint's reason).
    """
    name = str(path)
    try:
        trace = load_trace(path)
    except TraceVersionError as exc:
        raise InputError(
            _bare_message(exc),
            file=exc.fields.get("file", name),
            line=exc.fields.get("line"),
            field="v",
        ) from None
    report = lint_trace(path)  # the same rules, on a second (streaming) read
    for call in report.calls:
        for field_name, check in call.fields.items():
            if check.status == "malformed":
                raise InputError(
                    f"call {call.index} ({call.tool}) is malformed: {check.detail} (as "
                    "`sandbox-replay lint` reports)",
                    file=name,
                    line=call.line,
                    field=_TRACE_KEY[field_name],
                )
    if report.failure_signature.status == "malformed":
        raise InputError(
            f"the end line is malformed: {report.failure_signature.detail} (as "
            "`sandbox-replay lint` reports)",
            file=name,
            line=trace.end_line,
            field="failure_signature",
        )
    return trace


def _bare_message(exc: InputError | TraceVersionError) -> str:
    """The message without the ``file:line: field:`` prefix (the fields carry those)."""
    message = exc.message
    for part in (exc.fields.get("file"), exc.fields.get("line"), exc.fields.get("field")):
        if part is not None:
            prefix = f"{part}:"
            message = message[len(prefix) :].lstrip() if message.startswith(prefix) else message
    return message


def _lint_call(run: RunRecord, call: CallRecord, line: int, unlisted: bool) -> CallLint:
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
            "schema_hash": check_schema_hash(run, call, unlisted),
            "model_id": check_model_id(call),
            "clock": check_clock(run, call),
        },
    )
