"""The page of a submission: ``report.json`` (and its traces) as the template's context.

`job_context` turns a `JobReport` into plain values for ``job.html.j2``: first screen, the verdict
(who wins, by how much, how sure), each variant's mean score with its 95 % interval, pass rate,
pass@k and pass^k, the score chart, the gate's answers and what was not scored; then the plan
(N × M × K, ceilings, spend by purpose, pairs not run and why), the verdicts on each pair in
words, the head-to-head matrix, the ratings (mu, sigma, ordinal) and their chart in a details
section, the per-task ranking with the judge's reasons, and one summary
row per episode; `job_data` reads every episode's trace (streaming, capped:
`runner.cli.render.html.episodes`) for the page's script, each model turn's USD taken from the
report's pairs (the page never opens the ledger). Every row or item the page's filters may
hide (episodes, per-task rows, pairs not run, incomplete runs, ungraded groups, unrecorded
reads, flaky tasks) names its task and the variant(s) and status(es) of the episodes it stands
for (`_Where`), so every list follows the filters. Nothing is escaped here: the template
autoescapes, the data goes through ``tojson``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runner.cli.render.html.charts import rating_chart, score_chart
from runner.cli.render.html.episodes import read_episode
from runner.cli.render.html.render import render_page
from runner.cli.render.report import group_by_reason
from runner.submit.jobreport import JobReport

__all__ = ["job_context", "job_data", "render_job"]


def _wtl(versus: Mapping[str, Mapping[str, int]]) -> tuple[int, int, int]:
    return (
        sum(v["wins"] for v in versus.values()),
        sum(v["ties"] for v in versus.values()),
        sum(v["losses"] for v in versus.values()),
    )


def _ratings(grading: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for entry in grading.get("variants") or []:
        rating = entry["rating"]
        wins, ties, losses = _wtl(entry.get("versus") or {})
        interval = (entry.get("interval") or {}).get("mu")
        rows.append(
            {
                "variant": entry["variant"],
                "mu": rating["mu"],
                "sigma": rating["sigma"],
                "ordinal": rating["ordinal"],
                "interval": interval,
                "mean_rank": entry.get("mean_rank"),
                "wins": wins,
                "ties": ties,
                "losses": losses,
                "graded": entry.get("tasks_graded"),
                "episodes": entry.get("episodes_by_status") or {},
            }
        )
    return rows


def _matrix(grading: Mapping[str, Any]) -> dict[str, Any]:
    names = [v["variant"] for v in grading.get("variants") or []]
    rates = ((grading.get("uncertainty") or {}).get("win_rates")) or {}
    versus = {v["variant"]: v.get("versus") or {} for v in grading.get("variants") or []}
    verdicts = {(v["a"], v["b"]): v["verdict"] for v in grading.get("verdicts") or []}
    rows = []
    for a in names:
        cells: list[dict[str, Any] | None] = []
        for b in names:
            if a == b:
                cells.append(None)
                continue
            wtl = versus.get(a, {}).get(b) or {"wins": 0, "ties": 0, "losses": 0}
            rate = rates.get(a, {}).get(b) or {}
            verdict = verdicts.get((a, b)) or {"better": "worse", "worse": "better"}.get(
                verdicts.get((b, a), ""), verdicts.get((b, a))
            )
            cells.append({"b": b, **wtl, **rate, "verdict": verdict})
        rows.append({"a": a, "cells": cells})
    return {"names": names, "rows": rows}


def _answers(detail: Mapping[str, Any]) -> list[str]:
    """A model judge's own answers (its reasons), one per order it was asked in."""
    answers = detail.get("answers") or ([detail] if "answer" in detail else [])
    orders = detail.get("orders") or [detail.get("order")]
    out = []
    for n, answer in enumerate(answers):
        if isinstance(answer, Mapping) and answer.get("answer") is not None:
            shown = orders[n] if n < len(orders) and orders[n] else []
            prefix = f"asked in order {', '.join(map(str, shown))}: " if shown else ""
            out.append(f"{prefix}{str(answer['answer'])[:500]}")
    return out


class _Where:
    """Each pair's status, for the filter attributes of every list the page shows.

    Every row or item a filter may hide names its task, its variant(s) and the status(es) of
    the episodes it stands for, so the page's variant, status and task filters apply to every
    table alike (an item without a value for a filter never matches it).
    """

    def __init__(self, pairs: Sequence[Mapping[str, Any]]) -> None:
        self.status: dict[tuple[str, str, int], str] = {}
        self.by_task: dict[str, list[tuple[str, str]]] = {}
        for p in pairs:
            variant, task = str(p["variant"]), str(p["task_id"])
            self.status[(variant, task, int(p.get("repeat") or 0))] = str(p["status"])
            self.by_task.setdefault(task, []).append((variant, str(p["status"])))

    def item(
        self, label: str, task: Any, variant: Any = None, repeat: Any = None
    ) -> dict[str, Any]:
        """``{"label", "task", "variants", "statuses"}`` of a pair (or a task's every pair)."""
        task = str(task)
        pairs = [
            (v, s) for v, s in self.by_task.get(task, []) if variant is None or v == str(variant)
        ]
        if variant is not None and isinstance(repeat, int):
            found = self.status.get((str(variant), task, repeat))
            pairs = [(str(variant), found)] if found else pairs
        return {
            "label": label,
            "task": task,
            "variants": sorted({v for v, _ in pairs} or ({str(variant)} if variant else set())),
            "statuses": sorted({s for _, s in pairs}),
        }


def _tasks(grading: Mapping[str, Any], where: _Where) -> list[dict[str, Any]]:
    rows = []
    for ranking in grading.get("tasks") or []:
        detail = ranking.get("detail") or {}
        reasons = detail.get("reasons") or {}
        answers = _answers(detail)
        for entry in ranking.get("ranking") or []:
            why = reasons.get(entry["variant"])
            repeat = ranking.get("repeat", 0)
            rows.append(
                {
                    "task_id": ranking["task_id"],
                    "repeat": repeat,
                    "rank": entry["rank"],
                    "variant": entry["variant"],
                    "status": where.status.get(
                        (str(entry["variant"]), str(ranking["task_id"]), int(repeat or 0))
                    ),
                    "score": entry.get("score"),
                    "reasons": (
                        [str(r) for r in why]
                        if why
                        else (["meets every expectation"] if isinstance(why, list) else answers)
                    ),
                    "order": detail.get("order"),
                    "agree": detail.get("agree"),
                }
            )
    return rows


def _grouped(
    entries: Sequence[Mapping[str, Any]], label: str, where: _Where
) -> list[dict[str, Any]]:
    """`group_by_reason`'s groups, each item with its filter attributes (`_Where.item`)."""
    by_reason: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        by_reason.setdefault(str(entry.get("reason") or "no reason given"), []).append(entry)
    groups = group_by_reason(entries, label)
    for group in groups:
        group["items"] = [
            where.item(
                text,
                entry.get("task_id"),
                entry.get("variant") if label == "pair" else None,
                entry.get("repeat", 0),
            )
            for text, entry in zip(group["items"], by_reason[group["reason"]], strict=True)
        ]
    return groups


def _incomplete(
    entries: Sequence[Mapping[str, Any]], where: _Where
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Incomplete runs (and judged-failed groups) by status: ``[(status, [item, ...])]``."""
    by_status: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        variant = entry.get("variant")
        label = f"{variant}×{entry.get('task_id')}" if variant else f"task {entry.get('task_id')}"
        item = where.item(label, entry.get("task_id"), variant, entry.get("repeat", 0))
        by_status.setdefault(str(entry.get("status")), []).append(item)
    return list(by_status.items())


def _unrecorded(unrecorded: Mapping[str, Any], where: _Where) -> list[dict[str, Any]]:
    """One row per listed read no recording served, with its pair's status."""
    rows = []
    for variant, entry in unrecorded.items():
        for call in entry.get("calls") or []:
            repeat = call.get("repeat")
            item = where.item("", call.get("task_id"), variant, repeat if repeat else 0)
            args = json.dumps(call.get("args"), ensure_ascii=False, sort_keys=True, default=str)
            rows.append(
                {**call, "variant": variant, "statuses": item["statuses"], "args_text": args}
            )
    return rows


def _flaky(gate: Mapping[str, Any], where: _Where) -> list[dict[str, Any]]:
    """Per variant, its flaky tasks as filterable items."""
    return [
        {
            "variant": f.get("variant"),
            "items": [where.item(str(t), t, f.get("variant")) for t in f.get("tasks") or []],
        }
        for f in gate.get("flaky") or []
    ]


def _ceilings(report: JobReport) -> list[dict[str, Any]]:
    rows = []
    for purpose, dims in report.ceilings.items():
        for dim, value in dims.items():
            rows.append(
                {"purpose": purpose, "dim": dim, "value": value["value"], "source": value["source"]}
            )
    return rows


def job_context(report: JobReport) -> dict[str, Any]:
    """Everything ``job.html.j2`` shows, from the report alone (no trace is read).

    Args:
        report: the report (one read back from an older ``report.json`` works too).
    """
    grading = report.grading or {}
    plan = report.plan
    pairs = [pair.to_json() for pair in report.pairs]
    where = _Where(pairs)
    variants = sorted({p["variant"] for p in pairs})
    statuses = sorted({p["status"] for p in pairs})
    gate = report.gate or {}
    stopped = [
        where.item(f"{s.get('variant')}×{s.get('task_id')}", s.get("task_id"), s.get("variant"))
        for s in report.stopped_by_ceiling
    ]
    return {
        "report": report,
        "plan": plan,
        "repeats": plan.get("repeats", 1),
        "ceilings": _ceilings(report),
        "spend": report.spend,
        "not_run": _grouped(report.not_run, "pair", where),
        "stopped": stopped,
        "incomplete": _incomplete(report.incomplete or [], where),
        "ungraded": _grouped(grading.get("ungraded") or [], "task", where),
        "grading": grading,
        "ratings": _ratings(grading),
        "chart": rating_chart(grading.get("variants") or []) if grading.get("variants") else None,
        "matrix": _matrix(grading),
        "tasks": _tasks(grading, where),
        "uncertainty": grading.get("uncertainty") or {},
        "verdicts": grading.get("verdicts") or [],
        "consistency": grading.get("consistency"),
        "pairs": [{"n": n, **p} for n, p in enumerate(pairs)],
        "variants": variants,
        "statuses": statuses,
        "unrecorded": report.unrecorded,
        "unrecorded_rows": _unrecorded(report.unrecorded, where),
        "verdict": report.verdict or {},
        "scores": report.scores or {},
        "score_chart": score_chart((report.scores or {}).get("variants") or []),
        "gate": gate,
        "flaky": _flaky(gate, where),
    }


def job_data(report: JobReport) -> dict[str, Any]:
    """The page's script data: one capped episode record per pair that has a trace.

    Args:
        report: the report (each pair's ``turn_usd``: the USD of its model turns).

    Returns:
        ``{"kind": "job", "job_id", "episodes": {pair number: episode}}``.
    """
    episodes: dict[str, Any] = {}
    for n, pair in enumerate(report.pairs):
        if pair.trace:
            episodes[str(n)] = read_episode(pair.trace, usd_per_turn=pair.turn_usd)
    return {"kind": "job", "job_id": report.job_id, "episodes": episodes}


def render_job(report: JobReport) -> str:
    """The page of a submission: its report and the traces it names (never the ledger).

    Args:
        report: the report.
    """
    data = job_data(report)
    return render_page("job.html.j2", {**job_context(report), "episodes": data["episodes"]}, data)
