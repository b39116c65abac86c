"""The trace (episode) format's shared rules: version, statuses, exit codes, bodies, signature.

Standard library only, Python 3.9+: the in-sandbox runtime, `runner.sdk` record mode, the host
and the importers all compute these the same way (SPEC.md, "Trace (episode) format").

A trace is JSONL, ``"v": 1`` on every line: one ``run`` line, one ``call`` line per tool or
model call, one ``end`` line. docs/trace-format.md and docs/trace.schema.json publish it.
"""

import base64
import hashlib
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Tuple, Union, get_args

from runner.trace.strictjson import canonical_json

TRACE_VERSION = 1

# The episode statuses of SPEC.md, the one list: the trace readers' type
# (`runner.tracetools.records`), the ledger's run rows and the report read them from here.
EpisodeStatus = Literal[
    "succeeded",
    "failed",
    "timeout",
    "oom",
    "crashed",
    "infra_error",
    "denied",
    "ceiling_reached",
    "limit_exceeded",
]
STATUSES: Tuple[str, ...] = get_args(EpisodeStatus)

# SPEC.md: the episode exit code, "a logical code computed the same way in record, run,
# reproduce and import: 0 succeeded, 1 failed, 124 timeout, 137 oom or killed,
# 125 crashed/infrastructure". `denied` and `ceiling_reached` end a run that did not fail on
# its own: they count as failed (1). `limit_exceeded` (a policy limit on calls or trace size
# cut the run) is 125, like a run the host had to stop.
_EXIT_CODES = {
    "succeeded": 0,
    "failed": 1,
    "timeout": 124,
    "oom": 137,
    "crashed": 125,
    "infra_error": 125,
    "denied": 1,
    "ceiling_reached": 1,
    "limit_exceeded": 125,
}

# Bodies longer than this (bytes, UTF-8 or raw) are truncated in traces, with the original
# length and sha256 kept (SPEC.md: truncation is recorded, never silent).
MAX_BODY_BYTES = 1024 * 1024


def episode_exit_code(status: str) -> int:
    """The logical episode exit code of a status (SPEC.md).

    Raises:
        ValueError: ``status`` is not one of `STATUSES`.
    """
    try:
        return _EXIT_CODES[status]
    except KeyError:
        raise ValueError("unknown episode status {!r}".format(status)) from None


def failure_signature(call_index: int, tool_id: str, error_class: str, exit_code: int) -> str:
    """sha256 hex of the canonical JSON array ``[call_index, tool_id, error_class, exit_code]``.

    SPEC.md: the failure that *ended* the episode; with no failing call, the last call index
    and ``workflow`` as the tool id.
    """
    payload = canonical_json([call_index, tool_id, error_class, exit_code])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


MAX_TOOL_ERRORS = 100
"""At most this many entries in an end line's ``tool_errors`` (the count is always whole)."""


def tool_errors(calls: Iterable[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The end line's ``tool_errors``: the tool calls of the episode that ended in an error.

    A tool error an agent caught and handed back to its model is an observation, not the
    episode's failure (SPEC.md, "Failure signature"), so such a run ``succeeded``; this field
    says that it did so past failed tool calls (issue 27: "a tool error inside an agent is
    recorded as an error and the run's status says so"). Model and user turns are not counted.

    Args:
        calls: the episode's call records, in order.

    Returns:
        ``{"count": N, "calls": [{call_index, tool, error_class}, ...]}`` (at most
        `MAX_TOOL_ERRORS` items, the first ones), or None when no tool call failed.
    """
    count = 0
    first: List[Dict[str, Any]] = []
    for call in calls:
        error, index, tool = call.get("error"), call.get("index"), call.get("tool")
        if not isinstance(error, Mapping) or tool in ("model", "user"):
            continue
        if not isinstance(tool, str) or isinstance(index, bool) or not isinstance(index, int):
            continue  # a record no reader would accept either: not listed
        count += 1
        if len(first) < MAX_TOOL_ERRORS:
            error_class = error.get("class")
            first.append(
                {
                    "call_index": index,
                    "tool": tool,
                    "error_class": error_class if isinstance(error_class, str) else None,
                }
            )
    return {"count": count, "calls": first} if count else None


def text_hash(text: str) -> str:
    """sha256 hex of a text file's content with its line endings made LF (CRLF, lone CR).

    The hash of a workflow file (a trace's ``run`` line, ``workflow.hash``) and of imported
    workflows. Line endings do not count, so that a file checked out with CRLF (Git for
    Windows' default, ``core.autocrlf``) has the hash of the same file recorded on Linux or
    macOS: the rule is Python's universal newlines, the way the YAML parser and the
    interpreter read these files anyway. For a file with LF endings it is the sha256 of its
    UTF-8 bytes (the rule before line endings were normalised), so traces recorded before keep
    their hash.
    """
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    return hashlib.sha256(normalised.encode("utf-8", "surrogatepass")).hexdigest()


def encode_body(raw: Union[bytes, str], limit: int = MAX_BODY_BYTES) -> Dict[str, Any]:
    """Trace fields for a raw response body.

    Returns ``body`` and ``body_encoding`` and, when cut, ``truncated``, ``original_length``
    (bytes) and ``sha256`` of the whole original.

    Text that is valid UTF-8 is stored as ``text``; anything else (bytes that do not decode,
    lone surrogates) as ``base64`` of the exact bytes, so every body round-trips.
    """
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError:
            data = (
                raw.encode("utf-8", "surrogateescape")
                if _only_escapes(raw)
                else raw.encode("utf-8", "surrogatepass")
            )
    else:
        data = bytes(raw)
    fields: Dict[str, Any] = {}
    kept = data
    if len(data) > limit:
        kept = data[:limit]
        fields.update(
            truncated=True, original_length=len(data), sha256=hashlib.sha256(data).hexdigest()
        )
    try:
        text = kept.decode("utf-8")
        fields.update(body=text, body_encoding="text")
    except UnicodeDecodeError:
        if fields.get("truncated"):
            # a cut may split a character: keep the valid prefix as text when that is all it is
            text = kept.decode("utf-8", "ignore")
            if (
                text.encode("utf-8") == kept[: len(text.encode("utf-8"))]
                and len(kept) - len(text.encode("utf-8")) < 4
            ):
                fields.update(body=text, body_encoding="text")
                return fields
        fields.update(body=base64.b64encode(kept).decode("ascii"), body_encoding="base64")
    return fields


def _only_escapes(text: str) -> bool:
    return all(not (0xD800 <= ord(c) <= 0xDFFF) or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


def decode_body(record: Dict[str, Any]) -> Optional[bytes]:
    """The stored body bytes of a call record (None when it has no ``body``).

    Raises:
        ValueError: an unknown ``body_encoding`` or invalid base64.
    """
    if record.get("body") is None:
        return None
    encoding = record.get("body_encoding", "text")
    if encoding == "text":
        return str(record["body"]).encode("utf-8", "surrogatepass")
    if encoding == "base64":
        return base64.b64decode(record["body"], validate=True)
    raise ValueError("unknown body_encoding {!r}".format(encoding))
