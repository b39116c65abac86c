"""One line of a trace: strict decoding, the version and type head, the record's model.

`runner.tracetools.reader` applies these to every line and adds the file-level rules (order,
indices, the end line, recoverable defects); a writer or importer checks a line it writes with
`validate_record`. Every error names the file, the 1-based line and the field.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from runner.errors import InputError, ReplayRefused
from runner.trace.format import TRACE_VERSION
from runner.trace.strictjson import StrictJSONError
from runner.trace.strictjson import loads as strict_loads
from runner.tracetools.records import MODELS, CallRecord, EndRecord, Record, RunRecord

__all__ = [
    "TraceVersionError",
    "UnparsableLine",
    "check_head",
    "parse_line",
    "validate_line",
    "validate_record",
]


class TraceVersionError(ReplayRefused):
    """A trace line carries a format version this reader does not know (reproduce: refused).

    Attributes:
        version: the ``v`` found on the line.
    """

    def __init__(self, version: int, *, file: str, line: int) -> None:
        super().__init__(
            f"{file}:{line}: v: trace format version {version} is not supported (this reader "
            f"knows version {TRACE_VERSION}); use a sandbox-replay that knows it",
            file=file,
            line=line,
            field="v",
        )
        self.version = version


class UnparsableLine(Exception):
    """A line that is not one JSON object; ``field`` names a duplicated key."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.field = field


def parse_line(data: bytes) -> dict[str, Any]:
    """One line (no newline) as a JSON object, by the one strict decoder.

    Raises:
        UnparsableLine: empty, not UTF-8, not strict JSON, or not an object.
    """
    if not data.strip():
        raise UnparsableLine("empty line: every line of a trace is one JSON object")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnparsableLine(
            f"not UTF-8 text (byte {exc.start} of the line); binary bodies are stored as base64"
        ) from None
    try:
        value = strict_loads(data)
    except StrictJSONError as exc:  # too deep, NaN/Infinity, duplicate key, not JSON
        raise UnparsableLine(exc.reason, field=exc.field) from None
    if not isinstance(value, dict):
        raise UnparsableLine(f"a trace line must be a JSON object, not {type(value).__name__}")
    return value


def validate_record(
    obj: dict[str, Any], *, file: str = "<trace>", line: int = 1
) -> RunRecord | CallRecord | EndRecord:
    """Validate one decoded trace line (a writer or importer can check what it writes).

    Only the line's own rules apply; the file-level ones (order, indices) are `read_trace`'s.

    Raises:
        InputError: the line breaks the format (``file``, ``line`` and the field named).
        TraceVersionError: an unknown ``v``.
    """
    record = validate_line(obj, check_head(obj, file, line), file, line)
    assert isinstance(record, RunRecord | CallRecord | EndRecord)
    return record


def check_head(obj: dict[str, Any], file: str, line: int) -> str:
    """The line's ``type`` once its ``v`` is this reader's version.

    Raises:
        InputError: ``v`` or ``type`` missing or malformed.
        TraceVersionError: an unknown ``v``.
    """
    if "v" not in obj:
        raise InputError(
            "missing: every trace line carries the format version", file=file, line=line, field="v"
        )
    version = obj["v"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(
            f"must be an integer version, not {version!r}"[:200], file=file, line=line, field="v"
        )
    if version != TRACE_VERSION:
        raise TraceVersionError(version, file=file, line=line)
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in MODELS:
        shown = "missing" if "type" not in obj else f"{kind!r} is not one of run, call, end"
        raise InputError(shown[:200], file=file, line=line, field="type")
    return kind


def validate_line(obj: dict[str, Any], kind: str, file: str, line: int) -> Record:
    """The record of a decoded line of type ``kind``.

    Raises:
        InputError: the line breaks its model (the field named).
    """
    try:
        return MODELS[kind].model_validate(obj)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = _field_path(err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if message.startswith("[") and "] " in message:  # a cross-field rule names its key
            key, message = message[1:].split("] ", 1)
            field = key
        elif err["type"] == "extra_forbidden":
            message = f"unknown key on a {kind} line (trace format v{TRACE_VERSION})"
        elif err["type"] == "missing":
            message = f"missing (required on a {kind} line)"
        raise InputError(message, file=file, line=line, field=field or None) from None


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (key)"
        else:
            path += ("." if path else "") + part
    return path
