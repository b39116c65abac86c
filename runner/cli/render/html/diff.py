"""The first differing call of a reproduce, side by side: recorded against replayed, diffed.

Both calls are shown as indented JSON (keys sorted, the fields that always differ between two
runs — clock, duration — left out) and aligned line by line with `difflib.SequenceMatcher`:
equal lines side by side, changed ones marked on both sides, lines only one side has marked on
that side. Each call's text is capped at `DIFF_CHARS` characters (the cut is said).
"""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["DIFF_CHARS", "side_by_side"]

DIFF_CHARS = 20_000
_NOISE = ("clock", "duration_s", "v", "type")


def _lines(call: Mapping[str, Any] | None) -> tuple[list[str], int]:
    if call is None:
        return ["(no call at this index)"], 0
    shown = {k: v for k, v in call.items() if k not in _NOISE}
    for key in ("body",):  # a JSON body is easier to compare as JSON
        body = shown.get(key)
        if isinstance(body, str) and len(body) <= DIFF_CHARS and body[:1] in "{[":
            with contextlib.suppress(ValueError):
                shown[key] = json.loads(body)
    text = json.dumps(shown, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    cut = max(0, len(text) - DIFF_CHARS)
    return text[:DIFF_CHARS].splitlines(), cut


def side_by_side(
    recorded: Mapping[str, Any] | None, replayed: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Rows ``{left, right, kind_left, kind_right}`` (kinds: "", ``del``, ``add``, ``chg``).

    Args:
        recorded: the recorded call at the first difference (a trace call line), or None.
        replayed: the replay's call at that index, or None.

    Returns:
        ``{"rows": [...], "cut": note or None}``.
    """
    left, cut_left = _lines(recorded)
    right, cut_right = _lines(replayed)
    rows: list[dict[str, str]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [
                {"left": a, "right": b, "kind_left": "", "kind_right": ""}
                for a, b in zip(left[i1:i2], right[j1:j2], strict=True)
            ]
            continue
        a_part, b_part = left[i1:i2], right[j1:j2]
        for k in range(max(len(a_part), len(b_part))):
            a = a_part[k] if k < len(a_part) else None
            b = b_part[k] if k < len(b_part) else None
            rows.append(
                {
                    "left": a or "",
                    "right": b or "",
                    "kind_left": "" if a is None else ("chg" if b is not None else "del"),
                    "kind_right": "" if b is None else ("chg" if a is not None else "add"),
                }
            )
    notes = [
        f"{side}: {n} characters more not shown"
        for side, n in (("recorded", cut_left), ("replayed", cut_right))
        if n
    ]
    return {"rows": rows, "cut": "; ".join(notes) or None}
