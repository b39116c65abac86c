"""The host's outbound log: destinations merged with counts, a stated cap,
coverage partial whenever anything was dropped, hostile messages never crash it."""

from __future__ import annotations

from typing import Any

from runner.episode.outbound import MAX_COUNT, MAX_OUTBOUND, OutboundLog
from runner.runtime.egress.audit import MAX_DESTINATIONS


def _egress(kind: str, host: Any, port: Any, count: Any = 1, **extra: Any) -> dict[str, Any]:
    attempt = {"kind": kind, "host": host, "address": extra.pop("address", None), "port": port}
    return {"type": "egress", "attempt": {**attempt, **extra}, "count": count}


def test_the_cap_is_the_sandboxs_and_is_stated() -> None:
    assert MAX_OUTBOUND == MAX_DESTINATIONS == 1000


def test_counts_from_the_runtime_and_its_children_merge_by_destination() -> None:
    log = OutboundLog()
    log.add(_egress("dns", "decoy.invalid", 443, 700, pid=1, event="socket.getaddrinfo"))
    log.add({**_egress("dns", "decoy.invalid", 443, 800, pid=9), "child": True})
    log.add(_egress("connect", "192.0.2.1", 8443, address="192.0.2.1"))
    log.add(_egress("dns", "decoy.invalid", 80))  # another port: another destination
    assert [(e["kind"], e["port"], e["count"]) for e in log.entries] == [
        ("dns", 443, 1500),
        ("connect", 8443, 1),
        ("dns", 80, 1),
    ]
    assert log.entries[0]["pid"] == 1 and log.entries[0]["event"] == "socket.getaddrinfo"
    assert not log.partial and log.coverage_reason() is None


def test_past_the_cap_attempts_are_dropped_counted_and_coverage_is_partial() -> None:
    log = OutboundLog()
    for i in range(MAX_OUTBOUND + 10):
        log.add(_egress("dns", f"d{i}.invalid", 443, count=2))
    log.add(_egress("dns", "d0.invalid", 443))  # known destinations still count
    log.add({"type": "egress", "dropped": 7, "cap": 1000})  # what the sandbox could not keep
    assert len(log.entries) == MAX_OUTBOUND and log.entries[0]["count"] == 3
    assert log.dropped == 10 * 2 + 7 and log.partial
    reason = log.coverage_reason()
    assert reason is not None and "capped at 1000 distinct destinations" in reason["reason"]


def test_hostile_egress_messages_are_made_harmless() -> None:
    log = OutboundLog()
    log.add({"type": "egress", "attempt": ["not", "a", "dict"]})
    log.add({"type": "egress"})
    log.add(_egress("dns", ["a", "list"], {"a": "dict"}, count=-5))
    log.add(_egress("dns", ["a", "list"], {"a": "dict"}, count=True))
    log.add(_egress("dns", "h", 1, count=10**30))
    log.add({"type": "egress", "dropped": "many"})
    (weird, huge) = log.entries
    assert weird["host"] == "['a', 'list']" and weird["count"] == 2  # bad counts count once
    assert huge["count"] == 1 and log.dropped == 1
    for _ in range(3):
        log.add(_egress("dns", "h", 1, count=MAX_COUNT - 1))
    assert huge["count"] == MAX_COUNT  # saturates, never grows without bound


def test_a_lookup_the_witness_saw_merges_with_the_hooks_entry_of_that_name() -> None:
    """The witness's ``dns`` entry (no port) and the hook's (the port asked) are one."""
    log = OutboundLog()
    log.add(_egress("dns", "api.invalid", 443, event="socket.getaddrinfo"))
    log.add(_egress("dns", "api.invalid", None, 4, event="seccomp.dns"))
    log.add(_egress("dns", "only-child.invalid", None, 2, event="seccomp.dns"))
    log.add(_egress("dns", "only-child.invalid", 80, event="socket.getaddrinfo"))
    log.add(_egress("dns", "only-child.invalid", None, event="seccomp.dns"))
    log.add(_egress("dns", "only-child.invalid", 443))  # another port: its own destination
    assert [(e["host"], e["port"], e["count"], e.get("event")) for e in log.entries] == [
        ("api.invalid", 443, 1, "socket.getaddrinfo"),
        ("only-child.invalid", 80, 1, "socket.getaddrinfo"),  # the hook's count: lookups
        ("only-child.invalid", 443, 1, None),
    ]
    log.add(_egress("dns", "only-child.invalid", 80))  # the merged entry keeps counting
    assert log.entries[1]["count"] == 2
