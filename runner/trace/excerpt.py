"""Two texts that differ, each cut to a window that shows where they differ.

Standard library only, Python 3.9+: the messages that say what a replay did differently
(a model request that misses its recording, on the host; a pure tool's result, in the
sandbox) show both sides. Cutting each at its first N characters hides a difference that lies
further on: both sides then read the same (issue 27: "the first-difference message is cut
before the part that differs"). `differing_excerpts` keeps a little context before the first
differing character and cuts after it.
"""

from typing import Tuple

__all__ = ["cut", "differing_excerpts"]

CONTEXT_CHARS = 30
"""Characters kept before the first difference when a side must be cut at its start."""


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    low, high = 0, n
    while low < high:  # binary search on slices: C-speed comparisons, O(log n) of them
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _window(text: str, start: int, width: int) -> str:
    head = "..." if start > 0 else ""
    body = text[start : start + width]
    tail = "..." if start + width < len(text) else ""
    return head + body + tail


def cut(text: str, width: int = 120) -> str:
    """``text`` whole when it fits in ``width`` characters, else its start and ``...``.

    For one side shown alone (the other has nothing at that place, so there is no difference
    to centre on); ``width`` counts the mark.
    """
    return text if len(text) <= width else text[: width - 3] + "..."


def differing_excerpts(a: str, b: str, width: int = 120) -> Tuple[str, str]:
    """``a`` and ``b`` cut to about ``width`` characters around their first difference.

    A text that fits is shown whole. Otherwise both windows start `CONTEXT_CHARS` before the
    first character where the texts differ (at 0 when that is near the start), and ``...``
    marks what was cut on either side.

    Args:
        a: the first text (the replay's side).
        b: the second text (the recording's side).
        width: the most characters kept of each (without the ``...`` marks).

    Returns:
        The two excerpts, in the order given.
    """
    if len(a) <= width and len(b) <= width:
        return a, b
    differs_at = _common_prefix(a, b)
    start = max(0, differs_at - CONTEXT_CHARS)
    if differs_at < width - CONTEXT_CHARS:
        start = 0  # the difference is inside the first window already
    return _window(a, start, width), _window(b, start, width)
