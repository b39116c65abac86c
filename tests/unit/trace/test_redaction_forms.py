"""Attack test: forms of a secret the redactor leaves in a trace.

docs/trace-format.md ("Redaction") promises that a value hidden behind JSON escapes is found
(a JSON text held in a string is decoded and searched, and one spelt with escapes no encoder of
ours makes is re-encoded) and that a ``base64`` body is decoded and its bytes searched. The two
are not combined: a ``base64`` body (a raw HTTP body that is not UTF-8, or recorded as bytes)
holding a JSON text whose key is spelt with a ``\\u`` escape keeps the key, while the same text
as a ``text`` body is redacted. And a secret the trace knows (found raw in another field) is
not looked for in its base64 form in text fields: the shape of a Kubernetes Secret read by a
tool (``{"data": {"api_key": "<base64>"}}``), which `tests/integration/test_redaction.py`
would call a leak (it searches written files for the base64 of the secrets a run saw).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from runner.trace.redact import Redactor
from tests.support.secrets_search import OPENAI_KEY

KEY = b"k" * 32


def _call(index: int, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": "call", "index": index, "tool": "t.x", "effect": "read", **fields}


def _escaped_json() -> str:
    escaped = OPENAI_KEY[:10] + "\\u00" + format(ord(OPENAI_KEY[10]), "02x") + OPENAI_KEY[11:]
    text = '{"token": "' + escaped + '"}'
    assert OPENAI_KEY not in text and json.loads(text)["token"] == OPENAI_KEY
    return text


def test_control_the_escaped_key_in_a_text_body_is_redacted() -> None:
    out = Redactor(key=KEY).redact_all([_call(0, body=_escaped_json(), body_encoding="text")])
    assert json.loads(out[0]["body"])["token"] != OPENAI_KEY
    assert out[0]["redactions"]


def test_an_escaped_key_in_a_base64_body_is_redacted() -> None:
    raw = _escaped_json().encode() + b"\xff"  # not UTF-8: recorded as base64
    body = base64.b64encode(raw).decode()
    out = Redactor(key=KEY).redact_all([_call(0, body=body, body_encoding="base64")])
    decoded = base64.b64decode(out[0]["body"]).rstrip(b"\xff").decode()
    assert json.loads(decoded)["token"] != OPENAI_KEY


def test_the_base64_form_of_a_known_secret_is_redacted_in_text() -> None:
    encoded = base64.b64encode(OPENAI_KEY.encode()).decode()
    lines = [
        _call(0, args={"api_key": OPENAI_KEY}, body="ok", body_encoding="text"),
        _call(1, args={}, body=json.dumps({"data": {"api_key": encoded}}), body_encoding="text"),
    ]
    out = Redactor(key=KEY).redact_all(lines)
    assert out[0]["args"]["api_key"] != OPENAI_KEY  # the raw form is known
    assert encoded not in json.dumps(out), "the base64 of a redacted key is in the trace"
