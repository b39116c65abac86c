"""Geometry of the charts: numbers for the template's inline SVG (no script needed).

The score chart (first screen, `score_chart`): one row per variant on the axis 0..1, a band
for the 95 % interval of its mean score and a dot at the mean (`runner.grading.scores`).

The rating chart (details, `rating_chart`):
one row per variant, on one rating axis: a light band for ``mu ± 3 sigma`` (openskill's own
uncertainty; its left end is the ordinal the standings sort by), a dark band for the bootstrap
interval of ``mu`` over tasks (`runner.grading.uncertainty`), and a dot at ``mu``. Only numbers
are computed here; names reach the SVG through the autoescaping template.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["rating_chart", "score_chart"]

WIDTH = 640
LEFT = 170  # room for the variant names
RIGHT = 20
ROW = 34
TOP = 12
AXIS = 30


def _ticks(low: float, high: float, count: int = 6) -> list[float]:
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= step * factor:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def rating_chart(variants: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Coordinates of the chart.

    Args:
        variants: ``report.json``'s ``grading.variants`` (``rating``, ``interval``).

    Returns:
        ``{"width", "height", "rows": [{"name", "y", "mu_x", "sigma": [x0, x1], "boot": [x0,
        x1] | None, "mu", "sigma_value", "boot_values"}], "ticks": [{"x", "label"}], "axis_y"}``.
    """
    spans: list[float] = []
    for entry in variants:
        rating = entry["rating"]
        spans += [rating["mu"] - 3 * rating["sigma"], rating["mu"] + 3 * rating["sigma"]]
        mu_interval = (entry.get("interval") or {}).get("mu")
        if mu_interval:
            spans += list(mu_interval)
    low, high = (min(spans), max(spans)) if spans else (0.0, 50.0)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    pad = (high - low) * 0.04
    low, high = low - pad, high + pad
    inner = WIDTH - LEFT - RIGHT

    def x(value: float) -> float:
        return round(LEFT + (value - low) / (high - low) * inner, 2)

    rows = []
    for i, entry in enumerate(variants):
        rating = entry["rating"]
        mu, sigma = float(rating["mu"]), float(rating["sigma"])
        mu_interval = (entry.get("interval") or {}).get("mu")
        rows.append(
            {
                "name": str(entry["variant"]),
                "y": TOP + i * ROW,
                "mid": TOP + i * ROW + ROW / 2 - 4,
                "mu_x": x(mu),
                "sigma": [x(mu - 3 * sigma), x(mu + 3 * sigma)],
                "boot": [x(mu_interval[0]), x(mu_interval[1])] if mu_interval else None,
                "mu": mu,
                "sigma_value": sigma,
                "boot_values": mu_interval,
            }
        )
    return _frame(rows, [{"x": x(t), "label": f"{t:g}"} for t in _ticks(low, high)])


def _frame(rows: list[dict[str, Any]], ticks: list[dict[str, Any]]) -> dict[str, Any]:
    """A chart's rows and ticks with its size and axis (both charts share the layout)."""
    axis_y = TOP + len(rows) * ROW
    return {
        "width": WIDTH,
        "height": axis_y + AXIS,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "rows": rows,
        "ticks": ticks,
        "axis_y": axis_y,
    }


def score_chart(variants: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Coordinates of the mean-score chart: on the axis 0..1, each variant's interval and mean.

    Args:
        variants: ``report.json``'s ``scores.variants`` (``mean``, ``interval``).

    Returns:
        ``{"width", "height", "left", "right", "rows": [{"name", "mid", "mean_x", "band":
        [x0, x1] | None, "mean", "interval"}], "ticks", "axis_y"}``, or None when a score lies
        outside [0, 1] (a custom judge's scale: the table says it) or nothing was scored.
    """
    values = [float(v["mean"]) for v in variants if v.get("mean") is not None]
    bounds = [b for v in variants for b in v.get("interval") or ()]
    if not values or any(not 0.0 <= x <= 1.0 for x in values + [float(b) for b in bounds]):
        return None
    inner = WIDTH - LEFT - RIGHT

    def x(value: float) -> float:
        return round(LEFT + value * inner, 2)

    rows = []
    for i, entry in enumerate(variants):
        mean, interval = entry.get("mean"), entry.get("interval")
        rows.append(
            {
                "name": str(entry["variant"]),
                "mid": TOP + i * ROW + ROW / 2 - 4,
                "mean_x": x(float(mean)) if mean is not None else None,
                "band": [x(interval[0]), x(interval[1])] if interval else None,
                "mean": mean,
                "interval": interval,
            }
        )
    return _frame(rows, [{"x": x(t / 5), "label": f"{t / 5:g}"} for t in range(6)])
