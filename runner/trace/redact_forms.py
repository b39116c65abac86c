"""The forms a value takes in a trace line, for `runner.trace.redact`: escapes, JSON texts, base64.

Standard library only, Python 3.9+ (mounted into sandboxes with `runner.trace`).
"""

import base64
import binascii
import json
import re
from typing import Any, Iterator, List, Optional

from runner.trace import strictjson

__all__ = [
    "b64",
    "base64_forms",
    "forms",
    "json_texts",
    "scalar",
    "strings",
    "text_of",
    "unescaped",
]

# The first base64 character that depends on the secret's bytes alone, by the number of other
# bytes (0, 1, 2) before it in its 3-byte group (RFC 4648 section 4: 6 bits a character).
_B64_START = (0, 2, 3)
_U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def forms(secret: str) -> List[str]:
    """The secret as it can appear in a string: raw, JSON-escaped (once and twice), base64.

    The base64 forms are `base64_forms`: a tool that reads a Kubernetes Secret or a data URL
    hands the secret on encoded, and a known secret must not stay readable that way.
    """
    forms = [secret]
    for ascii_only in (True, False):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        twice = json.dumps(once, ensure_ascii=ascii_only)[1:-1]
        forms.extend((once, twice, once.replace("/", "\\/")))
    forms.extend(base64_forms(secret))
    return [f for i, f in enumerate(forms) if f and f not in forms[:i]]


def base64_forms(secret: str) -> List[str]:
    """The base64 text of ``secret`` at each of the three alignments it can have in a stream.

    The whole padded encoding, then for each offset in its 3-byte group the characters that
    depend on the secret's bytes alone (the one or two characters at each end, shared with the
    bytes around it, are left: at most two bytes of the secret stay readable). Forms under 8
    characters are not returned (too short to stand for a secret; they would match anywhere).
    """
    data = secret.encode("utf-8", "surrogatepass")
    out = [base64.b64encode(data).decode("ascii")]
    for offset, start in enumerate(_B64_START):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        end = (offset + len(data)) // 3 * 4
        out.append(encoded[start:end])
    return [f for f in out if len(f) >= 8]


def unescaped(text: str) -> str:
    r"""``text`` with every JSON ``\uXXXX`` escape replaced by its character.

    Escapes of surrogates stay as they are (alone they are no character: the text must still
    encode as UTF-8 with ``surrogateescape``).

    A view for finding secrets spelt with escapes inside bytes that are not JSON as a whole
    (a base64 body of a JSON text and a trailing byte that is not UTF-8).
    """
    return _U_ESCAPE.sub(_character, text)


def _character(match: "re.Match[str]") -> str:
    code = int(match.group(1), 16)
    return match.group(0) if 0xD800 <= code <= 0xDFFF else chr(code)


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
