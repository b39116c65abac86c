r"""Write one episode as a JSONL trace: ``run`` header, ``call`` lines, ``end`` line.

Shapes are those of docs/internals.md ("Trace lines") and SPEC.md ("Trace (episode) format");
``"v"`` is `runner.trace.format.TRACE_VERSION` on every line.

Invariants:
- the writer never crashes on payloads: lone surrogates are written as JSON ``\udcxx``
  escapes (the file is ASCII, `json.loads` gives back the same string), ``bytes`` become
  ``{"$bytes": base64}``, NaN/infinities become strings, anything else its ``repr``;
- a call body of ``body_encoding: text`` that is not valid UTF-8 (lone surrogates) is
  re-encoded with `runner.trace.format.encode_body` (base64 of the exact bytes), and bodies over
  `runner.trace.format.MAX_BODY_BYTES` are truncated with length and sha256 kept;
- each line is flushed when written, so a crash of the host leaves a readable prefix;
- with a ``redactor`` (`runner.trace.redact`), every line is redacted before it is written,
  a call's body before it is cut (so a cut body's sha256 is of the redacted body);
- with ``max_bytes``, a ``call`` line that would make the file longer than that is not written
  (`TraceFull`): the header and the ``end`` line are always written, so a cut trace still
  ends (the episode ends ``limit_exceeded``, `runner.episode.state`).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from runner.trace.format import MAX_BODY_BYTES, TRACE_VERSION, encode_body, tool_errors
from runner.trace.redact import Redactor

_BODY_FIELDS = ("body", "body_encoding", "truncated", "original_length", "sha256")


def jsonable(value: Any, _depth: int = 0) -> Any:
    """Return ``value`` as something `json.dumps` accepts, losing nothing recoverable.

    Strings are kept as they are (lone surrogates included); ``bytes`` become
    ``{"$bytes": base64}``; non-finite floats become ``"NaN"``/``"Infinity"``/``"-Infinity"``;
    tuples and sets become lists; non-string keys become their ``str``; other objects their
    ``repr``. Nesting deeper than 200 levels is cut to a ``repr`` marker.
    """
    if _depth > 200:
        return "<nested too deep>"
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {
            (k if isinstance(k, str) else str(k)): jsonable(v, _depth + 1) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, _depth + 1) for v in value]
    return repr(value)


def dumps_line(record: Mapping[str, Any]) -> str:
    """Return one trace line (ASCII JSON and a newline) for ``record``; never raises."""
    return json.dumps(jsonable(record), ensure_ascii=True, separators=(",", ":")) + "\n"


def normalise_body(record: dict[str, Any]) -> dict[str, Any]:
    """Make a call record's body fields obey the body rules (valid text or base64, capped).

    A ``text`` body holding lone surrogates becomes base64 of its exact bytes; a body over
    `MAX_BODY_BYTES` is cut with ``truncated``, ``original_length`` and ``sha256``; a body
    the runtime already cut keeps the runtime's length and hash (they describe the original).
    """
    body = record.get("body")
    if body is None:
        return record
    encoding = record.get("body_encoding", "text")
    if isinstance(body, str) and encoding == "base64":
        return record
    if isinstance(body, str) and encoding == "text":
        try:
            if len(body.encode("utf-8")) <= MAX_BODY_BYTES:
                return record
        except UnicodeEncodeError:
            pass
        fields = encode_body(body)
    else:  # not a string, or an unknown encoding: store its JSON text
        fields = encode_body(json.dumps(jsonable(body), ensure_ascii=False))
    out = {k: v for k, v in record.items() if k not in _BODY_FIELDS}
    if record.get("truncated"):
        out.update(
            truncated=True,
            original_length=record.get("original_length"),
            sha256=record.get("sha256"),
        )
        fields = {k: fields[k] for k in ("body", "body_encoding")}
    out.update(fields)
    return out


class TraceFull(Exception):
    """A call line was not written: it would have made the trace longer than ``max_bytes``.

    Attributes:
        size: the line's length in bytes.
        written: bytes the trace already holds.
        max_bytes: the trace's budget.
    """

    def __init__(self, size: int, written: int, max_bytes: int) -> None:
        super().__init__(f"a {size}-byte call line would pass the trace's {max_bytes} bytes")
        self.size, self.written, self.max_bytes = size, written, max_bytes


class TraceWriter:
    """Context manager writing one trace file (created new; an existing file is an error).

    Args:
        path: the ``.jsonl`` file to create (its folder is created).
        max_bytes: the most bytes the header and call lines may take (None: no bound); the
            ``end`` line is written whatever it is.
        redactor: redacts every line before it is written (None: lines are written as given).

    Attributes:
        calls: call lines written.
        bytes: bytes written so far (the file is ASCII: one byte a character).

    Raises:
        FileExistsError: ``path`` already exists (a run id is used once).

    """

    def __init__(
        self, path: Path, *, max_bytes: int | None = None, redactor: Redactor | None = None
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.redactor = redactor
        self._file: IO[str] | None = None
        self.calls = 0
        self.bytes = 0
        self.header_written = False
        self.ended = False
        self._failed_calls: list[Mapping[str, Any]] = []  # call lines written with an error

    def __enter__(self) -> TraceWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "x", encoding="ascii", newline="\n")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _redacted(self, record: Mapping[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = jsonable(record)
        return fields if self.redactor is None else self.redactor.redact(fields)

    def _write(self, record: Mapping[str, Any], *, budgeted: bool = False) -> None:
        if self._file is None:
            raise RuntimeError("TraceWriter used outside its context")
        line = dumps_line({"v": TRACE_VERSION, **record})
        if budgeted and self.max_bytes is not None and self.bytes + len(line) > self.max_bytes:
            raise TraceFull(len(line), self.bytes, self.max_bytes)
        self._file.write(line)
        self._file.flush()
        self.bytes += len(line)

    def header(
        self,
        *,
        run_id: str,
        task_id: str,
        task_input: Mapping[str, Any],
        workflow: Mapping[str, Any],
        purpose: str,
        backend: str,
        clock: Mapping[str, Any],
        seed: int,
        environment: Mapping[str, Any],
        **extra: Any,
    ) -> None:
        """Write the ``run`` line (once, first).

        Args:
            run_id: the run id.
            task_id: the task id.
            task_input: the task's input object.
            workflow: ``{"name", "version", "hash", "content"}``.
            purpose: ``live``, ``replay`` or ``judge``.
            backend: the backend's name (``docker``).
            clock: ``{"start": epoch_s, "step_s": s}``.
            seed: the run's seed.
            environment: ``{"python", "platform", "packages", "image_id", "tools",
                "policy_hash"}``.
            extra: further header fields (``policy``, ``limits``, ...).

        Raises:
            RuntimeError: the header was already written.

        """
        if self.header_written:
            raise RuntimeError("trace header written twice")
        self._write(
            self._redacted(
                {
                    "type": "run",
                    "run_id": run_id,
                    "task_id": task_id,
                    "task_input": task_input,
                    "workflow": workflow,
                    "purpose": purpose,
                    "backend": backend,
                    "clock": clock,
                    "seed": seed,
                    "environment": environment,
                    **extra,
                }
            )
        )
        self.header_written = True

    def call(self, record: Mapping[str, Any]) -> None:
        """Write one ``call`` line from a runtime call record (body rules enforced).

        Raises:
            TraceFull: the line would pass ``max_bytes``; nothing was written.
        """
        fields = self._redacted({k: v for k, v in dict(record).items() if k not in ("v", "type")})
        self._write({"type": "call", **normalise_body(fields)}, budgeted=True)
        self.calls += 1
        if fields.get("error") is not None:
            self._failed_calls.append(fields)

    def end(self, summary: Mapping[str, Any]) -> None:
        """Write the ``end`` line (status, exit code, failure, signature, outbound, ...).

        ``tool_errors`` (`runner.trace.format.tool_errors`) is added from the call lines
        written with an error, unless ``summary`` has it.
        """
        self.ended = True
        line = dict(summary)
        errors = tool_errors(self._failed_calls)
        if errors is not None and "tool_errors" not in line:
            line["tool_errors"] = errors
        self._write(self._redacted({"type": "end", **line}))
