"""The forms a value takes in a trace line, for `runner.trace.redact`: escapes, JSON texts, base64.

Standard library only, Python 3.9+ (mounted into sandboxes with `runner.trace`).
"""

import base64
import binascii
import json
from typing import Any, Iterator, List, Optional

from runner.trace import strictjson

__all__ = ["b64", "forms", "json_texts", "scalar", "strings", "text_of"]


def forms(secret: str) -> List[str]:
    """The secret as it can appear in a string: raw and JSON-escaped (once and twice)."""
    forms = [secret]
    for ascii_only in (True, False):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        twice = json.dumps(once, ensure_ascii=ascii_only)[1:-1]
        forms.extend((once, twice, once.replace("/", "\\/")))
    return [f for i, f in enumerate(forms) if f and f not in forms[:i]]


def strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def scalar(value: Any) -> bool:
    """True for a string or a number (not a bool): a value a path or header rule replaces."""
    return isinstance(value, str) or (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    )


def text_of(value: Any) -> str:
    """A scalar as the text it is redacted as (a number: its JSON text)."""
    return value if isinstance(value, str) else json.dumps(value)


def b64(text: str) -> Optional[bytes]:
    """The bytes of a strict base64 text, or None when it is not one."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def json_texts(text: str) -> List[Any]:
    """The JSON values a string holds: itself, or an event stream's ``data:`` lines; or []."""
    start = text.lstrip()[:1]
    if start in ("{", "["):
        try:
            return [strictjson.loads(text)]
        except ValueError:  # StrictJSONError: not JSON, or nested too deeply
            return []
    if "data:" not in text:
        return []
    values = []
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                values.append(strictjson.loads(line[5:]))
            except ValueError:
                continue
    return values
