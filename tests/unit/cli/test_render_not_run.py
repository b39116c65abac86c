"""The not-run list names each episode once: with ``--repeats`` a pair runs K times.

A new user's ``submit --repeats 2``, interrupted: "helpdesk-triage@2×ticket-1006" was listed
twice with no repeat index, and 63 episodes were called "63 pairs".
"""

from __future__ import annotations

from runner.cli.render.report import group_by_reason


def test_repeats_are_told_apart_and_a_single_run_keeps_its_short_label() -> None:
    twice = [
        {"variant": "v@2", "task_id": "t-6", "repeat": 0, "reason": "interrupted"},
        {"variant": "v@2", "task_id": "t-6", "repeat": 1, "reason": "interrupted"},
    ]
    assert group_by_reason(twice, "pair") == [
        {"reason": "interrupted", "count": 2, "items": ["v@2×t-6#0", "v@2×t-6#1"]}
    ]
    once = [{"variant": "v@2", "task_id": "t-6", "repeat": 0, "reason": "interrupted"}]
    assert group_by_reason(once, "pair")[0]["items"] == ["v@2×t-6"]
