"""The host-side trace reader: a JSONL trace file → typed, frozen records, or a precise error.

The format is docs/trace-format.md and docs/trace.schema.json (version `TRACE_VERSION`); the
shared rules (statuses, signature, bodies) are in `runner.trace.format`.

Invariants:
- a line that the reader accepts validates against docs/trace.schema.json and the other way
  round (tests/unit/trace/test_trace_schema.py holds the two together); the five seed fields are
  optional here: the reader says whether a trace is *readable*, `lint` whether it is *complete*;
- every error names the file, the 1-based line and the field (`InputError`); an unknown ``v``
  is a `TraceVersionError` (a `ReplayRefused`: reproduce reports ``refused``);
- line 1 is the ``run`` line, then ``call`` lines with strictly increasing ``index``, then one
  ``end`` line and nothing after it; unknown keys, duplicate keys, NaN/Infinity, nesting deeper
  than `runner.trace.strictjson.MAX_DEPTH` and non-UTF-8 are errors (lines are decoded by the one
  strict decoder, `runner.trace.strictjson`, files opened by the one bounded reader,
  `runner.inputfile`: a FIFO or a device is refused, a file over 1 GiB too);
- `TraceLines` reads a trace record by record under the same rules, for readers that
  summarise it without holding its calls (``lint``); `read_trace` is built on it;
- a turn's history by reference (``messages_from``: the first ``count`` request messages of
  an earlier call of the same role) is checked by `TraceLines` (the call exists, is earlier,
  of the same role, and has that many messages; at most `MAX_RESOLVED_MESSAGES` messages per
  trace in all) and resolved by `read_trace`: its records hold whole requests, whose
  messages share the objects of the call they continue (memory grows with the pointers,
  not the text);
- two defects are *recoverable*: a cut-off last line (no newline, not valid JSON) and a missing
  ``end`` line. `read_trace` returns them as `Trace.problems` with everything before them
  parsed; `load_trace` raises the first one;
- no input crashes the reader: a line longer than ``max_line_bytes`` is an error naming it and
  is never held in memory whole; binary bytes are reported, not decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from runner.errors import InputError
from runner.inputfile import open_input
from runner.trace.strictjson import MAX_DEPTH
from runner.tracetools.foreign import foreign_hint
from runner.tracetools.lines import (
    TraceVersionError,
    UnparsableLine,
    check_head,
    parse_line,
    validate_line,
    validate_record,
)
from runner.tracetools.records import (
    PROVIDER_ROLES,
    CallError,
    CallRecord,
    EndRecord,
    Failure,
    Record,
    RunRecord,
)

HINT_BYTES = 65536  # of a first line that did not decode, read to recognise another tool's file

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "NO_RESPONSE",
    "PROVIDER_ROLES",
    "CallError",
    "CallRecord",
    "EndRecord",
    "Failure",
    "RunRecord",
    "Trace",
    "TraceLines",
    "TraceProblem",
    "TraceVersionError",
    "load_trace",
    "read_trace",
    "read_trace_stream",
    "validate_record",
]

MAX_RESOLVED_MESSAGES = 50_000_000
"""Messages that a trace's resolved requests may hold in all (pointers, 8 bytes each): bounds
what a small hostile trace of references can make `read_trace` allocate."""

# A call line crosses the sandbox channel (at most 16 MiB, runner.wire.protocol) plus a few
# host-side fields; four times that leaves room and still bounds memory.
MAX_LINE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class TraceProblem:
    """A recoverable defect: ``truncated_line`` (cut-off last line) or ``missing_end``."""

    kind: Literal["truncated_line", "missing_end"]
    file: str
    line: int
    message: str
    field: str | None = None

    def to_error(self) -> InputError:
        """The defect as the `InputError` `load_trace` raises."""
        return InputError(self.message, file=self.file, line=self.line, field=self.field)


NO_RESPONSE = (
    "call #{index} ({tool}) has no response at all (missing fields: body, error; e.g. the"
    " source did not capture the result): it cannot be served"
)


@dataclass(frozen=True)
class Trace:
    """A parsed trace.

    Attributes:
        file: the name the trace was read as.
        run: the run line; ``calls`` the call lines in order, ``call_lines`` their line numbers.
        end: the end line (None when missing, see ``problems``); ``end_line`` its number.
        problems: recoverable defects (empty for a whole trace).
    """

    file: str
    run: RunRecord
    calls: tuple[CallRecord, ...]
    call_lines: tuple[int, ...]
    end: EndRecord | None
    end_line: int | None
    problems: tuple[TraceProblem, ...] = ()

    @property
    def missing_indices(self) -> tuple[int, ...]:
        """Call indices absent between 0 and the last call's index (removed call lines)."""
        seen = {call.index for call in self.calls}
        last = self.calls[-1].index if self.calls else -1
        return tuple(i for i in range(last + 1) if i not in seen)

    def call(self, index: int) -> CallRecord | None:
        """The call with ``index``, or None."""
        return next((c for c in self.calls if c.index == index), None)

    def unanswered(self) -> list[tuple[int, CallRecord]]:
        """``(line, call)`` of each call recorded with no response at all: no body, no error.

        No command can serve one: ``reproduce`` refuses the trace (`NO_RESPONSE`), ``tasks
        extract`` refuses to make it an observation, ``lint`` reports its body missing.
        """
        return [
            (line, call)
            for line, call in zip(self.call_lines, self.calls, strict=True)
            if call.body is None and call.error is None
        ]

    def require_complete(self) -> Trace:
        """Return self when it has no `problems`.

        Raises:
            InputError: the first problem, naming file and line.
        """
        if self.problems:
            raise self.problems[0].to_error()
        return self


def load_trace(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Trace:
    """Read a whole trace strictly: a cut-off last line or a missing end line is an error.

    Raises:
        InputError: unreadable file or any malformed line (file, line, field named).
        TraceVersionError: a line with an unknown ``v``.
    """
    return read_trace(path, max_line_bytes=max_line_bytes).require_complete()


def read_trace(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Trace:
    """Read a trace file; a cut-off last line or missing end line become `Trace.problems`.

    Args:
        path: the JSONL file.
        max_line_bytes: longest line accepted, in bytes (without the newline).

    Raises:
        InputError: missing or unreadable file, or a malformed line (file, line, field named).
        TraceVersionError: a line with an unknown ``v``.
    """
    name = str(path)
    stream = open_input(path, "trace")  # regular files only, at most LIMITS["trace"] bytes
    with stream:
        try:
            return read_trace_stream(stream, file=name, max_line_bytes=max_line_bytes)
        except OSError as exc:
            raise InputError(f"cannot read the trace: {exc.strerror or exc}", file=name) from exc


def read_trace_stream(
    stream: BinaryIO, *, file: str, max_line_bytes: int = MAX_LINE_BYTES
) -> Trace:
    """Read a trace from a binary stream (a file, a member of a reviewer packet).

    Args:
        stream: bytes of the JSONL trace.
        file: the name to put in errors.
        max_line_bytes: longest line accepted, in bytes.

    Raises:
        InputError: a malformed line or structure (file, line, field named).
        TraceVersionError: a line with an unknown ``v``.
    """
    lines = TraceLines(stream, file=file, max_line_bytes=max_line_bytes)
    calls: list[CallRecord] = []
    call_lines: list[int] = []
    resolved: dict[int, list[Any]] = {}
    for lineno, record in lines:
        if isinstance(record, CallRecord):
            if record.is_provider_call and record.request is not None:
                record = _resolve(record, resolved)
            calls.append(record)
            call_lines.append(lineno)
    assert lines.run is not None  # iteration raises when there is none
    return Trace(
        file,
        lines.run,
        tuple(calls),
        tuple(call_lines),
        lines.end,
        lines.end_line,
        tuple(lines.problems),
    )


def _resolve(record: CallRecord, resolved: dict[int, list[Any]]) -> CallRecord:
    """``record`` with its request whole: a history by reference becomes the messages.

    `TraceLines` has checked the reference; the prefix's message objects are shared.
    """
    assert record.request is not None
    own = record.request.get("messages")
    own_list = own if isinstance(own, list) else []
    ref = record.messages_from
    if ref is None:
        resolved[record.index] = own_list
        return record
    messages = resolved[ref.call][: ref.count] + own_list
    resolved[record.index] = messages
    request = {**record.request, "messages": messages}
    whole = record.model_copy(update={"request": request, "messages_from": None})
    whole.__pydantic_fields_set__.discard("messages_from")  # to_json: as if written whole
    return whole


class TraceLines:
    """The records of a trace one at a time, with every rule of `read_trace_stream`.

    For readers that summarise a trace (``lint``) and must not hold its calls (bodies up to
    1 MiB each) in memory: iterate to get ``(line number, record)`` in file order; the run line
    comes first. After the iteration, `run`, `end`, `end_line`, `problems` and `calls` (the
    number of call lines) describe the whole trace. Iterate once.

    Args:
        stream: bytes of the JSONL trace.
        file: the name to put in errors.
        max_line_bytes: longest line accepted, in bytes.

    Raises:
        InputError: (while iterating) a malformed line or structure (file, line, field).
        TraceVersionError: (while iterating) a line with an unknown ``v``.
    """

    def __init__(
        self, stream: BinaryIO, *, file: str, max_line_bytes: int = MAX_LINE_BYTES
    ) -> None:
        self.stream = stream
        self.file = file
        self.max_line_bytes = max_line_bytes
        self.run: RunRecord | None = None
        self.end: EndRecord | None = None
        self.end_line: int | None = None
        self.problems: list[TraceProblem] = []
        self.calls = 0
        self.last_index: int | None = None
        self._last_call_line = 0
        self._messages: dict[int, tuple[str, int]] = {}  # provider call -> (role, messages)
        self._resolved_total = 0

    def __iter__(self) -> Iterator[tuple[int, Record]]:
        file, max_line_bytes = self.file, self.max_line_bytes
        lineno = 0
        while True:
            raw = self.stream.readline(max_line_bytes + 1)
            if not raw:
                break
            lineno += 1
            has_newline = raw.endswith(b"\n")
            if not has_newline and len(raw) > max_line_bytes:
                raise InputError(
                    f"line is longer than {max_line_bytes} bytes (the reader's limit); not read",
                    file=file,
                    line=lineno,
                )
            if self.end is not None:
                raise InputError("a line after the end line", file=file, line=lineno)
            try:
                obj = parse_line(raw.rstrip(b"\n").removesuffix(b"\r"))
            except UnparsableLine as exc:
                if has_newline or self.run is None:  # without a newline: the last line
                    hint = (
                        foreign_hint(file, head=raw + self.stream.read(HINT_BYTES))
                        if lineno == 1
                        else None
                    )
                    message = f"{exc}; {hint}" if hint else str(exc)
                    raise InputError(message, file=file, line=lineno, field=exc.field) from None
                self.problems.append(
                    TraceProblem(
                        "truncated_line", file, lineno, f"last line is cut off (no newline): {exc}"
                    )
                )
                break
            try:
                kind = check_head(obj, file, lineno)
            except InputError as exc:
                hint = foreign_hint(file, obj=obj) if lineno == 1 and "v" not in obj else None
                if hint is None:
                    raise
                raise InputError(
                    f"missing: every trace line carries the format version; {hint}",
                    file=file,
                    line=lineno,
                    field="v",
                ) from exc
            if lineno == 1 and kind != "run":
                raise InputError(
                    f"the first line must be the run line, not {kind!r}",
                    file=file,
                    line=lineno,
                    field="type",
                )
            if lineno > 1 and kind == "run":
                raise InputError("a second run line", file=file, line=lineno, field="type")
            record = validate_line(obj, kind, file, lineno)
            if isinstance(record, RunRecord):
                self.run = record
            elif isinstance(record, CallRecord):
                self._check_order(record, lineno)
                if record.is_provider_call:
                    self._check_history(record, lineno)
            elif isinstance(record, EndRecord):
                self.end, self.end_line = record, lineno
            yield lineno, record
        if self.run is None:
            raise InputError("empty trace: no run line", file=file, line=1)
        if self.end is None:
            after = f"after line {lineno}" if not self.problems else "before the cut-off line"
            self.problems.append(
                TraceProblem(
                    "missing_end",
                    file,
                    lineno + (0 if self.problems else 1),
                    f"no end line: the trace stops {after}",
                    field="type",
                )
            )

    def _check_history(self, record: CallRecord, lineno: int) -> None:
        """Check a turn's ``messages_from`` and note how many messages its request has."""
        request = record.request or {}
        own = request.get("messages")
        count = len(own) if isinstance(own, list) else 0
        ref = record.messages_from
        if ref is not None:
            earlier = self._messages.get(ref.call)
            problem = None
            if earlier is None:
                problem = f"names call {ref.call}, which is no earlier model or user call"
            elif earlier[0] != record.tool:
                problem = f"names call {ref.call}, a {earlier[0]} turn, not a {record.tool} turn"
            elif ref.count > earlier[1]:
                problem = (
                    f"takes {ref.count} messages of call {ref.call}, whose request has {earlier[1]}"
                )
            if problem is not None:
                raise InputError(problem, file=self.file, line=lineno, field="messages_from")
            count += ref.count
            self._resolved_total += count
            if self._resolved_total > MAX_RESOLVED_MESSAGES:
                raise InputError(
                    f"the requests' history references resolve to more than "
                    f"{MAX_RESOLVED_MESSAGES} messages in all: not read",
                    file=self.file,
                    line=lineno,
                    field="messages_from",
                )
        self._messages[record.index] = (record.tool, count)

    def _check_order(self, record: CallRecord, lineno: int) -> None:
        last = self.last_index
        if last is not None and record.index <= last:
            rule = "duplicates" if record.index == last else "goes back from"
            raise InputError(
                f"call index {record.index} {rule} index {last} of line "
                f"{self._last_call_line}: indices must strictly increase",
                file=self.file,
                line=lineno,
                field="index",
            )
        self.last_index, self._last_call_line = record.index, lineno
        self.calls += 1
