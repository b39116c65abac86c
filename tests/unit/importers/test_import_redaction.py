"""Imports are redacted before they are written: traces and tasks, one key."""

from __future__ import annotations

import json
from pathlib import Path

from runner.importers.openai_messages import read_openai_messages
from runner.importers.output import write_import
from tests.support.paths import TESTS
from tests.support.secrets_search import AWS_KEY_ID, OPENAI_KEY, SSN, SSN_RULE, found_in

SOURCE = TESTS / "fixtures" / "import" / "reproducible.jsonl"


def _with_secrets(tmp_path: Path) -> Path:
    runs = [json.loads(line) for line in SOURCE.read_text(encoding="utf-8").splitlines()]
    tool = next(m for m in runs[0]["messages"] if m.get("role") == "tool")
    tool["content"] = json.dumps(
        {"was": tool["content"], "k": OPENAI_KEY, "a": AWS_KEY_ID, "s": SSN}
    )
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    return path


def test_an_import_writes_no_secret_in_any_file_and_one_placeholder_per_secret(
    tmp_path: Path,
) -> None:
    source = _with_secrets(tmp_path)
    assert found_in(source.read_bytes())  # the positive control
    out = tmp_path / "out"
    report = write_import(
        read_openai_messages(source, None), out, {}, redaction_rules={"patterns": [SSN_RULE]}
    )
    for path in out.rglob("*"):
        if path.is_file():
            assert found_in(path.read_bytes()) == [], path
    lines = [
        json.loads(line)
        for trace in (out / "traces").glob("*.jsonl")
        for line in trace.read_text(encoding="utf-8").splitlines()
    ]
    records = [r for line in lines for r in line.get("redactions", [])]
    assert report["redactions"] == len(records) >= 3
    by_rule = {}
    for record in records:
        by_rule.setdefault(record["rule"], set()).add(record["placeholder"])
    assert {rule: len(p) for rule, p in by_rule.items()} == {
        "openai": 1,
        "aws_access_key": 1,
        "ssn": 1,
    }
    tasks = (out / "tasks.jsonl").read_text(encoding="utf-8")
    assert all(next(iter(p)) in tasks for p in by_rule.values())  # the task's observation too
    assert "redactions" not in tasks


def test_an_import_with_every_rule_turned_off_keeps_the_values(
    tmp_path: Path,
) -> None:
    source = _with_secrets(tmp_path)
    off = write_import(
        read_openai_messages(source, None),
        tmp_path / "off",
        {},
        redaction_rules={"detectors": [], "headers": []},
    )
    assert off["redactions"] == 0
    traces = list((tmp_path / "off" / "traces").glob("*.jsonl"))
    assert any(OPENAI_KEY in t.read_text(encoding="utf-8") for t in traces)
