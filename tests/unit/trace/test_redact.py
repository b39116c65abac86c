"""The redaction engine: detectors, rules, stable keyed placeholders, every form."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from runner.trace.redact import PLACEHOLDER, Redactor
from runner.trace.redact_rules import DETECTORS, parse_rules
from tests.support.secrets_search import AWS_KEY_ID, OPENAI_KEY, SSN, SSN_RULE, found_in

RULES = {"patterns": [SSN_RULE]}
KEY = b"k" * 32

EXAMPLES = {
    "openai": "sk-proj-Zq3T9xVbN2mKp7LwRr4sYd8HfJc1GeA6uQo5",
    "anthropic": "sk-ant-api03-" + "A1b2C3d4" * 10,
    "aws_access_key": "ASIAY34FZKBOKMUTVV7A",
    "github": "ghp_" + "a1B2c3D4e5F6" * 3,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
}


def _call(**fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": "call", "index": 0, "tool": "crm.lookup", "args": {}, **fields}


def _blob(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_built_in_detector_finds_its_documented_shape(name: str) -> None:
    secret = EXAMPLES[name]
    out = Redactor(key=KEY).redact(_call(body=f"value: {secret} end"))
    assert secret not in out["body"]
    assert out["redactions"][0]["rule"] == name
    assert out["redactions"][0]["length"] == len(secret)


def test_bearer_and_aws_secret_detectors_take_only_the_token() -> None:
    text = "Authorization: Bearer abcdefghijklmnop.qrs\naws_secret_access_key = " + "w" * 40
    out = Redactor({"headers": []}, key=KEY).redact(_call(body=text))
    assert out["body"].startswith("Authorization: Bearer [REDACTED:bearer:")
    assert "aws_secret_access_key = [REDACTED:aws_secret_key:" in out["body"]


def test_ordinary_text_is_left_alone() -> None:
    text = "task-123 sk-short AKIA123 eyJ no, a risk-free desk-top 2026-12-01 ghp_x"
    out = Redactor(RULES, key=KEY).redact(_call(body=text, args={"q": "ask-me-anything-today"}))
    assert out == _call(body=text, args={"q": "ask-me-anything-today"})


def test_the_same_secret_gets_the_same_placeholder_in_every_line_and_field() -> None:
    redactor = Redactor(RULES, key=KEY)
    first = redactor.redact(_call(body=json.dumps({"ssn": SSN})))
    second = redactor.redact(
        {"v": 1, "type": "call", "index": 1, "tool": "model", "request": {"m": f"ssn is {SSN}"}}
    )
    placeholder = first["redactions"][0]["placeholder"]
    assert PLACEHOLDER.fullmatch(placeholder)
    assert second["request"]["m"] == f"ssn is {placeholder}"
    assert second["redactions"] == [
        {"field": "request.m", "rule": "ssn", "length": len(SSN), "placeholder": placeholder}
    ]


def test_the_placeholder_is_keyed_so_a_short_secret_cannot_be_guessed_back() -> None:
    one = Redactor(RULES, key=KEY).placeholder("ssn", SSN)
    other = Redactor(RULES, key=b"q" * 32).placeholder("ssn", SSN)
    fresh = Redactor(RULES).placeholder("ssn", SSN)  # os.urandom key
    assert len({one, other, fresh}) == 3
    plain = hashlib.sha256(SSN.encode()).hexdigest()[:8]
    assert plain not in one + other + fresh


def test_redaction_records_name_field_rule_length_placeholder_never_the_value() -> None:
    body = json.dumps({"key": OPENAI_KEY, "aws": AWS_KEY_ID, "ssn": SSN})
    out = Redactor(RULES, key=KEY).redact(_call(body=body, body_encoding="text"))
    assert sorted(r["rule"] for r in out["redactions"]) == ["aws_access_key", "openai", "ssn"]
    assert all(set(r) == {"field", "rule", "length", "placeholder"} for r in out["redactions"])
    assert {r["field"] for r in out["redactions"]} == {"body"}
    assert found_in(_blob(out)) == []


def test_escaped_base64_stream_and_nested_forms_are_all_redacted() -> None:
    escaped = json.dumps({"k": OPENAI_KEY.replace("-", "\\u002d")})  # \u escapes in the text
    stream = "data: " + json.dumps({"delta": f"ssn {SSN}"}) + "\n\ndata: [DONE]\n\n"
    binary = b"\x89PNG\x00" + AWS_KEY_ID.encode() + b"\xff"
    record = _call(
        body=base64.b64encode(binary).decode(),
        body_encoding="base64",
        args={"headers": {"X-Note": f"id {AWS_KEY_ID}"}, AWS_KEY_ID: 1},
        error={"class": "ValueError", "message": f"bad key {OPENAI_KEY}"},
        meta={
            "http": [
                {"method": "GET", "url": "http://127.0.0.1/a"},
                {"method": "GET", "url": "http://127.0.0.1/b", "body": escaped},
                {"method": "GET", "url": "http://127.0.0.1/c", "body": stream},
            ],
            "result": json.dumps({"nested": json.dumps({"ssn": SSN})}),
        },
    )
    out = Redactor(RULES, key=KEY).redact(record)
    assert found_in(_blob(out)) == []
    assert found_in(base64.b64decode(out["body"])) == []
    assert base64.b64decode(out["body"]).startswith(b"\x89PNG\x00[REDACTED:aws_access_key:")
    fields = {r["field"] for r in out["redactions"]}
    assert {"body", "args", "args.headers.X-Note", "error.message"} <= fields
    assert {"meta.http[2].body", "meta.result"} <= fields
    json.loads(out["meta"]["result"])  # still the JSON text it was


def test_json_escaped_secret_in_a_raw_body_is_found_from_its_decoded_value() -> None:
    body = '{"token": "' + OPENAI_KEY.replace("Z", "\\u005a") + '"}'
    assert OPENAI_KEY not in body
    out = Redactor(key=KEY).redact(_call(body=body))
    # the escaped form was not one the replacer knew: the decoded value is what was found
    assert "redactions" in out
    assert json.loads(json.loads(json.dumps(out))["body"])["token"] != OPENAI_KEY


def test_paths_and_headers_redact_whole_values_strings_and_numbers() -> None:
    rules = {
        "paths": [
            {"name": "account", "path": "$.args.account"},
            {"name": "card", "path": "$..card"},
        ]
    }
    record = _call(
        args={"account": "acct-77", "headers": {"Authorization": "Basic dXNlcjpwYXNz"}},
        body=json.dumps({"customer": {"card": 4111111111111111}}),
        meta={"raw": "GET / HTTP/1.1\r\nCookie: session=abc123\r\n"},
    )
    out = Redactor(rules, key=KEY).redact(record)
    assert out["args"]["account"].startswith("[REDACTED:account:")
    assert out["args"]["headers"]["Authorization"].startswith("[REDACTED:header:")
    assert "4111111111111111" not in out["body"]
    assert "abc123" not in out["meta"]["raw"]


def test_a_late_finding_redacts_earlier_lines_of_a_whole_trace() -> None:
    rules = {"paths": [{"name": "pin", "path": "$.args.pin"}]}
    early = {"v": 1, "type": "call", "index": 0, "tool": "model", "request": {"m": "pin 90210-x"}}
    late = _call(index=1, args={"pin": "90210-x"})
    out = Redactor(rules, key=KEY).redact_all([early, late])
    assert "90210-x" not in json.dumps(out)
    assert out[0]["redactions"][0]["rule"] == "pin"


def test_the_workflow_and_truncation_fields_are_kept_and_redaction_is_idempotent() -> None:
    run = {
        "v": 1,
        "type": "run",
        "workflow": {"content": f"# {OPENAI_KEY}", "hash": "h"},
        "task_input": {"q": OPENAI_KEY},
    }
    assert Redactor(key=KEY).redact(run)["workflow"] == run["workflow"]
    cut = _call(body=f"x {SSN}", truncated=True, original_length=9000, sha256="ab" * 32)
    once = Redactor(RULES, key=KEY).redact(cut)
    assert (once["truncated"], once["original_length"], once["sha256"]) == (True, 9000, "ab" * 32)
    assert Redactor(RULES, key=KEY).redact(once) == once


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"detector": []}, "[detector]"),
        ({"detectors": ["nope"]}, "[detectors[0]]"),
        ({"patterns": [{"name": "x", "regex": "("}]}, "[patterns[0].regex]"),
        ({"patterns": [{"name": "Bad Name", "regex": "x"}]}, "[patterns[0]]"),
        ({"paths": [{"name": "p", "path": "args.x"}]}, "[paths[0].path]"),
        ({"version": 2}, "[version]"),
        ({"headers": [3]}, "[headers]"),
    ],
)
def test_a_bad_rules_document_names_its_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_rules(doc)


def test_no_detectors_means_none_and_the_default_is_every_one() -> None:
    assert len(parse_rules(None).patterns) == len(DETECTORS)
    assert parse_rules({"detectors": []}).patterns == ()
    assert Redactor({"detectors": [], "headers": []}).redact(_call(body=OPENAI_KEY))["body"] == (
        OPENAI_KEY
    )


def test_a_pattern_that_matches_inside_a_placeholder_leaves_placeholders_whole() -> None:
    rules = {"patterns": [SSN_RULE, {"name": "hex", "regex": "[0-9a-f]{8}"}]}
    redactor = Redactor(rules, key=KEY)
    once = redactor.redact(_call(body=f"ssn {SSN}"))
    again = redactor.redact(_call(index=1, body=once["body"]))
    assert PLACEHOLDER.fullmatch(once["body"][4:])
    assert again["body"] == once["body"] and "redactions" not in again
