"""A child egress log cut by code in the sandbox says so (runner/runtime/egress/childlog.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

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


def test_an_untouched_log_is_not_opened_again(tmp_path: Path, monkeypatch: Any) -> None:
    """The pump reads five times a second, also while a run waits on its model."""
    from runner.runtime.egress import childlog

    log = ChildLog(str(tmp_path))
    opened: list[str] = []
    real_open = open

    def counting(path: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(childlog, "open", counting, raising=False)
    assert log.read_new() == [] and log.read_new() == []
    assert opened == []  # nothing written yet: a stat says so
    _append(log)
    assert len(log.read_new()) == 1 and len(opened) == 1
    assert log.read_new() == [] and len(opened) == 1
    _append(log)
    assert len(log.read_new()) == 1 and len(opened) == 2
