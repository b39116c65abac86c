"""A submission's report as a value: `JobReport`, what ``report.json`` and ``--json`` hold.

`runner.submit.report.build_report` makes one at the end of a job; the renderers
(`runner.cli.render`: terminal tables, JSON, the HTML page) read its fields and open nothing
else (the page's per-turn USD is the pairs' `PairOutcome.turn_usd`, not a ledger read).
`JobReport.from_json` reads a ``report.json`` back (``report JOB_ID``, ``view``): a job folder
may be anyone's, so every top-level field and every pair is checked for its type, a wrong one is
an `InputError` naming the file and the field; a key an older report lacks takes its empty
value (older reports render too). The nested blocks (``plan``, ``ceilings``, ``limits``,
``spend``, ``grading``, ``unrecorded``, the lists of pairs not run) stay JSON objects: their
shapes are documented in `runner.submit.report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.errors import InputError
from runner.submit.scheduler import PairOutcome

__all__ = ["JobReport"]

# Top-level keys -> the JSON type each must have (None allowed where the value may be null).
_OBJECTS = ("policy", "plan", "ceilings", "limits", "runs_by_status", "spend", "unrecorded")
# Blocks an older report lacks (None there): objects when present.
_OPTIONAL_OBJECTS = ("scores", "gate", "verdict")
_LISTS = ("pairs", "not_run", "stopped_by_ceiling")


@dataclass(frozen=True)
class JobReport:
    """The report of one submission (SPEC.md exit codes; shape: `runner.submit.report`).

    Attributes:
        job_id: the job.
        status: ``complete``, ``ceiling_reached`` or ``interrupted``.
        exit_code: SPEC.md's exit code of the job.
        resumed: the job was continued with ``--resume``.
        policy: ``{name, hash, ...}`` of the policy in force.
        plan: the plan's figures (``runs``, ``formula``, ``variants``, ``backend``, ...).
        ceilings: ``{purpose: {dimension: {value, source}}}`` in effect.
        limits: ``{name: {value, source}}``: the per-run limits in effect.
        ceiling_reached: the ceiling that stopped the job (``purpose``, ``message``, ...).
        runs_by_status: episodes per status.
        pairs: one outcome per planned (variant, task, repeat), in plan order.
        not_run: ``{variant, task_id, repeat, reason}`` of each pair not run.
        stopped_by_ceiling: ``{variant, task_id, repeat}`` of each run a ceiling cut.
        incomplete: runs cut short and groups the judge failed on (never scored); None in a
            report written before the list existed.
        spend: ``{purpose: totals}`` charged to the job.
        rate_limit_wait_s: seconds this session's runs waited for rate limits, summed.
        grading: the tournament's report (`runner.grading.TournamentReport.to_dict`), or None.
        unrecorded: ``{variant: {count, calls}}``: reads no recording served.
        scores: the scores people know (`runner.grading.scores.summarise`): ``{"level",
            "spread", "methods", "k", "variants": [{"variant", "mean", "interval": [low, high],
            "pass_rate", "pass_interval", "pass_at_k", ..., "flaky", "not_scored"}]}``; None
            when nothing was graded (or in an older report).
        gate: ``submit --baseline``'s verdicts (`runner.grading.gate.gate`), or None.
        verdict: who wins, by how much, how sure (`runner.grading.headline.headline`), or
            None when nothing was graded.
    """

    job_id: str
    status: str
    exit_code: int
    resumed: bool = False
    policy: Mapping[str, Any] = field(default_factory=dict)
    plan: Mapping[str, Any] = field(default_factory=dict)
    ceilings: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)
    ceiling_reached: Mapping[str, Any] | None = None
    runs_by_status: Mapping[str, int] = field(default_factory=dict)
    pairs: tuple[PairOutcome, ...] = ()
    not_run: tuple[Mapping[str, Any], ...] = ()
    stopped_by_ceiling: tuple[Mapping[str, Any], ...] = ()
    incomplete: tuple[Mapping[str, Any], ...] | None = ()
    spend: Mapping[str, Any] = field(default_factory=dict)
    rate_limit_wait_s: float = 0.0
    grading: Mapping[str, Any] | None = None
    unrecorded: Mapping[str, Any] = field(default_factory=dict)
    scores: Mapping[str, Any] | None = None
    gate: Mapping[str, Any] | None = None
    verdict: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as ``report.json`` holds it (and ``--json`` prints it)."""
        return {
            "job_id": self.job_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "resumed": self.resumed,
            "policy": dict(self.policy),
            "plan": dict(self.plan),
            "ceilings": dict(self.ceilings),
            "limits": dict(self.limits),
            "ceiling_reached": dict(self.ceiling_reached) if self.ceiling_reached else None,
            "runs_by_status": dict(self.runs_by_status),
            "pairs": [pair.to_json() for pair in self.pairs],
            "not_run": [dict(x) for x in self.not_run],
            "stopped_by_ceiling": [dict(x) for x in self.stopped_by_ceiling],
            "incomplete": None if self.incomplete is None else [dict(x) for x in self.incomplete],
            "spend": dict(self.spend),
            "rate_limit_wait_s": self.rate_limit_wait_s,
            "grading": dict(self.grading) if self.grading is not None else None,
            "unrecorded": dict(self.unrecorded),
            "scores": dict(self.scores) if self.scores is not None else None,
            "gate": dict(self.gate) if self.gate is not None else None,
            "verdict": dict(self.verdict) if self.verdict is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, file: str) -> JobReport:
        """A report read back from ``report.json`` (hostile: every field's type checked).

        Args:
            data: the decoded file (an object).
            file: where it came from, for errors.

        Raises:
            InputError: a field of the wrong type, or a pair without its ``variant``,
                ``task_id`` or ``status`` (file and field named).
        """

        def need(
            key: str, kind: type | tuple[type, ...], default: Any, *, null: bool = False
        ) -> Any:
            value = data.get(key, default)
            if value is None and null:
                return None
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise InputError(f"not a {_name(kind)}", file=file, field=key)
            return value

        for key in _OBJECTS:
            need(key, dict, {})
        for key in _LISTS:
            need(key, list, [])
        optional = {key: need(key, dict, None, null=True) for key in _OPTIONAL_OBJECTS}
        _check_verdicts(optional, file)
        incomplete = need("incomplete", list, None, null=True)
        pairs = tuple(
            _pair(item, file=file, field=f"pairs[{i}]")
            for i, item in enumerate(data.get("pairs") or [])
        )
        return cls(
            job_id=need("job_id", str, ""),
            status=need("status", str, ""),
            exit_code=need("exit_code", int, 0),
            resumed=need("resumed", bool, False),
            policy=data.get("policy") or {},
            plan=data.get("plan") or {},
            ceilings=data.get("ceilings") or {},
            limits=data.get("limits") or {},
            ceiling_reached=need("ceiling_reached", dict, None, null=True),
            runs_by_status=data.get("runs_by_status") or {},
            pairs=pairs,
            not_run=tuple(_objects(data, "not_run", file)),
            stopped_by_ceiling=tuple(_objects(data, "stopped_by_ceiling", file)),
            incomplete=None if incomplete is None else tuple(_objects(data, "incomplete", file)),
            spend=data.get("spend") or {},
            rate_limit_wait_s=float(need("rate_limit_wait_s", (int, float), 0.0)),
            grading=need("grading", dict, None, null=True),
            unrecorded=_unrecorded(data.get("unrecorded") or {}, file),
            **optional,
        )


_NUMBERS = ("mean", "difference", "baseline_mean", "pass_rate", "pass_at_k", "pass_hat_k", "rate")
_INTERVALS = (
    "interval",
    "baseline_interval",
    "pass_interval",
    "pass_at_k_interval",
    "pass_hat_k_interval",
)
_TEXTS = ("variant", "verdict", "reason", "text", "winner", "leader", "runner_up", "how_sure")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_entry(entry: Any, *, file: str, field: str) -> None:
    """One figure-bearing object of ``scores``, ``gate`` or ``verdict`` (the renderers' diet)."""
    if not isinstance(entry, dict):
        raise InputError("not a JSON object", file=file, field=field)
    for key in _NUMBERS:
        if entry.get(key) is not None and not _number(entry[key]):
            raise InputError("not a number", file=file, field=f"{field}.{key}")
    for key in _INTERVALS:
        value = entry.get(key)
        if value is not None and not (
            isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value)
        ):
            raise InputError("not a [low, high] pair of numbers", file=file, field=f"{field}.{key}")
    for key in _TEXTS:
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise InputError("not a string", file=file, field=f"{field}.{key}")
    key = "tasks" if field.startswith("gate.flaky") else "flaky"  # elsewhere tasks is a count
    value = entry.get(key)
    if value is not None and not (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        raise InputError("not a list of strings", file=file, field=f"{field}.{key}")
    missing = entry.get("not_scored")
    if missing is not None and not (
        isinstance(missing, dict) and all(isinstance(n, int) for n in missing.values())
    ):
        raise InputError("not an object of counts", file=file, field=f"{field}.not_scored")


def _check_verdicts(blocks: Mapping[str, Any], file: str) -> None:
    """Check the ``scores``, ``gate`` and ``verdict`` blocks a renderer reads (types only).

    Raises:
        InputError: a wrong type, with the file and the field's path.
    """
    lists = (("scores", "variants"), ("gate", "verdicts"), ("gate", "flaky"))
    for block, key in lists:
        items = (blocks.get(block) or {}).get(key) or []
        if not isinstance(items, list):
            raise InputError("not a list", file=file, field=f"{block}.{key}")
        for i, item in enumerate(items):
            _check_entry(item, file=file, field=f"{block}.{key}[{i}]")
    verdict = blocks.get("verdict")
    if verdict is not None:
        _check_entry(verdict, file=file, field="verdict")
        if verdict.get("win_rate") is not None:
            _check_entry(verdict["win_rate"], file=file, field="verdict.win_rate")


def _name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "JSON object", list: "list", str: "string", int: "number", float: "number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(sorted({names.get(k, k.__name__) for k in kinds}))


def _unrecorded(value: Mapping[str, Any], file: str) -> Mapping[str, Any]:
    """``unrecorded`` checked: ``{variant: {"count": whole number, "calls": [object, ...]}}``."""
    for variant, entry in value.items():
        field = f"unrecorded.{variant}"
        if not isinstance(entry, dict):
            raise InputError("not a JSON object", file=file, field=field)
        count = entry.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError("not a whole number", file=file, field=f"{field}.count")
        calls = entry.get("calls", [])
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            raise InputError("not a list of objects", file=file, field=f"{field}.calls")
    return value


def _objects(data: Mapping[str, Any], key: str, file: str) -> list[Mapping[str, Any]]:
    items = data.get(key) or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError("not a JSON object", file=file, field=f"{key}[{i}]")
    return list(items)


def _pair(item: Any, *, file: str, field: str) -> PairOutcome:
    """One ``pairs`` entry of a ``report.json`` as a `PairOutcome` (types checked)."""
    if not isinstance(item, dict):
        raise InputError("not a JSON object", file=file, field=field)
    for key in ("variant", "task_id", "status"):
        if not isinstance(item.get(key), str):
            raise InputError("not a string", file=file, field=f"{field}.{key}")
    for key, kind in (("repeat", int), ("attempt", int)):
        value = item.get(key, 0)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError("not a whole number", file=file, field=f"{field}.{key}")
    trace = item.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise InputError("not a string", file=file, field=f"{field}.trace")
    wait = item.get("rate_limit_wait_s")
    if wait is not None and (not isinstance(wait, int | float) or isinstance(wait, bool)):
        raise InputError("not a number", file=file, field=f"{field}.rate_limit_wait_s")
    usd = item.get("turn_usd") or []
    if not isinstance(usd, list) or not all(
        u is None or (isinstance(u, int | float) and not isinstance(u, bool)) for u in usd
    ):
        raise InputError("not a list of numbers", file=file, field=f"{field}.turn_usd")
    return PairOutcome(
        item["variant"],
        item["task_id"],
        repeat=item.get("repeat", 0),
        status=item["status"],
        attempt=item.get("attempt", 0),
        trace=trace,
        rate_limit_wait_s=wait,
        turn_usd=tuple(usd),
    )
