"""The gate's three answers: PASS, FAIL or INCONCLUSIVE for each candidate against a baseline.

``submit --baseline VARIANT`` compares every other variant's mean score with the baseline's,
both with their 95 % Student t intervals (`runner.grading.scores`). The rule, in order:

1. **INCONCLUSIVE** when either side has no interval: no degree of freedom (one task scored
   once; with ``--repeats``, no task scored twice), or a judge that gave ranks and no scores.
2. **FAIL** when the candidate's whole interval lies below the baseline's interval (its upper
   bound under the baseline's lower bound): a regression this evaluation can tell from noise.
   Requiring both intervals to be apart, not only the candidate's mean below the baseline's
   interval, keeps an A/A comparison (the same workflow twice) from failing on noise: two
   means of one distribution fall that far apart with a chance of about 0.3 % (one-sided,
   normal approximation, equal spreads: a gap of 2 × 1.96 standard errors of one mean is
   2.77 standard errors of the difference), against about 8 % for "the mean below the
   baseline's interval".
3. **PASS** when neither side shows a regression: the candidate's mean is inside or above the
   baseline's interval, and the baseline's mean is inside or below the candidate's interval.
   Both are asked: a baseline of 3 passes in 4 tries has the interval [0, 1], inside which a
   candidate of 0 in 5 lies, yet the candidate's own interval [0, 0.43] lies below the
   baseline's 0.75.
4. **INCONCLUSIVE** otherwise (a borderline miss: the intervals overlap but a mean lies beyond
   the other's interval): more repeats or tasks would tell.

**Borderline** (`borderline`): a FAIL at 95 % that a 99 % interval would not call, i.e. the
two intervals, each widened around its mean by z(0.995) / z(0.975) = 2.5758 / 1.9600 = 1.314
(`WIDEN_TO_99`: the normal quantiles' ratio, applied to the side facing the other interval:
the candidate's upper half, the baseline's lower half), overlap. ``submit --baseline`` re-runs
a borderline FAIL's compared tasks once more and decides on the combined data
(`runner.submit.confirm`): one confirm-on-retry, never more, and only for a FAIL (a PASS or an
INCONCLUSIVE is never re-run into a FAIL by asking again). A clear regression is not
borderline: it FAILs at once.

Runs not scored (``infra_error``, ``ceiling_reached``, ``interrupted``, not run, a judge
failure) are out of every denominator and reported per candidate (``not_scored``). Flaky tasks
(different scores across repeats of one variant) are listed per variant.

Exit code (SPEC.md, worst wins): 1 for a FAIL, 7 for an INCONCLUSIVE, 0 when every candidate
PASSes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.errors import EXIT_INCONCLUSIVE, EXIT_NEGATIVE, EXIT_OK, worst_exit_code

__all__ = [
    "BORDERLINE_RULE",
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "RULE",
    "WIDEN_TO_99",
    "borderline",
    "gate",
]

PASS = "PASS"  # noqa: S105 - a verdict, not a password
FAIL = "FAIL"
INCONCLUSIVE = "INCONCLUSIVE"
RULE = (
    "FAIL when the candidate's 95% interval lies wholly below the baseline's; PASS when the"
    " candidate's mean is inside or above the baseline's interval and the baseline's mean inside"
    " or below the candidate's; otherwise INCONCLUSIVE"
)
_CODES = {PASS: EXIT_OK, FAIL: EXIT_NEGATIVE, INCONCLUSIVE: EXIT_INCONCLUSIVE}
# z(0.995) / z(0.975): a 95 % normal interval's half-width widened to 99 % (module doc).
WIDEN_TO_99 = 2.5758 / 1.9600
BORDERLINE_RULE = (
    "a FAIL is borderline when the two 95% intervals, widened to 99% (x1.314 around their"
    " means), overlap; a borderline FAIL's compared tasks are run once more (both sides) and the"
    " gate decides on the combined data"
)


def borderline(candidate: Mapping[str, Any], baseline: Mapping[str, Any]) -> bool:
    """Whether a candidate that FAILs against ``baseline`` does so near the intervals' edge.

    Args:
        candidate: a variant of `runner.grading.scores.summarise` (``mean``, ``interval``).
        baseline: the baseline's entry.

    Returns:
        True when the candidate's upper half-width and the baseline's lower half-width, each
        times `WIDEN_TO_99`, make the intervals meet (module doc); False without intervals.
    """
    if candidate.get("interval") is None or baseline.get("interval") is None:
        return False
    mean, b_mean = float(candidate["mean"]), float(baseline["mean"])
    high, b_low = float(candidate["interval"][1]), float(baseline["interval"][0])
    reach_up = mean + WIDEN_TO_99 * (high - mean)
    reach_down = b_mean - WIDEN_TO_99 * (b_mean - b_low)
    return reach_up >= reach_down


def _verdict(candidate: Mapping[str, Any], baseline: Mapping[str, Any]) -> tuple[str, str]:
    """(verdict, reason in words) of one candidate against the baseline (module rule)."""
    name, base = candidate["variant"], baseline["variant"]
    for side in (baseline, candidate):
        if side.get("mean") is None:
            return INCONCLUSIVE, f"{side['variant']} has no scored episode"
        if side.get("interval") is None:
            return INCONCLUSIVE, (
                f"{side['variant']} has {side.get('episodes', 0)} scored episode(s), too few"
                " for an interval (more tasks or --repeats)"
            )
    mean = float(candidate["mean"])
    low, high = candidate["interval"]
    b_low, b_high = baseline["interval"]
    shown = (
        f"{name} {mean:.2f} [{low:.2f}, {high:.2f}] vs {base} {float(baseline['mean']):.2f}"
        f" [{b_low:.2f}, {b_high:.2f}]"
    )
    if high < b_low:
        return FAIL, f"{shown}: the whole interval is below the baseline's"
    if mean >= b_low and high >= float(baseline["mean"]):
        where = "above" if mean > b_high else "inside"
        return PASS, f"{shown}: no regression (the mean is {where} the baseline's interval)"
    return INCONCLUSIVE, (
        f"{shown}: the intervals overlap but a mean lies beyond the other's interval;"
        " more repeats or tasks would tell"
    )


def gate(scores: Mapping[str, Any], baseline: str) -> dict[str, Any]:
    """Answer PASS, FAIL or INCONCLUSIVE for each variant against ``baseline`` (module rule).

    Args:
        scores: `runner.grading.scores.summarise`'s result.
        baseline: the baseline variant's name.

    Returns:
        ``{"baseline", "rule", "exit_code", "verdicts": [{"variant", "verdict", "reason",
        "borderline" (a FAIL near the edge: `borderline`), "mean", "interval", "baseline_mean",
        "baseline_interval", "difference",
        "not_scored": {reason: n}}], "flaky": [{"variant", "tasks": [task_id]}]}``, one
        verdict per variant other than the baseline, in ``scores`` order.

    Raises:
        ValueError: ``baseline`` is not one of the variants.
    """
    by_name = {v["variant"]: v for v in scores.get("variants") or []}
    if baseline not in by_name:
        raise ValueError(f"the baseline {baseline!r} is not a variant ({', '.join(by_name)})")
    base = by_name[baseline]
    verdicts = []
    for name, entry in by_name.items():
        if name == baseline:
            continue
        verdict, reason = _verdict(entry, base)
        both = entry.get("mean") is not None and base.get("mean") is not None
        verdicts.append(
            {
                "variant": name,
                "verdict": verdict,
                "reason": reason,
                "borderline": verdict == FAIL and borderline(entry, base),
                "mean": entry.get("mean"),
                "interval": entry.get("interval"),
                "baseline_mean": base.get("mean"),
                "baseline_interval": base.get("interval"),
                "difference": entry["mean"] - base["mean"] if both else None,
                "not_scored": dict(entry.get("not_scored") or {}),
            }
        )
    return {
        "baseline": baseline,
        "rule": RULE,
        "exit_code": worst_exit_code(EXIT_OK, *(_CODES[v["verdict"]] for v in verdicts)),
        "verdicts": verdicts,
        "flaky": [
            {"variant": v["variant"], "tasks": list(v.get("flaky") or [])}
            for v in scores.get("variants") or []
            if v.get("flaky")
        ],
    }
