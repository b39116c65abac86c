"""A witnessed attempt reaches the outbound-destination log as the hook's attempts do.

`runner.runtime.egress.audit.record_witnessed` (the witness's sink in the runtime) queues it in
memory; the host's `runner.episode.outbound.OutboundLog` keeps its address, outcome and event.
"""

from __future__ import annotations

import os
from typing import Any

from runner.episode.outbound import OutboundLog
from runner.runtime.egress import audit

ATTEMPT = {
    "kind": "connect",
    "host": None,
    "address": "203.0.113.5",
    "port": 80,
    "resolved_from": None,
    "outcome": "denied",
    "pid": 12,
    "event": "seccomp.connect",
}


def test_a_witnessed_attempt_is_logged_once_with_its_count(monkeypatch: Any) -> None:
    # this process as the runtime (records queued in memory), without adding the audit hook
    monkeypatch.setitem(audit._state, "owner_pid", os.getpid())
    audit.drain()
    audit.record_witnessed(dict(ATTEMPT))
    audit.record_witnessed(dict(ATTEMPT, pid=13))
    messages = [m for m in audit.drain() if m.get("attempt", {}).get("event") == "seccomp.connect"]
    assert len(messages) == 1 and messages[0]["count"] == 2
    log = OutboundLog()
    log.add(messages[0])
    (entry,) = log.entries
    assert entry["address"] == "203.0.113.5" and entry["outcome"] == "denied"
    assert entry["event"] == "seccomp.connect" and entry["count"] == 2
