"""The end line's ``coverage`` (`runner.episode.tracelines.coverage_of`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from runner.episode.outbound import OutboundLog
from runner.episode.tracelines import coverage_of

CLOCK_ONLY = {"partial": False, "reason": "non-Python child process", "clock": "machine"}
PARTIAL = {"partial": True, "reason": "egress witness unavailable: seccomp filter refused"}


def _state(notes: list[dict[str, Any]], dropped: int = 0, outbound_dropped: int = 0) -> Any:
    outbound = OutboundLog()
    outbound.dropped = outbound_dropped
    return SimpleNamespace(coverage=notes, coverage_dropped=dropped, outbound=outbound)


@pytest.mark.parametrize(
    ("notes", "dropped", "outbound_dropped", "expected"),
    [
        ([], 0, 0, "full"),
        ([CLOCK_ONLY, CLOCK_ONLY], 0, 0, "full"),  # clock-only notes: egress fully seen
        ([CLOCK_ONLY, PARTIAL], 0, 0, "partial"),
        ([{"reason": "an older runtime's note, no partial field"}], 0, 0, "partial"),
        ([{"partial": "false", "reason": "not the boolean"}], 0, 0, "partial"),
        ([CLOCK_ONLY], 1, 0, "partial"),  # a dropped note may have been partial
        ([], 0, 3, "partial"),  # the outbound log's cap
    ],
)
def test_only_a_note_that_is_not_clock_only_makes_coverage_partial(
    notes: list[dict[str, Any]], dropped: int, outbound_dropped: int, expected: str
) -> None:
    assert coverage_of(_state(notes, dropped, outbound_dropped)) == expected
