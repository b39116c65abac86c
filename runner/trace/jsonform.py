"""A tool's return value as the JSON text a call records, whatever the value is.

Standard library only, Python 3.9+: `runner.sdk.record` (in the user's own process) and the
in-sandbox runtime (its worker, the agent loop) encode every tool value here, so that
recording never changes what the agent sees (issue 27: a tool returning a pydantic model made
the recorder raise ``TypeError ... not JSON serializable`` inside the agent).

The rule, in order:

1. a value JSON encodes as it is (`runner.trace.strictjson.dumps_value`): its JSON text, no
   marker;
2. else its *JSON form*: every object inside it that JSON cannot encode is replaced by what it
   says it is as JSON, found by duck typing (never by importing pydantic, which the sandbox
   image may not have): a ``model_dump`` method (pydantic v2: ``model_dump(mode="json")``),
   a dataclass instance (`dataclasses.asdict`). The call line carries ``encoding:
   "json_form"``;
3. else (no JSON form, NaN or an infinity, a cycle, nesting past
   `runner.trace.strictjson.MAX_VALUE_DEPTH`): the JSON string of its ``repr``, with
   ``encoding: "repr"``. ``lint`` reports such a body as missing: it is not the value the tool
   returned, and replay serves that text instead of the object.

Nothing here raises: encoding is the recorder's business, never the agent's.
"""

import json
from typing import Any, Optional, Tuple

from runner.trace.strictjson import dumps_value

__all__ = ["ENCODINGS", "REPR_MAX_CHARS", "json_form", "revive"]

ENCODINGS = ("json_form", "repr")
"""The values of a call line's ``encoding`` (absent: the value was JSON as returned)."""

REPR_MAX_CHARS = 65536
"""A ``repr`` fallback is cut to this many characters (a repr can be as large as memory)."""


def _as_json(obj: Any) -> Any:
    """`json.dumps`'s ``default``: the JSON form of one object, or TypeError."""
    import dataclasses  # here: it imports `inspect`, which the runtime's start path never loads

    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        return dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    raise TypeError("{} has no JSON form".format(type(obj).__name__))


def _repr_text(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ is the tool's problem, not the agent's
        text = "<{} object: repr raised {}>".format(type(value).__name__, type(exc).__name__)
    if len(text) > REPR_MAX_CHARS:
        text = text[:REPR_MAX_CHARS] + "..."
    return json.dumps(text, ensure_ascii=False)


def json_form(value: Any) -> Tuple[str, Optional[str]]:
    """Encode a tool's return value by the rule of the module docstring.

    Args:
        value: anything a tool returned.

    Returns:
        ``(text, encoding)``: the JSON text to record, and None (the value as returned),
        ``"json_form"`` or ``"repr"``.
    """
    try:
        return dumps_value(value), None
    except RecursionError:
        return _repr_text(value), "repr"
    except (TypeError, ValueError):
        pass
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_as_json)
        return dumps_value(json.loads(text)), "json_form"
    except Exception:  # no JSON form, or one that is not JSON either (NaN, too deep, a cycle)
        return _repr_text(value), "repr"


def revive(value: Any, annotation: Any) -> Any:
    """The value a tool declared to return, rebuilt from its JSON form when it is a class.

    A program's tool call that crosses the runtime (served from a trace, or run in the
    sandbox's worker) comes back as JSON; when the tool's return annotation is a class with
    ``model_validate`` (pydantic v2) or a dataclass, the program gets an instance again, as
    it did when the tool ran in its own process. Anything else, or a value the class
    refuses, is returned as it is.

    Args:
        value: the decoded JSON value.
        annotation: the tool function's return annotation (a class, or anything).
    """
    if not isinstance(annotation, type):
        return value
    import dataclasses  # here, not at the top: see `_as_json`

    validate = getattr(annotation, "model_validate", None)
    try:
        if callable(validate):
            return validate(value)
        if dataclasses.is_dataclass(annotation) and isinstance(value, dict):
            return annotation(**value)
    except Exception:  # the class refuses its own JSON form: keep the JSON value
        return value
    return value
