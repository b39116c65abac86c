"""The one strict JSON decoder for hostile text: channel lines, traces, tasks, manifests, imports.

Standard library only, Python 3.9+: the host (`runner.tracetools.reader`, `runner.domain.tasks`,
`runner.tools.source`, the importers, `runner.episode.channel`) and the in-sandbox
runtime (`runner.wire.protocol`, `runner.runtime.replay.callrecords`) use the same rules.

What `loads` refuses, each as a `StrictJSONError` (a `ValueError`) that says why:

- text that is not UTF-8 (bytes input; the offset of the first bad byte is named);
- nesting deeper than `MAX_DEPTH` arrays/objects. This is checked on the text *before* the
  parser runs, without recursion, so ``[[[[...`` never reaches the interpreter's recursion
  limit (about 1000 frames) and no accepted value can later crash code that walks it
  recursively: pydantic (its serializer stops near 255 levels), canonical JSON and hashing,
  ``repr`` and rendering;
- a key repeated in one object (the last one would silently win); ``field`` names it;
- ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to an infinity (``1e400``):
  JSON has no such values and a trace could not record them as they ran;
- integers longer than the interpreter's digit limit, and anything `json` itself rejects.

`canonical_json` is the one canonical form (sorted keys, no whitespace) that hashes and
matching use, in the trace format, the SDK and on the host.

`check_depth` applies the same limit to a value built in Python (a tool's return value), and
`depth_of` measures one, both without recursion.

Why 100: the deepest JSON in the project's fixtures and the public data under
``/work/shared/realdata`` nests 13 levels (a tool's argument schema inside a model request
inside a trace line); 100 leaves room for real data and for the wrappers a value gets on its
way (a tool result of depth 64, `MAX_VALUE_DEPTH`, inside a trace or protocol line), and stays
far below every recursive consumer's limit.
"""

import json
import math
import operator
import re
from itertools import accumulate
from typing import Any, List, Optional, Tuple, Union

__all__ = [
    "MAX_DEPTH",
    "MAX_VALUE_DEPTH",
    "StrictJSONError",
    "canonical_json",
    "check_depth",
    "depth_of",
    "dumps_value",
    "loads",
]

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in one JSON document (a line, a file)."""

MAX_VALUE_DEPTH = 64
"""Deepest nesting of a value the runtime records (a tool's return value, an output): the
wrappers of a trace or protocol line around it stay within `MAX_DEPTH`."""


class StrictJSONError(ValueError):
    """Text that the strict decoder refuses.

    Attributes:
        reason: what is wrong, in words (the caller names the file).
        kind: ``utf8``, ``depth``, ``duplicate_key``, ``not_finite`` or ``syntax``.
        detail: ``reason`` without the words ``not valid JSON:`` (the parser's own message,
            for a caller that words the kind itself).
        field: the key concerned, for a duplicate key; else None.
        line: 1-based line of the problem in the text, for a syntax error; else None.
    """

    def __init__(
        self,
        reason: str,
        kind: str = "syntax",
        field: Optional[str] = None,
        line: Optional[int] = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.detail = reason[len(_SYNTAX) :] if reason.startswith(_SYNTAX) else reason
        self.field = field
        self.line = line


_SYNTAX = "not valid JSON: "


# A JSON string literal (escapes included): brackets inside strings do not nest.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


_RUNS = re.compile(rb"\[+|\]+")
_PEEL_PASSES = 6


def _bracket_depth(skeleton: bytes) -> int:
    """Deepest nesting of a string of brackets (``{}`` already folded to ``[]``), in C loops.

    A few passes of ``replace(b"[]", b"")`` first: each removes exactly the innermost level
    (``bytes.replace`` never rescans what it produced), which shrinks wide, shallow text to
    little. What is left is cut into runs of ``[`` and of ``]``; the depth is the largest
    prefix sum at the end of an opening run. Every step is one C-level pass, no recursion and
    no Python loop per bracket: 16 MiB of brackets (a whole channel line) cost at most about a
    second whatever their shape, as much as parsing them. Unbalanced text gives some number;
    the parser reports it anyway.
    """
    peeled = 0
    while peeled < _PEEL_PASSES and skeleton:
        reduced = skeleton.replace(b"[]", b"")
        if len(reduced) == len(skeleton):
            break
        skeleton, peeled = reduced, peeled + 1
    runs = list(map(len, _RUNS.findall(skeleton)))
    if not runs:
        return peeled
    if skeleton[:1] == b"]":
        runs.insert(0, 0)  # keep opening runs at the even places
    opened = accumulate(runs[0::2])
    closed = accumulate(runs[1::2], initial=0)
    deepest: int = max(map(operator.sub, opened, closed))
    return peeled + deepest


def _too_deep(data: bytes, limit: int) -> bool:
    """True when the JSON text ``data`` nests arrays/objects deeper than ``limit``.

    Brackets inside string literals do not nest: the literals are cut out first (only when
    there are more brackets than ``limit`` at all, the common cheap case).
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    if b'"' in data:
        data = _STRING.sub(b"", data)
    return _bracket_depth(data.translate(_ONE_KIND, _NOT_BRACKETS)) > limit


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: List[Tuple[str, Any]]) -> dict:  # type: ignore[type-arg]
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _NotFinite(Exception):
    pass


def _constant(name: str) -> Any:
    raise _NotFinite(name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text[:40])
    return value


def loads(data: Union[str, bytes, bytearray], *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode one JSON document strictly (the rules are in the module docstring).

    Args:
        data: the JSON text, or its UTF-8 bytes (a leading BOM is not accepted).
        max_depth: deepest nesting of arrays and objects accepted.

    Returns:
        The value: dicts, lists, str, int, finite float, bool, None.

    Raises:
        StrictJSONError: anything the rules refuse; ``field`` names a duplicated key.
    """
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(f"not UTF-8 text (byte {exc.start})", "utf8") from None
    else:
        text = data
        raw = text.encode("utf-8", "surrogatepass")
    if _too_deep(raw, max_depth):
        raise StrictJSONError(f"JSON nested too deeply (more than {max_depth} levels)", "depth")
    try:
        return json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
    except _DuplicateKey as exc:
        raise StrictJSONError(
            f"duplicate key {exc.key[:100]!r} in one object", "duplicate_key", exc.key
        ) from None
    except _NotFinite as exc:
        raise StrictJSONError(
            f"{exc.args[0]} is not JSON (numbers must be finite)", "not_finite"
        ) from None
    except RecursionError:  # unreachable after the depth check; kept so no input can crash
        raise StrictJSONError("JSON nested too deeply", "depth") from None
    except json.JSONDecodeError as exc:
        raise StrictJSONError(_SYNTAX + str(exc), line=exc.lineno) from None
    except ValueError as exc:  # over-long integers
        raise StrictJSONError(_SYNTAX + str(exc)) from None


def depth_of(value: Any, stop_above: Optional[int] = None) -> int:
    """Nesting depth of lists/tuples/dicts in ``value`` (a scalar is 0), without recursion.

    Args:
        value: a value built of dicts, lists, tuples and scalars.
        stop_above: stop walking once the depth passes this (the result is then
            ``stop_above + 1``); None walks everything. A cyclic value needs a bound.
    """
    deepest = 0
    stack: List[Tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if stop_above is not None and deepest > stop_above:
                return deepest
        stack.extend((child, level) for child in children)
    return deepest


def check_depth(value: Any, max_depth: int = MAX_VALUE_DEPTH) -> None:
    """Refuse a value nested deeper than ``max_depth`` (see `depth_of`).

    Raises:
        StrictJSONError: the value is deeper than ``max_depth``.
    """
    if depth_of(value, stop_above=max_depth) > max_depth:
        raise StrictJSONError(f"value nested too deeply (more than {max_depth} levels)", "depth")


def dumps_value(value: Any, max_depth: int = MAX_VALUE_DEPTH) -> str:
    """A value as compact JSON text (key order kept, non-ASCII kept), refused when too deep.

    The runtime writes every tool result with it, so what it records fits the readers'
    `MAX_DEPTH` with the trace's wrappers around it. The depth is checked on the text (C
    loops), and the interpreter's own limit becomes the same error.

    Raises:
        StrictJSONError: nested deeper than ``max_depth`` (kind ``depth``).
        TypeError: the value is not JSON-serialisable.
        ValueError: it holds NaN or an infinity, or a circular reference.
    """
    too_deep = StrictJSONError(
        "value nested too deeply (more than {} levels)".format(max_depth), "depth"
    )
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise too_deep from None
    if _too_deep(text.encode("utf-8", "surrogatepass"), max_depth):
        raise too_deep
    return text


def canonical_json(value: Any) -> str:
    """Serialise ``value`` as canonical JSON: sorted keys, no whitespace, non-ASCII kept.

    Raises:
        TypeError: ``value`` holds something JSON cannot represent.
        ValueError: ``value`` holds NaN or an infinity, or is nested too deeply for the
            interpreter's stack (hashing a hostile value is an error, never a crash).
    """
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except RecursionError:
        raise ValueError("value nested too deeply to serialise") from None
