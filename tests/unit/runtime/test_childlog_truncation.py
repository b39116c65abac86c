"""A child egress log cut by code in the sandbox says so (runner/runtime/egress/childlog.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from runner.runtime.egress.childlog import ChildLog

RECORD = {"type": "egress", "attempt": {"kind": "connect", "address": "203.0.113.9", "port": 1}}


def _append(log: ChildLog) -> None:
    with open(log.path, "a") as handle:
        handle.write(json.dumps(RECORD) + "\n")


def _reasons(messages: list[dict]) -> list[str]:
    return [m.get("reason", "") for m in messages if m["type"] == "coverage"]


def test_a_truncation_before_the_first_read_is_seen(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    time.sleep(0.01)
    _append(log)
    open(log.path, "w").close()  # the attack: a child's record, then the cut
    assert _reasons(log.read_new()) == ["child egress log truncated by code in the sandbox"]


def test_a_truncation_after_a_read_is_seen(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    _append(log)
    assert [m["type"] for m in log.read_new()] == ["egress"]
    open(log.path, "w").close()
    assert _reasons(log.read_new()) == ["child egress log truncated by code in the sandbox"]


def test_an_untouched_log_reports_nothing_more(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    _append(log)
    assert len(log.read_new()) == 1
    assert log.read_new() == [] and log.read_new() == []
